//! A ChatGPT account signed in with `chock login --provider chatgpt`: the token source that keeps
//! its access token fresh for the OpenAI provider, and the host's own HTTP client that the sign-in
//! and its refreshes go through. The tokens never leave the host: they are sent to the issuer and
//! to the provider's endpoint, and written back to the credential store when refreshed.

use std::sync::Arc;
use std::time::Duration;

use chock_oauth::chatgpt::{self, Issuer, SignIn};
use chock_oauth::{HttpRequest, HttpResponse, Transport};
use tokio::sync::Mutex;

use crate::bearer::{BearerFuture, BearerSource};

/// The most of an answer the sign-in reads.
const BODY_LIMIT: usize = 1 << 20;

/// The host's HTTP client for a sign-in: it follows no redirect (a token or code is never sent
/// where a `Location` points), bounds the time taken and the body read.
#[derive(Debug, Clone)]
pub struct DirectTransport {
    client: reqwest::Client,
}

impl DirectTransport {
    /// A client with a 30 s bound on connecting and on each request.
    pub fn new() -> Result<DirectTransport, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(30))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(DirectTransport { client })
    }
}

impl Transport for DirectTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, String> {
        let mut builder = self
            .client
            .request(request.method, request.url.as_str())
            .body(request.body);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let mut response = builder.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > BODY_LIMIT {
                return Err(format!("the answer is larger than {BODY_LIMIT} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// A signed-in ChatGPT account's access token, refreshed by its issuer five minutes before it
/// lapses and kept back in the credential store under the provider's name.
#[derive(Debug)]
pub struct ChatGptBearer {
    provider: String,
    issuer: Issuer,
    transport: DirectTransport,
    signed: Mutex<SignIn>,
}

impl ChatGptBearer {
    /// The source for `provider`'s sign-in `signed`, refreshed at `issuer`.
    pub fn new(provider: &str, issuer: Issuer, signed: SignIn) -> Result<Arc<Self>, String> {
        Ok(Arc::new(ChatGptBearer {
            provider: provider.to_owned(),
            issuer,
            transport: DirectTransport::new()?,
            signed: Mutex::new(signed),
        }))
    }

    async fn current(&self) -> Result<String, String> {
        let mut signed = self.signed.lock().await;
        if signed.needs_refresh_now() {
            let fresh = self
                .issuer
                .refresh(&self.transport, &signed)
                .await
                .map_err(|e| {
                    format!(
                        "the ChatGPT sign-in could not be refreshed ({e}); run `chock login \
                         --provider {}` again",
                        self.provider
                    )
                })?;
            let provider = self.provider.clone();
            let kept = fresh.clone();
            // The store is the keyring or a file: off the async workers. A refreshed token that
            // cannot be kept is still used; the next session refreshes again.
            let _ = tokio::task::spawn_blocking(move || chatgpt::save(&provider, &kept)).await;
            *signed = fresh;
        }
        Ok(signed.access_token.expose().to_owned())
    }
}

impl BearerSource for ChatGptBearer {
    fn bearer(&self) -> BearerFuture<'_> {
        Box::pin(self.current())
    }
}
