//! Model providers: Anthropic Messages, OpenAI Responses, Chat Completions, and the offline player.
//!
//! The agent speaks only the neutral types of [`types`] through the [`Provider`] trait. Each wire client
//! streams over SSE, retries what a wait can fix (see [`retry`]), and returns one complete [`Response`];
//! the [`Player`] replays a recorded model through the very same trait so that offline runs and tests
//! exercise the real loop, tools, sandbox and log.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

use std::future::Future;
use std::pin::Pin;

mod anthropic;
mod bearer;
mod chat;
mod config;
mod error;
mod player;
mod price;
mod responses;
pub mod retry;
pub mod signin;
pub mod sse;
mod transport;
pub mod types;
mod wire_json;

pub use bearer::{BearerFuture, BearerSource};
pub use config::{ProviderConfig, WireFormat, connect};
pub use error::{ProviderError, StreamFault};
pub use player::{Player, Recording, ToolShape};
pub use price::{Cost, Price, PriceTable, price};
pub use retry::{RetryPolicy, Sleeper, TokioSleeper};
pub use types::{
    Block, Message, Request, Response, Role, StopReason, StreamEvent, ToolSpec, Usage,
};

/// The future a provider returns: one complete reply, or why there is none.
pub type ProviderFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, ProviderError>> + Send + 'a>>;

/// A model behind some wire format. Object-safe so the agent can hold `Box<dyn Provider>`.
pub trait Provider: Send + Sync {
    /// The configured name (`anthropic`, `openai`, `aiand`, `demo`, …), for logs and messages.
    fn name(&self) -> &str;

    /// Streams one reply to `req`, reporting progress to `on_event`, and returns it complete.
    ///
    /// Retries happen inside: `on_event` then receives `StreamEvent::Retrying`, and deltas seen before it
    /// belong to the abandoned attempt. The returned `Response` is what the agent appends to the
    /// conversation; tools must run only after it is returned.
    fn stream<'a>(
        &'a self,
        req: &'a Request,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> ProviderFuture<'a>;
}
