//! The two metadata documents: a protected resource's (RFC 9728) and an authorization server's
//! (RFC 8414, or OpenID Connect discovery), where each is looked for, and what each must say.

use serde::Deserialize;
use url::Url;

use crate::OAuthError;
use crate::transport::{Transport, excerpt, get_json, send};

/// A protected resource's metadata (RFC 9728 §2), the fields the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResourceMetadata {
    /// Where the document came from.
    pub url: Url,
    /// `resource`: the resource identifier; must be the server's URL (RFC 9728 §3.3).
    pub resource: Url,
    /// `authorization_servers`: the issuers the resource takes tokens from.
    pub authorization_servers: Vec<Url>,
    /// `scopes_supported`.
    pub scopes_supported: Vec<String>,
}

/// An authorization server's metadata (RFC 8414 §2), the fields the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServerMetadata {
    /// Where the document came from (`None`: the 2025-03-26 default endpoints, no document).
    pub url: Option<Url>,
    /// `issuer`.
    pub issuer: Url,
    /// `issuer` exactly as the document wrote it: what an authorization response's `iss` is
    /// compared with (RFC 9207 §2.4: simple string comparison, no normalisation).
    pub issuer_text: String,
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3): the server promises `iss`
    /// in every authorization response, so one without it is refused.
    pub authorization_response_iss_parameter_supported: bool,
    /// `authorization_endpoint`.
    pub authorization_endpoint: Url,
    /// `token_endpoint`.
    pub token_endpoint: Url,
    /// `registration_endpoint` (RFC 7591 dynamic registration).
    pub registration_endpoint: Option<Url>,
    /// `revocation_endpoint` (RFC 7009).
    pub revocation_endpoint: Option<Url>,
    /// `scopes_supported`.
    pub scopes_supported: Vec<String>,
    /// `code_challenge_methods_supported`.
    pub code_challenge_methods_supported: Vec<String>,
    /// `token_endpoint_auth_methods_supported` (absent: `client_secret_basic`, RFC 8414 §2).
    pub token_endpoint_auth_methods_supported: Vec<String>,
    /// `grant_types_supported`.
    pub grant_types_supported: Vec<String>,
    /// `client_id_metadata_document_supported` (MCP 2025-11-25).
    pub client_id_metadata_document_supported: bool,
    /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1): the server binds tokens to a key.
    pub dpop_signing_alg_values_supported: Vec<String>,
}

impl AuthServerMetadata {
    /// Whether PKCE with S256 may be used. The 2025-03-26 defaults (no document) assume it, as
    /// that revision required servers to support it.
    pub fn supports_s256(&self) -> bool {
        self.url.is_none()
            || self
                .code_challenge_methods_supported
                .iter()
                .any(|m| m == "S256")
    }

    /// The 2025-03-26 default endpoints of an authorization server at `origin`, when it publishes
    /// no metadata: `/authorize`, `/token`, `/register`.
    pub fn defaults(origin: &Url) -> AuthServerMetadata {
        let at = |path: &str| {
            let mut url = origin.clone();
            url.set_path(path);
            url.set_query(None);
            url
        };
        AuthServerMetadata {
            url: None,
            issuer: at("/"),
            issuer_text: at("/").as_str().trim_end_matches('/').to_string(),
            authorization_response_iss_parameter_supported: false,
            authorization_endpoint: at("/authorize"),
            token_endpoint: at("/token"),
            registration_endpoint: Some(at("/register")),
            revocation_endpoint: None,
            scopes_supported: Vec::new(),
            code_challenge_methods_supported: vec!["S256".into()],
            token_endpoint_auth_methods_supported: Vec::new(),
            grant_types_supported: Vec::new(),
            client_id_metadata_document_supported: false,
            dpop_signing_alg_values_supported: Vec::new(),
        }
    }
}

/// Checks a URL the client will send requests to: http or https, a host, no credentials.
pub fn check_url(text: &str) -> Result<Url, OAuthError> {
    let bad = |problem: &str| OAuthError::BadUrl {
        url: text.to_string(),
        problem: problem.to_string(),
    };
    let url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("only http and https are used"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials in a URL are not sent"));
    }
    Ok(url)
}

/// Whether `url` is https, or http to a loopback host (where the loopback interface carries it).
pub fn is_secure(url: &Url) -> bool {
    url.scheme() == "https"
        || match url.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        }
}

/// The canonical URI of an MCP server (RFC 8707 and the MCP spec): lower-case scheme and host
/// (the URL parser does that), no fragment, no query, no trailing slash unless the path is `/`.
pub fn canonical_resource(server: &Url) -> String {
    let mut url = server.clone();
    url.set_fragment(None);
    url.set_query(None);
    url.to_string().trim_end_matches('/').to_string()
}

/// `https://host/.well-known/<name><path>`: a well-known URI inserted before the path.
fn inserted(base: &Url, name: &str) -> Url {
    let mut url = base.clone();
    let path = base.path().trim_end_matches('/');
    url.set_path(&format!("/.well-known/{name}{path}"));
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// Where a server's protected-resource metadata may be, in order (RFC 9728 §3.1 and the MCP
/// spec): the path-suffixed well-known URI, then the one at the origin's root.
pub fn resource_metadata_urls(server: &Url) -> Vec<Url> {
    let mut urls = vec![inserted(server, "oauth-protected-resource")];
    let mut root = server.clone();
    root.set_path("/");
    let root = inserted(&root, "oauth-protected-resource");
    if !urls.contains(&root) {
        urls.push(root);
    }
    urls
}

/// Where an issuer's metadata may be, in the MCP spec's order: with a path, RFC 8414's inserted
/// form, OpenID's inserted form, then OpenID's appended form; without one, RFC 8414's then
/// OpenID's.
pub fn auth_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut urls = vec![
        inserted(issuer, "oauth-authorization-server"),
        inserted(issuer, "openid-configuration"),
    ];
    if !path.is_empty() {
        let mut appended = issuer.clone();
        appended.set_path(&format!("{path}/.well-known/openid-configuration"));
        appended.set_query(None);
        urls.push(appended);
    }
    urls
}

/// Fetches a JSON document; `Ok(None)` when the server has none there (404, 405 or 410, which
/// the discovery moves past).
pub(crate) async fn fetch_document<T: Transport>(
    transport: &T,
    url: &Url,
) -> Result<Option<serde_json::Value>, OAuthError> {
    let response = send(transport, get_json(url)).await?;
    match response.status {
        200 => {}
        404 | 405 | 410 => return Ok(None),
        status => {
            return Err(OAuthError::Status {
                url: url.to_string(),
                status,
                body: excerpt(&response.body),
            });
        }
    }
    let value: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| OAuthError::bad(url.as_str(), "(document)", format!("not JSON: {e}")))?;
    if !value.is_object() {
        return Err(OAuthError::bad(
            url.as_str(),
            "(document)",
            "not a JSON object",
        ));
    }
    Ok(Some(value))
}

#[derive(Deserialize)]
struct Loose(serde_json::Map<String, serde_json::Value>);

/// Field readers that name the document and field in every error.
struct Fields<'a> {
    doc: &'a str,
    map: serde_json::Map<String, serde_json::Value>,
}

impl Fields<'_> {
    fn string(&self, field: &str) -> Result<Option<String>, OAuthError> {
        match self.map.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(OAuthError::bad(self.doc, field, "is not a string")),
        }
    }

    /// A URL field: http(s), a host, no credentials, and https unless loopback (every
    /// authorization server endpoint carries codes, secrets or tokens).
    fn url(&self, field: &str) -> Result<Option<Url>, OAuthError> {
        let Some(text) = self.string(field)? else {
            return Ok(None);
        };
        let url = check_url(&text).map_err(|e| OAuthError::bad(self.doc, field, e.to_string()))?;
        if !is_secure(&url) {
            return Err(OAuthError::bad(
                self.doc,
                field,
                format!("`{url}` is not https (only a loopback host may use http)"),
            ));
        }
        Ok(Some(url))
    }

    fn boolean(&self, field: &str) -> Result<bool, OAuthError> {
        match self.map.get(field) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(serde_json::Value::Bool(b)) => Ok(*b),
            Some(_) => Err(OAuthError::bad(self.doc, field, "is not a boolean")),
        }
    }

    fn required_url(&self, field: &str) -> Result<Url, OAuthError> {
        self.url(field)?
            .ok_or_else(|| OAuthError::bad(self.doc, field, "is missing"))
    }

    fn strings(&self, field: &str) -> Result<Vec<String>, OAuthError> {
        match self.map.get(field) {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        OAuthError::bad(self.doc, field, "holds an item that is not a string")
                    })
                })
                .collect(),
            Some(_) => Err(OAuthError::bad(self.doc, field, "is not an array")),
        }
    }
}

fn fields(doc: &Url, value: serde_json::Value) -> Fields<'_> {
    let map = serde_json::from_value::<Loose>(value)
        .map(|l| l.0)
        .unwrap_or_default();
    Fields {
        doc: doc.as_str(),
        map,
    }
}

/// Reads and checks a protected-resource metadata document fetched from `doc` for the server
/// `server`: `resource` must be the server's canonical URI (or the origin a root-level document
/// describes), and at least one authorization server must be named.
pub fn parse_resource_metadata(
    doc: &Url,
    server: &Url,
    value: serde_json::Value,
) -> Result<ProtectedResourceMetadata, OAuthError> {
    let f = fields(doc, value);
    let resource = f.required_url("resource")?;
    let named = canonical_resource(&resource);
    let wanted = canonical_resource(server);
    let origin_form = {
        let mut o = server.clone();
        o.set_path("/");
        canonical_resource(&o)
    };
    if named != wanted && named != origin_form {
        return Err(OAuthError::bad(
            doc.as_str(),
            "resource",
            format!("names `{named}`, not the server `{wanted}` (RFC 9728 §3.3)"),
        ));
    }
    let servers = f.strings("authorization_servers")?;
    if servers.is_empty() {
        return Err(OAuthError::bad(
            doc.as_str(),
            "authorization_servers",
            "names no authorization server",
        ));
    }
    let authorization_servers = servers
        .iter()
        .map(|s| {
            let bad =
                |problem: String| OAuthError::bad(doc.as_str(), "authorization_servers", problem);
            let url = check_url(s).map_err(|e| bad(e.to_string()))?;
            if !is_secure(&url) {
                return Err(bad(format!(
                    "`{url}` is not https (only a loopback host may use http)"
                )));
            }
            Ok(url)
        })
        .collect::<Result<_, _>>()?;
    Ok(ProtectedResourceMetadata {
        url: doc.clone(),
        resource,
        authorization_servers,
        scopes_supported: f.strings("scopes_supported")?,
    })
}

/// Reads and checks an authorization server's metadata fetched from `doc` for `issuer`: the
/// `issuer` field must be the issuer asked for (RFC 8414 §3.3), and the two endpoints present.
pub fn parse_auth_server_metadata(
    doc: &Url,
    issuer: &Url,
    value: serde_json::Value,
) -> Result<AuthServerMetadata, OAuthError> {
    parse_as_metadata(doc, issuer, value, false)
}

/// The 2025-03-26 fallback's reading of the metadata at an MCP server's own origin (no
/// protected-resource metadata): that revision did not tie `issuer` to the URL, so an issuer of
/// the same origin (`https://mcp.example/oauth`) is taken; one of another origin is still refused.
pub fn parse_legacy_auth_server_metadata(
    doc: &Url,
    origin: &Url,
    value: serde_json::Value,
) -> Result<AuthServerMetadata, OAuthError> {
    parse_as_metadata(doc, origin, value, true)
}

fn parse_as_metadata(
    doc: &Url,
    issuer: &Url,
    value: serde_json::Value,
    same_origin_is_enough: bool,
) -> Result<AuthServerMetadata, OAuthError> {
    let f = fields(doc, value);
    let named = f.required_url("issuer")?;
    let issuer_text = f.string("issuer")?.unwrap_or_default();
    let same = named.as_str().trim_end_matches('/') == issuer.as_str().trim_end_matches('/');
    let same_origin = same_origin_is_enough && named.origin() == issuer.origin();
    if !(same || same_origin) {
        return Err(OAuthError::bad(
            doc.as_str(),
            "issuer",
            format!("names `{named}`, not the issuer asked for `{issuer}` (RFC 8414 §3.3)"),
        ));
    }
    Ok(AuthServerMetadata {
        url: Some(doc.clone()),
        issuer: named,
        issuer_text,
        authorization_response_iss_parameter_supported: f
            .boolean("authorization_response_iss_parameter_supported")?,
        authorization_endpoint: f.required_url("authorization_endpoint")?,
        token_endpoint: f.required_url("token_endpoint")?,
        registration_endpoint: f.url("registration_endpoint")?,
        revocation_endpoint: f.url("revocation_endpoint")?,
        scopes_supported: f.strings("scopes_supported")?,
        code_challenge_methods_supported: f.strings("code_challenge_methods_supported")?,
        token_endpoint_auth_methods_supported: f
            .strings("token_endpoint_auth_methods_supported")?,
        grant_types_supported: f.strings("grant_types_supported")?,
        client_id_metadata_document_supported: f
            .boolean("client_id_metadata_document_supported")?,
        dpop_signing_alg_values_supported: f.strings("dpop_signing_alg_values_supported")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn well_known_forms() {
        let prm: Vec<String> = resource_metadata_urls(&u("https://mcp.example.com/public/mcp"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            prm,
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource"
            ]
        );
        let asm: Vec<String> = auth_server_metadata_urls(&u("https://auth.example.com/tenant1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            asm,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            auth_server_metadata_urls(&u("https://auth.example.com")).len(),
            2
        );
        assert_eq!(
            canonical_resource(&u("HTTPS://MCP.Example.com/mcp/#x")),
            "https://mcp.example.com/mcp"
        );
    }

    #[test]
    fn a_document_for_another_resource_or_issuer_is_refused() {
        let doc = u("https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
        let err = parse_resource_metadata(
            &doc,
            &u("https://mcp.example.com/mcp"),
            serde_json::json!({"resource": "https://evil.example/mcp", "authorization_servers": ["https://auth.example"]}),
        )
        .unwrap_err();
        assert!(
            matches!(err, OAuthError::BadDocument { ref field, .. } if field == "resource"),
            "{err}"
        );
        let err = parse_resource_metadata(
            &doc,
            &u("https://mcp.example.com/mcp"),
            serde_json::json!({"resource": "https://mcp.example.com/mcp", "authorization_servers": []}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("authorization_servers"), "{err}");
        let asdoc = u("https://auth.example/.well-known/oauth-authorization-server");
        let err = parse_auth_server_metadata(
            &asdoc,
            &u("https://auth.example"),
            serde_json::json!({"issuer": "https://other.example", "authorization_endpoint": "https://auth.example/a", "token_endpoint": "https://auth.example/t"}),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "https://auth.example/.well-known/oauth-authorization-server: field `issuer`"
            ),
            "{err}"
        );
        let err = parse_auth_server_metadata(
            &asdoc,
            &u("https://auth.example"),
            serde_json::json!({"issuer": "https://auth.example", "authorization_endpoint": "javascript:x", "token_endpoint": "https://auth.example/t"}),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("field `authorization_endpoint`"),
            "{err}"
        );
        let err = parse_auth_server_metadata(
            &asdoc,
            &u("https://auth.example"),
            serde_json::json!({"issuer": "https://auth.example", "authorization_endpoint": "https://auth.example/a", "token_endpoint": "http://auth.example/t"}),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("field `token_endpoint`: `http://auth.example/t` is not https"),
            "{err}"
        );
        let err = parse_resource_metadata(
            &doc,
            &u("https://mcp.example.com/mcp"),
            serde_json::json!({"resource": "https://mcp.example.com/mcp", "authorization_servers": ["http://auth.example"]}),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("field `authorization_servers`: `http://auth.example/` is not https"),
            "{err}"
        );
    }
}
