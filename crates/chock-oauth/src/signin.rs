//! One sign-in by the authorization code flow, the same for `chock mcp login`, for a session that
//! must authorise again mid-session (more scope, or a token the server no longer takes), and for
//! the conformance adapter: a loopback receiver, the client (reused, or registered), the
//! authorization request, the person sent to it by a [`Browser`], the answer checked (`state`,
//! then `iss`) and the code exchanged. Only how the person reaches the URL differs, hence the trait.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use url::Url;

use crate::OAuthError;
use crate::client::{ClientConfig, RegisteredClient, register};
use crate::flow::Discovery;
use crate::loopback::LoopbackReceiver;
use crate::token::Token;
use crate::transport::Transport;

/// What [`Browser::visit`] returns.
pub type Visit<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// How the person is sent to an authorization URL: their browser opened on it at a terminal, a
/// plain HTTP client in the conformance adapter and the tests. It returns once the person was
/// sent (the answer comes back to the loopback receiver, not through it).
pub trait Browser: Send + Sync {
    /// Sends the person to `url`, which leads to the authorization server at `host` (what a
    /// person is shown before going).
    fn visit<'a>(&'a self, url: &'a Url, host: &'a str) -> Visit<'a>;
}

/// The client to authorise as: one already registered with this authorization server, or the
/// configuration to register from.
#[derive(Debug, Clone, Copy)]
pub enum ClientChoice<'a> {
    /// Reuse this client (it was registered with the same issuer).
    Reuse(&'a RegisteredClient),
    /// Register (or name) the client as the configuration says ([`register`]).
    Register(&'a ClientConfig),
}

/// Runs the code flow at `found`'s authorization server for `scope`, sending the person there
/// with `browser` and waiting up to `wait` for the answer.
pub async fn sign_in_with_code<T: Transport>(
    transport: &T,
    found: &Discovery,
    client: ClientChoice<'_>,
    scope: Option<&str>,
    browser: &dyn Browser,
    wait: Duration,
) -> Result<(RegisteredClient, Token), OAuthError> {
    let receiver = LoopbackReceiver::bind().await?;
    let redirect = receiver.redirect_uri().to_string();
    let client = match client {
        ClientChoice::Reuse(c) => c.clone(),
        ClientChoice::Register(config) => {
            register(
                transport,
                &found.auth_server,
                config,
                std::slice::from_ref(&redirect),
                &["authorization_code", "refresh_token"],
            )
            .await?
        }
    };
    let request = found.authorization_request(&client, &redirect, scope)?;
    let host = found.auth_server_host();
    let waiting = receiver.wait(&request.state, wait);
    let visiting = browser.visit(&request.url, &host);
    tokio::pin!(waiting);
    // The answer usually comes while the browser is still at it (the redirect ends its visit).
    let response = tokio::select! {
        answered = &mut waiting => answered?,
        visited = visiting => {
            visited.map_err(|message| OAuthError::Transport {
                url: request.url.to_string(),
                message,
            })?;
            waiting.await?
        }
    };
    let token = found
        .exchange_code(transport, &client, &request, &response)
        .await?;
    Ok((client, token))
}
