//! What can go wrong talking to a model.

use std::path::PathBuf;
use std::time::Duration;

/// A failed model call. `Display` says what failed and, where it helps, what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The server answered with a non-success HTTP status.
    #[error("{provider}: HTTP {status}{}: {message}", request_id.as_deref().map(|r| format!(" (request {r})")).unwrap_or_default())]
    Http {
        /// Which client.
        provider: String,
        /// The status code (529 is Anthropic's "overloaded").
        status: u16,
        /// The provider's error message when the body was a JSON error, else the body text (truncated).
        message: String,
        /// The raw body (truncated to a few KiB).
        body: String,
        /// The provider's request id header, for support tickets.
        request_id: Option<String>,
    },
    /// The model is overloaded (Anthropic `overloaded_error`) and retries did not help.
    #[error("{provider}: the model is overloaded: {message}")]
    Overloaded {
        /// Which client.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The stream broke before the reply was complete: cut, stalled, or carrying a malformed event. The
    /// reply is requested again (within the retry budget); this is the last attempt's fault.
    #[error("{provider}: the stream broke: {fault}")]
    StreamBroken {
        /// Which client.
        provider: String,
        /// How it broke.
        fault: StreamFault,
    },
    /// The server sent something this client cannot read at all (an event past the size cap): not a
    /// stream that broke mid-reply, so it is not retried.
    #[error("{provider}: cannot decode {what}: {detail}")]
    Decode {
        /// Which client.
        provider: String,
        /// What was being read (an event name, a field).
        what: String,
        /// The parser's complaint.
        detail: String,
    },
    /// The provider reported an error inside the stream (or in a failed response).
    #[error("{provider}: the API reported {kind}: {message}")]
    Api {
        /// Which client.
        provider: String,
        /// The provider's error type or code (`overloaded_error`, `server_error`, …).
        kind: String,
        /// The provider's message.
        message: String,
    },
    /// A signed-in account's token could not be had (its refresh was refused, or nothing is signed
    /// in): not retried; the message says how to sign in again.
    #[error("{provider}: {message}")]
    SignIn {
        /// Which client.
        provider: String,
        /// Why, and what to run.
        message: String,
    },
    /// The request could not be sent at all (bad URL, connection refused, TLS).
    #[error("{provider}: cannot reach {url}: {reason}")]
    Connect {
        /// Which client.
        provider: String,
        /// Where it tried to go.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// Every attempt failed; `last` is the final failure.
    #[error("gave up after {attempts} attempts: {last}")]
    GaveUp {
        /// How many requests were sent.
        attempts: u32,
        /// The last failure.
        last: Box<ProviderError>,
    },
    /// The provider configuration is unusable.
    #[error("provider configuration: {field}: {message}")]
    Config {
        /// The offending field (`base_url`, `api_key`, …).
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A recording for the offline player cannot be read.
    #[error("recording {}: {message}", file.display())]
    Recording {
        /// The recording file (`<built-in demo>` for the demo).
        file: PathBuf,
        /// What is wrong, with the turn and field.
        message: String,
    },
    /// The offline player has no more turns, or a tool result did not match what the recording expected.
    #[error("offline player `{recording}`: {message}")]
    Script {
        /// The recording's name.
        recording: String,
        /// What happened.
        message: String,
    },
}

impl ProviderError {
    /// The underlying failure, looking through `GaveUp`.
    pub fn root(&self) -> &ProviderError {
        match self {
            ProviderError::GaveUp { last, .. } => last.root(),
            other => other,
        }
    }
}

/// Why a stream broke before its terminal event. All three are retried the same way, since nothing of an
/// incomplete reply has run; the retry reason and the final error name which one it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamFault {
    /// The stream ended, or its connection failed, before the format's terminal event.
    #[error("cut: {0}")]
    Cut(String),
    /// Nothing arrived for `idle` (the provider's `idle_timeout`).
    #[error("stalled: no {} for {idle:?}", if *.before_headers { "response headers" } else { "data" })]
    Stalled {
        /// How long it was silent.
        idle: Duration,
        /// Whether it was still waiting for the response headers (else for more of the body).
        before_headers: bool,
    },
    /// An event that is not JSON, or JSON not of the wire format's shape where the decoder needs one.
    #[error("malformed {what}: {problem}: {quote}")]
    Malformed {
        /// Which event (`` `content_block_delta` event``, `chunk`).
        what: String,
        /// What is wrong with it (`not JSON (cut off)`, ``no `index` ``).
        problem: String,
        /// The event's data, clipped to a couple of hundred characters.
        quote: String,
    },
}
