//! The grants that need no person at a browser, beyond client credentials: the JWT-bearer grant
//! (RFC 7523 §2.1) with a workload's identity token (workload identity federation) or with an
//! identity assertion authorization grant (ID-JAG), and the token exchange (RFC 8693) at the
//! enterprise's identity provider that turns the person's ID token into that ID-JAG
//! (enterprise-managed authorization, "cross-app access"). Each request goes through the caller's
//! transport like every other; the assertion is never logged.

use url::Url;

use crate::OAuthError;
use crate::client::{RegisteredClient, token_request};
use crate::flow::Discovery;
use crate::token::{Secret, Token};
use crate::transport::{Transport, post_form, send};

/// `grant_type` of the JWT-bearer grant.
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// `grant_type` of the token exchange.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an OpenID Connect ID token.
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
/// The token type of an identity assertion authorization grant.
pub const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

impl Discovery {
    /// A token for `assertion` (a JWT the authorization server trusts: a workload's identity
    /// token, or an ID-JAG) by the JWT-bearer grant, as `client`. A refusal is returned as it is:
    /// the caller does not retry or fall back to another grant.
    pub async fn jwt_bearer<T: Transport>(
        &self,
        transport: &T,
        client: &RegisteredClient,
        assertion: &Secret,
        scope: Option<&str>,
    ) -> Result<Token, OAuthError> {
        let mut params = vec![
            ("grant_type", JWT_BEARER_GRANT),
            ("assertion", assertion.expose()),
        ];
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

/// The enterprise identity provider's side of enterprise-managed authorization: at its
/// `token_endpoint`, as its client `idp_client_id`, exchanges the person's `id_token` for an
/// ID-JAG naming the authorization server `found` chose (`audience`, its issuer) and the MCP
/// server (`resource`).
pub async fn exchange_id_token_for_id_jag<T: Transport>(
    transport: &T,
    token_endpoint: &Url,
    idp_client_id: &str,
    id_token: &Secret,
    found: &Discovery,
) -> Result<Secret, OAuthError> {
    let request = post_form(
        token_endpoint,
        &[
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("requested_token_type", ID_JAG_TYPE),
            ("subject_token", id_token.expose()),
            ("subject_token_type", ID_TOKEN_TYPE),
            ("audience", &found.auth_server.issuer_text),
            ("resource", &found.resource),
            ("client_id", idp_client_id),
        ],
    );
    let response = send(transport, request).await?;
    let doc = token_endpoint.as_str();
    let value: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| OAuthError::bad(doc, "(document)", format!("not JSON: {e}")))?;
    if response.status != 200 {
        return Err(OAuthError::Refused {
            endpoint: doc.to_string(),
            error: value
                .get("error")
                .and_then(|v| v.as_str())
                .unwrap_or("HTTP error")
                .to_string(),
            description: value
                .get("error_description")
                .and_then(|v| v.as_str())
                .map(str::to_string),
        });
    }
    let issued = value.get("issued_token_type").and_then(|v| v.as_str());
    if issued != Some(ID_JAG_TYPE) {
        return Err(OAuthError::bad(
            doc,
            "issued_token_type",
            format!("is {issued:?}, not `{ID_JAG_TYPE}`"),
        ));
    }
    value
        .get("access_token")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .map(Secret::new)
        .ok_or_else(|| OAuthError::bad(doc, "access_token", "is missing or not a string"))
}
