//! A bearer token that can change during a session: a sign-in's access token, which its issuer
//! refreshes before it lapses. The transport asks the source before each request instead of
//! holding one key for the provider's whole life.

use std::future::Future;
use std::pin::Pin;

/// The future a [`BearerSource`] returns: the token to send now, or why there is none (the
/// message says how to sign in again).
pub type BearerFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// Where a provider's bearer token comes from when it is not a fixed API key.
pub trait BearerSource: Send + Sync + std::fmt::Debug {
    /// The token to send with the next request, refreshed first if it is about to lapse.
    fn bearer(&self) -> BearerFuture<'_>;
}
