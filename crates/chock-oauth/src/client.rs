//! Who the client is to an authorization server (a pre-registered client, a client ID metadata
//! document, or dynamic registration, in the MCP spec's order of preference), and the token
//! endpoint's requests: the code exchange, refresh and client credentials, each authenticated by
//! the method the server takes and each naming the `resource` (RFC 8707).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use url::Url;

use crate::OAuthError;
use crate::assertion::{AssertionKey, JWT_BEARER_ASSERTION};
use crate::dpop::{DPOP_ALG, DpopKey};
use crate::metadata::AuthServerMetadata;
use crate::token::{Secret, Token, now};
use crate::transport::{HttpRequest, Transport, excerpt, post_form, send};

/// How the client authenticates at the token endpoint (RFC 7591 §2 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// HTTP Basic with the client ID and secret.
    ClientSecretBasic,
    /// The ID and secret in the form.
    ClientSecretPost,
    /// A JWT signed with the client's key (RFC 7523), no secret.
    PrivateKeyJwt,
}

impl AuthMethod {
    /// The RFC 7591 name.
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method for a client with or without a secret at a server listing `supported`
    /// (absent: `client_secret_basic` only, RFC 8414 §2): Basic first, then post.
    pub fn choose(has_secret: bool, supported: &[String]) -> AuthMethod {
        if !has_secret {
            return AuthMethod::None;
        }
        let takes = |m: &str| {
            supported.is_empty() && m == "client_secret_basic" || supported.iter().any(|s| s == m)
        };
        if takes("client_secret_basic") {
            AuthMethod::ClientSecretBasic
        } else if takes("client_secret_post") {
            AuthMethod::ClientSecretPost
        } else {
            AuthMethod::ClientSecretBasic
        }
    }
}

/// What the person's configuration says about the client, for one server.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// A client ID registered beforehand with the authorization server.
    pub client_id: Option<String>,
    /// Its secret (a confidential client; also what client credentials need).
    pub client_secret: Option<Secret>,
    /// The https URL of Chock's client ID metadata document, used where the server supports it.
    pub metadata_document: Option<String>,
    /// The name shown by dynamic registration.
    pub client_name: String,
    /// The pre-registered client's signing key: it authenticates by `private_key_jwt`.
    pub private_key: Option<AssertionKey>,
}

/// The client as the authorization server knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<Secret>,
    /// How it authenticates at the token endpoint.
    pub auth_method: AuthMethod,
    /// Its signing key, for `private_key_jwt`.
    pub private_key: Option<AssertionKey>,
    /// Its DPoP key, when the authorization server binds tokens (RFC 9449).
    pub dpop: Option<DpopKey>,
}

/// Registers (or names) the client at `server`: a configured client ID first, then the client ID
/// metadata document where the server supports it, then dynamic registration (RFC 7591) with
/// `redirect_uri`. Neither: [`OAuthError::NoRegistration`].
pub async fn register<T: Transport>(
    transport: &T,
    server: &AuthServerMetadata,
    config: &ClientConfig,
    redirect_uris: &[String],
    grant_types: &[&str],
) -> Result<RegisteredClient, OAuthError> {
    if let Some(id) = &config.client_id {
        let auth_method = if config.private_key.is_some() {
            AuthMethod::PrivateKeyJwt
        } else {
            AuthMethod::choose(
                config.client_secret.is_some(),
                &server.token_endpoint_auth_methods_supported,
            )
        };
        return Ok(RegisteredClient {
            client_id: id.clone(),
            client_secret: config.client_secret.clone(),
            auth_method,
            private_key: config.private_key.clone(),
            dpop: dpop_key(server)?,
        });
    }
    if let Some(doc) = &config.metadata_document
        && server.client_id_metadata_document_supported
    {
        return Ok(RegisteredClient {
            client_id: doc.clone(),
            client_secret: None,
            auth_method: AuthMethod::None,
            private_key: None,
            dpop: dpop_key(server)?,
        });
    }
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(OAuthError::NoRegistration {
            issuer: server.issuer.to_string(),
        });
    };
    let body = serde_json::json!({
        "client_name": config.client_name,
        "redirect_uris": redirect_uris,
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        // A program on the person's machine with a loopback redirect (OpenID Connect
        // registration §2; the MCP spec asks for it).
        "application_type": "native",
    });
    let request = HttpRequest {
        method: http::Method::POST,
        url: endpoint.clone(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), "application/json".into()),
        ],
        body: serde_json::to_vec(&body).unwrap_or_default(),
    };
    let response = send(transport, request).await?;
    if !(200..300).contains(&response.status) {
        return Err(oauth_error(endpoint, response.status, &response.body));
    }
    let doc = endpoint.as_str();
    let value: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| OAuthError::bad(doc, "(document)", format!("not JSON: {e}")))?;
    let client_id = value
        .get("client_id")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| OAuthError::bad(doc, "client_id", "is missing or not a string"))?;
    let client_secret = value
        .get("client_secret")
        .and_then(|v| v.as_str())
        .map(Secret::new);
    let auth_method = match value
        .get("token_endpoint_auth_method")
        .and_then(|v| v.as_str())
    {
        Some("client_secret_post") => AuthMethod::ClientSecretPost,
        Some("client_secret_basic") => AuthMethod::ClientSecretBasic,
        Some("none") | None if client_secret.is_none() => AuthMethod::None,
        _ => AuthMethod::ClientSecretBasic,
    };
    Ok(RegisteredClient {
        client_id: client_id.to_string(),
        client_secret,
        auth_method,
        private_key: None,
        dpop: dpop_key(server)?,
    })
}

/// A fresh DPoP key when `server` binds tokens with ES256 (the one algorithm Chock signs
/// proofs with), else none.
fn dpop_key(server: &AuthServerMetadata) -> Result<Option<DpopKey>, OAuthError> {
    if server
        .dpop_signing_alg_values_supported
        .iter()
        .any(|a| a == DPOP_ALG)
    {
        DpopKey::generate().map(Some)
    } else {
        Ok(None)
    }
}

/// An OAuth error answer (RFC 6749 §5.2) or a bare status, as an error naming the endpoint.
pub(crate) fn oauth_error(endpoint: &Url, status: u16, body: &[u8]) -> OAuthError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    match parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|v| v.as_str())
    {
        Some(error) => OAuthError::Refused {
            endpoint: endpoint.to_string(),
            error: error.to_string(),
            description: parsed
                .as_ref()
                .and_then(|v| v.get("error_description"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
        },
        None => OAuthError::Status {
            url: endpoint.to_string(),
            status,
            body: excerpt(body),
        },
    }
}

/// A token request of `grant` with `params`, authenticated as `client`, for `resource`.
pub async fn token_request<T: Transport>(
    transport: &T,
    server: &AuthServerMetadata,
    client: &RegisteredClient,
    params: &[(&str, &str)],
    resource: &str,
    asked_scope: Option<&str>,
) -> Result<Token, OAuthError> {
    let endpoint = &server.token_endpoint;
    let mut pairs: Vec<(&str, &str)> = params.to_vec();
    pairs.push(("resource", resource));
    let mut nonce: Option<String> = None;
    loop {
        let mut request = authenticated_form(endpoint, client, &pairs, &server.issuer_text)?;
        if let Some(key) = &client.dpop {
            let proof = key.proof("POST", endpoint, None, nonce.as_deref())?;
            request.headers.push(("dpop".into(), proof));
        }
        let response = send(transport, request).await?;
        if response.status != 200 {
            let error = oauth_error(endpoint, response.status, &response.body);
            // RFC 9449 §8: the server wants its nonce in the proof; once.
            let asked = response.header("dpop-nonce").map(str::to_string);
            if client.dpop.is_some()
                && nonce.is_none()
                && asked.is_some()
                && matches!(&error, OAuthError::Refused { error, .. } if error == "use_dpop_nonce")
            {
                nonce = asked;
                continue;
            }
            return Err(error);
        }
        return parse_token(
            endpoint,
            &response.body,
            resource,
            asked_scope,
            client.dpop.is_some(),
        );
    }
}

/// A form POST to `endpoint` authenticated as `client` (its ID in the form for a public client,
/// its ID and secret by Basic or in the form for a confidential one, a JWT assertion for the
/// authorization server `audience` signed with its key for `private_key_jwt`).
fn authenticated_form(
    endpoint: &Url,
    client: &RegisteredClient,
    params: &[(&str, &str)],
    audience: &str,
) -> Result<HttpRequest, OAuthError> {
    let mut pairs: Vec<(&str, &str)> = params.to_vec();
    let secret = client.client_secret.as_ref().map(Secret::expose);
    let assertion;
    match client.auth_method {
        AuthMethod::None => pairs.push(("client_id", &client.client_id)),
        AuthMethod::ClientSecretPost => {
            pairs.push(("client_id", &client.client_id));
            pairs.push(("client_secret", secret.unwrap_or_default()));
        }
        AuthMethod::ClientSecretBasic => {}
        AuthMethod::PrivateKeyJwt => {
            let key = client
                .private_key
                .as_ref()
                .ok_or_else(|| OAuthError::BadKey {
                    what: format!("client `{}`", client.client_id),
                    problem: "authenticates by private_key_jwt but no signing key is configured"
                        .into(),
                })?;
            assertion = key.assertion(&client.client_id, audience)?;
            pairs.push(("client_id", &client.client_id));
            pairs.push(("client_assertion_type", JWT_BEARER_ASSERTION));
            pairs.push(("client_assertion", assertion.expose()));
        }
    }
    let mut request = post_form(endpoint, &pairs);
    if client.auth_method == AuthMethod::ClientSecretBasic {
        // RFC 6749 §2.3.1: each part form-encoded before joining.
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = STANDARD.encode(format!(
            "{}:{}",
            enc(&client.client_id),
            enc(secret.unwrap_or_default())
        ));
        request
            .headers
            .push(("authorization".into(), format!("Basic {basic}")));
    }
    Ok(request)
}

/// Revokes `token` at the server's revocation `endpoint` (RFC 7009), `hint` naming its kind
/// (`refresh_token`, `access_token`). A `200` is success, whatever the token's state was.
pub async fn revoke<T: Transport>(
    transport: &T,
    endpoint: &Url,
    client: &RegisteredClient,
    token: &Secret,
    hint: &str,
) -> Result<(), OAuthError> {
    let mut audience = endpoint.clone();
    audience.set_path("");
    let request = authenticated_form(
        endpoint,
        client,
        &[("token", token.expose()), ("token_type_hint", hint)],
        audience.as_str().trim_end_matches('/'),
    )?;
    let response = send(transport, request).await?;
    if response.status == 200 {
        Ok(())
    } else {
        Err(oauth_error(endpoint, response.status, &response.body))
    }
}

fn parse_token(
    endpoint: &Url,
    body: &[u8],
    resource: &str,
    asked_scope: Option<&str>,
    dpop: bool,
) -> Result<Token, OAuthError> {
    let doc = endpoint.as_str();
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| OAuthError::bad(doc, "(document)", format!("not JSON: {e}")))?;
    let text = |field: &str| value.get(field).and_then(|v| v.as_str());
    let access = text("access_token")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| OAuthError::bad(doc, "access_token", "is missing or not a string"))?;
    let token_type =
        text("token_type").ok_or_else(|| OAuthError::bad(doc, "token_type", "is missing"))?;
    let token_type = if token_type.eq_ignore_ascii_case("bearer") {
        "Bearer"
    } else if dpop && token_type.eq_ignore_ascii_case("dpop") {
        "DPoP"
    } else {
        return Err(OAuthError::bad(
            doc,
            "token_type",
            format!(
                "is `{token_type}`; only Bearer tokens, and DPoP ones where a proof was sent, are used"
            ),
        ));
    };
    let expires_at = match value.get("expires_in") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| OAuthError::bad(doc, "expires_in", "is not a whole number"))?
                .saturating_add(now()),
        ),
    };
    Ok(Token {
        access_token: Secret::new(access),
        token_type: token_type.into(),
        expires_at,
        refresh_token: text("refresh_token").map(Secret::new),
        scope: text("scope").or(asked_scope).map(str::to_string),
        resource: resource.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::HttpResponse;

    /// A transport that must not be used: registration by configuration sends nothing.
    struct NoNetwork;

    impl Transport for NoNetwork {
        async fn send(&self, request: HttpRequest) -> Result<HttpResponse, String> {
            panic!("unexpected request to {}", request.url)
        }
    }

    fn server(cimd: bool, register: bool) -> AuthServerMetadata {
        let mut s = AuthServerMetadata::defaults(&Url::parse("https://auth.example").unwrap());
        s.url = Some(
            Url::parse("https://auth.example/.well-known/oauth-authorization-server").unwrap(),
        );
        s.client_id_metadata_document_supported = cimd;
        if !register {
            s.registration_endpoint = None;
        }
        s
    }

    fn block<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn pre_registered_then_metadata_document_then_nothing() {
        let config = ClientConfig {
            client_id: Some("pre".into()),
            metadata_document: Some("https://chock.example/client.json".into()),
            ..ClientConfig::default()
        };
        let c = block(register(&NoNetwork, &server(true, true), &config, &[], &[])).unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.auth_method),
            ("pre", AuthMethod::None)
        );
        let config = ClientConfig {
            client_id: None,
            ..config
        };
        let c = block(register(&NoNetwork, &server(true, true), &config, &[], &[])).unwrap();
        assert_eq!(c.client_id, "https://chock.example/client.json");
        let err = block(register(
            &NoNetwork,
            &server(false, false),
            &config,
            &[],
            &[],
        ))
        .unwrap_err();
        assert!(matches!(err, OAuthError::NoRegistration { .. }), "{err}");
    }

    #[test]
    fn auth_method_follows_the_server() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            AuthMethod::choose(false, &s(&["client_secret_basic"])),
            AuthMethod::None
        );
        assert_eq!(AuthMethod::choose(true, &[]), AuthMethod::ClientSecretBasic);
        assert_eq!(
            AuthMethod::choose(true, &s(&["none", "client_secret_post"])),
            AuthMethod::ClientSecretPost
        );
    }
}
