//! One OAuth 2.1 client for Chock: the authorization of MCP servers reached over HTTP (the MCP
//! authorization spec, 2025-06-18 and 2025-11-25, with the 2025-03-26 fallbacks), and the ChatGPT
//! sign-in ([`chatgpt`]), which is the same authorization-code flow with PKCE (or a device code).
//!
//! Why a library over a caller's [`Transport`]: every request it makes (metadata, registration,
//! the token endpoint) must go through the host's broker door, so that each destination is an act
//! the table decides (`net.connect` to the authorization server's host) and the log records. This
//! crate opens no socket to the network itself; the only socket it opens is the loopback redirect
//! receiver ([`loopback`]), which listens on 127.0.0.1 for the person's browser.
//!
//! What it holds to:
//! - a token is bound to the resource it was issued for ([`Token::may_send_to`] refuses any other
//!   origin), and the `resource` parameter (RFC 8707) names that resource in every authorization
//!   and token request;
//! - no redirect is followed with a token or a client secret, and no metadata redirect at all;
//! - PKCE S256 is required: an authorization server that does not list it is refused;
//! - a token's `Debug` never prints it, and [`store`] keeps it in the keyring or a 0600 file.

#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod assertion;
pub mod challenge;
pub mod chatgpt;
pub mod client;
pub mod dpop;
mod error;
pub mod flow;
pub mod grants;
pub mod loopback;
pub mod metadata;
pub mod pkce;
pub mod signin;
pub mod store;
pub mod token;
pub mod transport;

pub use assertion::{Algorithm, AssertionKey};
pub use challenge::Challenge;
pub use client::{AuthMethod, ClientConfig, RegisteredClient};
pub use error::OAuthError;
pub use flow::{AuthorizationRequest, Discovery, StepUp, discover, send_with_token};
pub use metadata::{AuthServerMetadata, ProtectedResourceMetadata};
pub use pkce::Pkce;
pub use signin::{Browser, ClientChoice, Visit, sign_in_with_code};
pub use token::{Secret, Token};
pub use transport::{DynTransport, HttpRequest, HttpResponse, Transport};
