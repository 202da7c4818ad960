//! One streamed HTTP call with retries, shared by the three wire clients.
//!
//! A client supplies the JSON body and a fresh `Decoder` per attempt; this module sends, classifies
//! failures, waits, and feeds SSE events to the decoder until it says the reply is complete.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::bearer::BearerSource;
use crate::error::{ProviderError, StreamFault};
use crate::retry::{RetryPolicy, Sleeper, kind_is_retryable, server_wait, status_is_retryable};
use crate::sse::{SseEvent, SseParser};
use crate::types::{Response, StreamEvent};
use crate::wire_json::{NAME_CHARS, QUOTE_CHARS, clip};

/// The callback a stream reports progress to.
pub(crate) type OnEvent<'a> = dyn FnMut(StreamEvent) + Send + 'a;

/// Turns one attempt's SSE events into a `Response`.
pub(crate) trait Decoder: Send {
    /// Handles one event. An `Err` ends the attempt (retried if the error is retryable).
    fn event(&mut self, event: SseEvent, on_event: &mut OnEvent<'_>) -> Result<(), ProviderError>;
    /// True once the terminal event arrived; the rest of the body is not read.
    fn done(&self) -> bool;
    /// The reply. `eof` is true when the body ended without `done()`: the decoder decides whether what
    /// arrived is complete (Chat Completions tolerates a missing `[DONE]`) or a broken stream.
    fn finish(self: Box<Self>, eof: bool) -> Result<Response, ProviderError>;
}

/// What a failed attempt means. Every way an attempt can fail before its decoder handed back a complete
/// reply passes through here, so a broken stream, whatever broke it, is retried by the one loop in
/// [`Transport::run`] and only while nothing of the reply has been returned (and so nothing has run).
enum Failure {
    Retry {
        error: ProviderError,
        reason: String,
        server_wait: Option<Duration>,
    },
    Fatal(ProviderError),
}

/// Sends one provider's requests.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    pub(crate) provider: String,
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    /// The API key, so that an error body echoing it is scrubbed before it becomes a message.
    pub(crate) secret: Option<Secret>,
    /// A sign-in's token source, asked before each request (then `headers` carry no auth).
    pub(crate) bearer: Option<Arc<dyn BearerSource>>,
    pub(crate) retry: RetryPolicy,
    pub(crate) sleeper: Arc<dyn Sleeper>,
    pub(crate) idle_timeout: Duration,
}

/// A key held for scrubbing. Its `Debug` never shows it: `Transport` (and every client holding one)
/// derives `Debug`, and a debug print must not carry the key into a log.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The most characters of an error body kept in `ProviderError::Http::body` (the message quotes fewer).
const BODY_LIMIT: usize = 4096;

impl Transport {
    /// Streams one reply, retrying as the policy allows.
    pub(crate) async fn run(
        &self,
        body: &Value,
        new_decoder: &(dyn Fn() -> Box<dyn Decoder> + Send + Sync),
        on_event: &mut OnEvent<'_>,
    ) -> Result<Response, ProviderError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (error, reason, asked) = match self.attempt(body, new_decoder(), on_event).await {
                Ok(response) => return Ok(response),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Retry {
                    error,
                    reason,
                    server_wait,
                }) => (error, reason, server_wait),
            };
            if attempt >= self.retry.max_attempts {
                return Err(ProviderError::GaveUp {
                    attempts: attempt,
                    last: Box::new(error),
                });
            }
            let wait = match asked {
                Some(wait) if wait > self.retry.max_retry_after => {
                    return Err(ProviderError::GaveUp {
                        attempts: attempt,
                        last: Box::new(error_with_note(
                            error,
                            &format!(
                                "the server asked to wait {}s, longer than the {}s limit",
                                wait.as_secs(),
                                self.retry.max_retry_after.as_secs()
                            ),
                        )),
                    });
                }
                Some(wait) => wait,
                None => self.retry.backoff(attempt),
            };
            on_event(StreamEvent::Retrying {
                attempt,
                wait,
                reason,
            });
            self.sleeper.sleep(wait).await;
        }
    }

    async fn attempt(
        &self,
        body: &Value,
        mut decoder: Box<dyn Decoder>,
        on_event: &mut OnEvent<'_>,
    ) -> Result<Response, Failure> {
        let mut request = self.client.post(&self.url).headers(self.headers.clone());
        let bearer = match &self.bearer {
            Some(source) => Some(source.bearer().await.map_err(|message| {
                Failure::Fatal(ProviderError::SignIn {
                    provider: self.provider.clone(),
                    message,
                })
            })?),
            None => None,
        };
        if let Some(token) = &bearer {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| {
                    Failure::Fatal(ProviderError::SignIn {
                        provider: self.provider.clone(),
                        message: "the signed-in token is not a valid header value".to_owned(),
                    })
                })?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let sent = request.json(body).send();
        let response = match tokio::time::timeout(self.idle_timeout, sent).await {
            Err(_) => {
                return Err(self.broken(StreamFault::Stalled {
                    idle: self.idle_timeout,
                    before_headers: true,
                }));
            }
            Ok(Err(e)) if e.is_connect() || e.is_builder() => {
                return Err(Failure::Fatal(ProviderError::Connect {
                    provider: self.provider.clone(),
                    url: self.url.clone(),
                    reason: error_chain(&e),
                }));
            }
            Ok(Err(e)) => {
                return Err(self.broken(StreamFault::Cut(format!(
                    "sending the request failed: {}",
                    error_chain(&e)
                ))));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Err(self.http_failure(status, response, bearer.as_deref()).await);
        }

        let mut response = response;
        let mut parser = SseParser::new();
        loop {
            let chunk = match tokio::time::timeout(self.idle_timeout, response.chunk()).await {
                Err(_) => {
                    return Err(self.broken(StreamFault::Stalled {
                        idle: self.idle_timeout,
                        before_headers: false,
                    }));
                }
                Ok(Err(e)) => {
                    return Err(self.broken(StreamFault::Cut(format!(
                        "reading the stream failed: {}",
                        error_chain(&e)
                    ))));
                }
                Ok(Ok(chunk)) => chunk,
            };
            let events = match &chunk {
                Some(bytes) => parser.feed(bytes),
                None => parser.finish().into_iter().collect(),
            };
            if parser.overflowed() {
                return Err(Failure::Fatal(ProviderError::Decode {
                    provider: self.provider.clone(),
                    what: "the event stream".to_owned(),
                    detail: format!(
                        "an event grew past {} MiB; is `base_url` an API endpoint?",
                        crate::sse::MAX_EVENT_BYTES >> 20
                    ),
                }));
            }
            for event in events {
                decoder
                    .event(event, on_event)
                    .map_err(|e| self.classify_stream_error(e))?;
                if decoder.done() {
                    return decoder
                        .finish(false)
                        .map_err(|e| self.classify_stream_error(e));
                }
            }
            if chunk.is_none() {
                return decoder
                    .finish(true)
                    .map_err(|e| self.classify_stream_error(e));
            }
        }
    }

    fn broken(&self, fault: StreamFault) -> Failure {
        self.classify_stream_error(ProviderError::StreamBroken {
            provider: self.provider.clone(),
            fault,
        })
    }

    /// Whether a failure met while reading the stream is retried: a broken stream (cut, stalled or
    /// malformed, from the transport or a decoder alike) and a retryable error the API reported are.
    fn classify_stream_error(&self, error: ProviderError) -> Failure {
        match &error {
            ProviderError::StreamBroken { fault, .. } => Failure::Retry {
                reason: format!("stream broke: {fault}"),
                error,
                server_wait: None,
            },
            ProviderError::Api { kind, message, .. } if kind_is_retryable(kind) => Failure::Retry {
                reason: format!("{kind} in the stream: {message}"),
                error,
                server_wait: None,
            },
            ProviderError::Overloaded { message, .. } => Failure::Retry {
                reason: format!("overloaded: {message}"),
                error,
                server_wait: None,
            },
            _ => Failure::Fatal(error),
        }
    }

    async fn http_failure(
        &self,
        status: u16,
        response: reqwest::Response,
        bearer: Option<&str>,
    ) -> Failure {
        let headers = response.headers().clone();
        let request_id = ["request-id", "x-request-id"].iter().find_map(|name| {
            headers
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
        let body = match tokio::time::timeout(self.idle_timeout, response.bytes()).await {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Err(e)) => format!("(body unreadable: {})", error_chain(&e)),
            Err(_) => "(body not received in time)".to_owned(),
        };
        // Some servers echo the key they refused ("invalid key sk-…"); the error ends up on screens
        // and in the log, so the key is cut out before anything else reads the body.
        let secret = self.secret.as_ref().map(|s| s.0.as_str());
        let body = scrub(scrub(body, secret), bearer);
        let (kind, message) = error_fields(&body);
        let message = clip(message.as_deref().unwrap_or(&body), QUOTE_CHARS);
        let body = clip(&body, BODY_LIMIT);
        let should_retry = headers
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        let retryable = match should_retry {
            Some("true") => true,
            Some("false") => false,
            // Out of quota is a 429 that waiting does not fix.
            _ => status_is_retryable(status) && kind.as_deref() != Some("insufficient_quota"),
        };
        let label = kind
            .as_deref()
            .map(|k| format!(" {}", clip(k, NAME_CHARS)))
            .unwrap_or_default();
        let error = ProviderError::Http {
            provider: self.provider.clone(),
            status,
            message,
            body,
            request_id,
        };
        if retryable {
            let wait = server_wait(&headers, self.sleeper.now());
            Failure::Retry {
                error,
                reason: format!("HTTP {status}{label}"),
                server_wait: wait,
            }
        } else {
            Failure::Fatal(error)
        }
    }
}

/// The error's `type`/`code` and `message` from an Anthropic or OpenAI error body.
pub(crate) fn error_fields(body: &str) -> (Option<String>, Option<String>) {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return (None, None);
    };
    let error = json.get("error").unwrap_or(&json);
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = match text("code") {
        // OpenAI: `code` is specific (`insufficient_quota`), `type` generic; Anthropic has only `type`.
        Some(code) if !code.is_empty() => Some(code),
        _ => text("type"),
    };
    (kind, text("message"))
}

fn error_with_note(error: ProviderError, note: &str) -> ProviderError {
    match error {
        ProviderError::Http {
            provider,
            status,
            message,
            body,
            request_id,
        } => ProviderError::Http {
            provider,
            status,
            message: format!("{message} ({note})"),
            body,
            request_id,
        },
        other => other,
    }
}

/// `text` with every occurrence of `secret` replaced by `<redacted>`.
fn scrub(text: String, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if text.contains(secret) => text.replace(secret, "<redacted>"),
        _ => text,
    }
}

/// An error and its sources on one line (reqwest hides the useful part in the source chain).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
