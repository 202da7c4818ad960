//! WebAssembly plugin tools: a component pinned by the SHA-256 of its bytes, run in wasmtime with a
//! fresh store per call under a fuel budget, a wall-clock timeout, a memory cap and an output cap.
//!
//! A plugin speaks the Chock-owned WIT world `chock:plugin` (`wit/plugin.wit`): it exports its
//! tools and a call entry, and imports only Chock's own interfaces — the workspace copy's files,
//! a fetch through the broker, a log — plus the WASI Rust's standard library needs (stdio, clocks,
//! random: [`wasi`]), none of which reaches outside the store. Nothing here decides or touches the world: every door a plugin imports is a
//! [`Doors`] method the caller (chock-tools) implements, settling its act through the one
//! pipeline before it acts. This crate reads the component's imports before it is instantiated and
//! refuses an import whose act the table denies: it is never linked.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod bindings;
mod engine;
mod imports;
mod load;
mod run;
pub mod testing;
pub mod wasi;
mod wasi_clock;

pub use engine::PluginEngine;
pub use imports::{Capability, Import};
pub use load::{LoadedPlugin, PluginError, ToolDef, sha256_hex};
pub use run::{CallEnd, CallReport, Doors, Page};
