//! The chain a client walks for one MCP server: from the server's 401 challenge (or the
//! well-known URLs) to its protected-resource metadata, to its authorization server's metadata,
//! with the 2025-03-26 fallbacks; then the authorization request, the code exchange, refresh,
//! client credentials and step-up on `insufficient_scope`.

use url::Url;

use crate::OAuthError;
use crate::challenge::Challenge;
use crate::client::{RegisteredClient, token_request};
use crate::loopback::AuthorizationResponse;
use crate::metadata::{
    AuthServerMetadata, ProtectedResourceMetadata, auth_server_metadata_urls, canonical_resource,
    check_url, fetch_document, parse_auth_server_metadata, parse_legacy_auth_server_metadata,
    parse_resource_metadata, resource_metadata_urls,
};
use crate::pkce::{Pkce, random_token};
use crate::token::Token;
use crate::transport::{HttpRequest, HttpResponse, Transport, send};

/// What discovery found for one server.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The MCP server's URL.
    pub server: Url,
    /// Its protected-resource metadata (`None`: none published, the 2025-03-26 fallback).
    pub resource_metadata: Option<ProtectedResourceMetadata>,
    /// The authorization server chosen (the first the resource names).
    pub auth_server: AuthServerMetadata,
    /// The `resource` parameter: the server's canonical URI.
    pub resource: String,
    /// The scope to ask for: the challenge's, else every scope the resource lists, else none.
    pub scope: Option<String>,
}

impl Discovery {
    /// The host of the authorization server the person would be sent to (what the question
    /// shows; the transport decides `net.connect` to it).
    pub fn auth_server_host(&self) -> String {
        self.auth_server
            .authorization_endpoint
            .host_str()
            .unwrap_or_default()
            .to_string()
    }

    /// An authorization request (code flow with PKCE S256, a fresh `state`) for `client`,
    /// redirecting to `redirect_uri`. Refused when the server does not list S256.
    pub fn authorization_request(
        &self,
        client: &RegisteredClient,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<AuthorizationRequest, OAuthError> {
        if !self.auth_server.supports_s256() {
            return Err(OAuthError::NoPkce {
                issuer: self.auth_server.issuer.to_string(),
            });
        }
        let scope = with_offline_access(scope, &self.auth_server);
        let scope = scope.as_deref();
        let pkce = Pkce::new();
        let state = random_token();
        let mut url = self.auth_server.authorization_endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("code_challenge", pkce.challenge())
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &self.resource);
            if let Some(scope) = scope {
                q.append_pair("scope", scope);
            }
        }
        Ok(AuthorizationRequest {
            url,
            state,
            pkce,
            redirect_uri: redirect_uri.to_string(),
            scope: scope.map(str::to_string),
        })
    }

    /// Whether an authorization response's `iss` (RFC 9207) says it came from this
    /// authorization server: when present it must be the metadata's `issuer` exactly (a simple
    /// string comparison: a trailing slash or a case change is a different issuer); when absent
    /// it must not have been promised (`authorization_response_iss_parameter_supported`). A
    /// refused response's code is never sent to the token endpoint (a mix-up attack would hand
    /// it to another server).
    pub fn check_issuer(&self, iss: Option<&str>) -> Result<(), OAuthError> {
        let expected = &self.auth_server.issuer_text;
        match iss {
            Some(got) if got == expected => Ok(()),
            None if !self
                .auth_server
                .authorization_response_iss_parameter_supported =>
            {
                Ok(())
            }
            got => Err(OAuthError::IssuerMismatch {
                expected: expected.clone(),
                got: got.map(str::to_string),
            }),
        }
    }

    /// Exchanges the redirect's code for a token (with the PKCE verifier and the resource), once
    /// its `iss` is checked ([`Discovery::check_issuer`]).
    pub async fn exchange_code<T: Transport>(
        &self,
        transport: &T,
        client: &RegisteredClient,
        request: &AuthorizationRequest,
        response: &AuthorizationResponse,
    ) -> Result<Token, OAuthError> {
        self.check_issuer(response.iss.as_deref())?;
        let code = response.code.as_str();
        token_request(
            transport,
            &self.auth_server,
            client,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", &request.redirect_uri),
                ("code_verifier", request.pkce.verifier()),
            ],
            &self.resource,
            request.scope.as_deref(),
        )
        .await
    }

    /// A fresh token from `token`'s refresh token (kept when the server issues no new one).
    pub async fn refresh<T: Transport>(
        &self,
        transport: &T,
        client: &RegisteredClient,
        token: &Token,
    ) -> Result<Token, OAuthError> {
        let Some(refresh) = &token.refresh_token else {
            return Err(OAuthError::Refused {
                endpoint: self.auth_server.token_endpoint.to_string(),
                error: "invalid_grant".into(),
                description: Some("the token has no refresh token; sign in again".into()),
            });
        };
        let mut fresh = token_request(
            transport,
            &self.auth_server,
            client,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh.expose()),
            ],
            &token.resource,
            token.scope.as_deref(),
        )
        .await?;
        if fresh.refresh_token.is_none() {
            fresh.refresh_token = token.refresh_token.clone();
        }
        Ok(fresh)
    }

    /// A token for the client itself (non-interactive use: the client credentials grant).
    pub async fn client_credentials<T: Transport>(
        &self,
        transport: &T,
        client: &RegisteredClient,
        scope: Option<&str>,
    ) -> Result<Token, OAuthError> {
        let mut params = vec![("grant_type", "client_credentials")];
        if let Some(scope) = scope {
            params.push(("scope", scope));
        }
        token_request(
            transport,
            &self.auth_server,
            client,
            &params,
            &self.resource,
            scope,
        )
        .await
    }
}

/// Sends `request` to a protected resource with `token` attached, if the token may go there
/// ([`Token::may_send_to`]): to another origin it is refused before anything is sent. A redirect
/// is not followed (the token would go with it): it comes back as [`OAuthError::Redirected`]. A
/// 401 or 403 is returned as it is, for the caller to read its challenge.
pub async fn send_with_token<T: Transport>(
    transport: &T,
    token: &Token,
    mut request: HttpRequest,
) -> Result<HttpResponse, OAuthError> {
    let Some(value) = token.authorization_for(&request.url) else {
        return Err(OAuthError::NotForThisOrigin {
            url: request.url.to_string(),
            resource: token.resource.clone(),
        });
    };
    request
        .headers
        .retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
    request.headers.push(("authorization".into(), value));
    send(transport, request).await
}

/// One authorization request in flight: the URL the person opens, and what checks the answer.
#[derive(Debug)]
pub struct AuthorizationRequest {
    /// The URL to open in the person's browser.
    pub url: Url,
    /// The `state` the redirect must carry back.
    pub state: String,
    /// The PKCE pair (the verifier goes in the token request).
    pub pkce: Pkce,
    /// The loopback redirect URI.
    pub redirect_uri: String,
    /// The scope asked for.
    pub scope: Option<String>,
}

/// Walks discovery for the server at `server_url`, starting from its 401 `challenge` if one was
/// met. Every request goes through `transport`.
pub async fn discover<T: Transport>(
    transport: &T,
    server_url: &str,
    challenge: Option<&Challenge>,
) -> Result<Discovery, OAuthError> {
    let server = check_url(server_url)?;
    let mut candidates = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        candidates.push(check_url(url)?);
    }
    candidates.extend(resource_metadata_urls(&server));
    let mut resource_metadata = None;
    for url in &candidates {
        if let Some(doc) = fetch_document(transport, url).await? {
            resource_metadata = Some(parse_resource_metadata(url, &server, doc)?);
            break;
        }
    }
    let auth_server = match &resource_metadata {
        Some(prm) => {
            let issuer = &prm.authorization_servers[0];
            find_auth_server(transport, issuer, false)
                .await?
                .ok_or_else(|| OAuthError::NotFound {
                    what: "authorization server metadata",
                    tried: list(&auth_server_metadata_urls(issuer)),
                })?
        }
        None => {
            // 2025-03-26: the authorization server is the MCP server's origin; its metadata at
            // the origin's well-known URL, else the default endpoints.
            let mut origin = server.clone();
            origin.set_path("/");
            origin.set_query(None);
            origin.set_fragment(None);
            match find_auth_server(transport, &origin, true).await? {
                Some(found) => found,
                None => AuthServerMetadata::defaults(&origin),
            }
        }
    };
    let resource = resource_metadata
        .as_ref()
        .map(|m| canonical_resource(&m.resource))
        .unwrap_or_else(|| canonical_resource(&server));
    let scope = challenge.and_then(|c| c.scope.clone()).or_else(|| {
        resource_metadata
            .as_ref()
            .filter(|m| !m.scopes_supported.is_empty())
            .map(|m| m.scopes_supported.join(" "))
    });
    Ok(Discovery {
        server,
        resource_metadata,
        auth_server,
        resource,
        scope,
    })
}

/// `scope` with `offline_access` added when the authorization server lists it in
/// `scopes_supported` (the MCP spec: a client that wants a refresh token asks for it then, and
/// only then; a server that does not list it may refuse an unknown scope).
fn with_offline_access(scope: Option<&str>, server: &AuthServerMetadata) -> Option<String> {
    const OFFLINE: &str = "offline_access";
    if !server.scopes_supported.iter().any(|s| s == OFFLINE)
        || scope.is_some_and(|s| s.split_whitespace().any(|s| s == OFFLINE))
    {
        return scope.map(str::to_string);
    }
    Some(match scope {
        Some(s) if !s.trim().is_empty() => format!("{s} {OFFLINE}"),
        _ => OFFLINE.to_string(),
    })
}

fn list(urls: &[Url]) -> String {
    urls.iter().map(Url::as_str).collect::<Vec<_>>().join(", ")
}

async fn find_auth_server<T: Transport>(
    transport: &T,
    issuer: &Url,
    legacy: bool,
) -> Result<Option<AuthServerMetadata>, OAuthError> {
    for url in auth_server_metadata_urls(issuer) {
        if let Some(doc) = fetch_document(transport, &url).await? {
            return if legacy {
                parse_legacy_auth_server_metadata(&url, issuer, doc).map(Some)
            } else {
                parse_auth_server_metadata(&url, issuer, doc).map(Some)
            };
        }
    }
    Ok(None)
}

/// Step-up authorization: each `insufficient_scope` challenge widens the scope to what was held
/// plus what the challenge names, at most `limit` times, so a server that keeps asking cannot
/// send the person round the loop for ever.
#[derive(Debug, Clone)]
pub struct StepUp {
    limit: u32,
    attempts: u32,
}

impl StepUp {
    /// At most `limit` step-ups.
    pub fn new(limit: u32) -> StepUp {
        StepUp { limit, attempts: 0 }
    }

    /// The scope to ask for next: `held` joined with the challenge's scope, in order, without
    /// repeats. [`OAuthError::StepUpLimit`] once the limit is reached.
    pub fn next_scope(
        &mut self,
        held: Option<&str>,
        challenge: &Challenge,
    ) -> Result<String, OAuthError> {
        if self.attempts >= self.limit {
            return Err(OAuthError::StepUpLimit(self.attempts));
        }
        self.attempts += 1;
        let mut scopes: Vec<&str> = Vec::new();
        for s in held.unwrap_or_default().split_whitespace().chain(
            challenge
                .scope
                .as_deref()
                .unwrap_or_default()
                .split_whitespace(),
        ) {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        Ok(scopes.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_up_widens_then_stops() {
        let mut step = StepUp::new(2);
        let c = Challenge {
            scope: Some("write read".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(step.next_scope(Some("read"), &c).unwrap(), "read write");
        assert_eq!(
            step.next_scope(Some("read write"), &c).unwrap(),
            "read write"
        );
        assert!(matches!(
            step.next_scope(Some("read write"), &c),
            Err(OAuthError::StepUpLimit(2))
        ));
    }
}
