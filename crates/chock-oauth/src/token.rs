//! A token and what it may be sent to. A token is bound to the resource it was issued for: it goes
//! to that resource's origin only, never to another, and never on a redirect (the transport
//! follows none).

use serde::{Deserialize, Serialize};
use url::Url;

/// A secret string (access token, refresh token, client secret). Its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the request that carries it and the log's redaction funnel only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// An access token for one resource, with what refreshes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// The access token.
    pub access_token: Secret,
    /// `token_type` (Bearer).
    pub token_type: String,
    /// When it expires, in seconds since the Unix epoch (`None`: the server did not say).
    pub expires_at: Option<u64>,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Secret>,
    /// The scope granted (the server's answer, else the scope asked for).
    pub scope: Option<String>,
    /// The resource (RFC 8707) the token was issued for: the server's canonical URI.
    pub resource: String,
}

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn origin_of(url: &Url) -> url::Origin {
    url.origin()
}

impl Token {
    /// Whether this token may be sent to `url`: only to the origin (scheme, host, port) of the
    /// resource it was issued for, and only over https unless that origin is loopback.
    pub fn may_send_to(&self, url: &Url) -> bool {
        let Ok(resource) = Url::parse(&self.resource) else {
            return false;
        };
        let same = origin_of(&resource) == origin_of(url) && origin_of(url).is_tuple();
        let secure = url.scheme() == "https"
            || matches!(url.host(), Some(url::Host::Ipv4(a)) if a.is_loopback())
            || matches!(url.host(), Some(url::Host::Ipv6(a)) if a.is_loopback())
            || url.host_str() == Some("localhost");
        same && secure
    }

    /// The `Authorization` header value for a request to `url`, or `None` when the token may not
    /// go there ([`Token::may_send_to`]).
    pub fn authorization_for(&self, url: &Url) -> Option<String> {
        let scheme = if self.token_type == "DPoP" {
            "DPoP"
        } else {
            "Bearer"
        };
        self.may_send_to(url)
            .then(|| format!("{scheme} {}", self.access_token.expose()))
    }

    /// Whether it has expired, or will within `margin_secs` (then the host refreshes first).
    pub fn expires_within(&self, margin_secs: u64) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now().saturating_add(margin_secs))
    }

    /// The scopes granted, one each.
    pub fn scopes(&self) -> Vec<&str> {
        self.scope
            .as_deref()
            .map(|s| s.split_whitespace().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(resource: &str) -> Token {
        Token {
            access_token: Secret::new("at-secret"),
            token_type: "Bearer".into(),
            expires_at: None,
            refresh_token: Some(Secret::new("rt-secret")),
            scope: None,
            resource: resource.into(),
        }
    }

    #[test]
    fn bound_to_its_origin() {
        let t = token("https://mcp.example.com/mcp");
        let ok = |s: &str| t.may_send_to(&Url::parse(s).unwrap());
        assert!(ok("https://mcp.example.com/mcp"));
        assert!(ok("https://mcp.example.com/mcp/other"));
        assert!(!ok("https://evil.example.com/mcp"));
        assert!(!ok("https://mcp.example.com:8443/mcp"));
        assert!(!ok("http://mcp.example.com/mcp"));
        assert!(!ok("https://mcp.example.com.evil.example/mcp"));
        let local = token("http://127.0.0.1:8080/mcp");
        assert!(local.may_send_to(&Url::parse("http://127.0.0.1:8080/mcp").unwrap()));
        assert!(!local.may_send_to(&Url::parse("http://127.0.0.1:8081/mcp").unwrap()));
    }

    #[test]
    fn debug_hides_the_secrets() {
        let shown = format!("{:?}", token("https://a.example"));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
