//! The person's configuration and credentials: `config.toml` (providers, the default model, prices,
//! the web-search backend, MCP servers), and the API keys `chock login` stores (the keyring where one
//! runs, else a file only the person can read).
//!
//! Read by the front ends and by the runtime that starts a session, never written by a session: what
//! one session does cannot change what the next one trusts. A crate of its own so that reading the
//! person's settings does not pull in the agent's loop and tools.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod config;
pub mod credentials;
pub mod keyring;
