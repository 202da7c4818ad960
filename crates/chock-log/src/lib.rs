//! The session log: one directory per session holding `log.jsonl`, an append-only file of
//! hash-chained JSON lines, a writer lock, and optionally a signed seal.
//!
//! Why it looks like this: the log is the record of what the harness decided and did, so it
//! must survive a crash (every line is fsynced before the act it describes), show any later
//! edit (each line carries the SHA-256 of the previous line), never contain a known secret
//! (the redaction funnel runs before any byte is written), and be checkable on another
//! machine (the Ed25519 seal). docs/log.md describes the format for readers in any language.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod chain;
pub mod clock;
mod error;
mod fsutil;
mod id;
mod line;
mod lineage;
mod lock;
mod read;
mod redact;
mod seal;
mod verify;
mod writer;

pub use chock_protocol::{Durability, EventData, EventKind, Payload, PayloadError, UnknownKind};
pub use error::LogError;
pub use id::{SessionId, data_root, default_seal_key_path, sessions_root};
pub use line::{Event, LOG_FILE, LOG_FORMAT, genesis_hash, sha256_hex};
pub use lineage::{MAX_FORK_DEPTH, fork_origin, line_hash, read_lineage, read_lineage_at};
pub use lock::{LOCK_FILE, Liveness, is_live, wait_until_free};
pub use read::{SessionSummary, find_session, list_sessions, read_events, view_of};
pub use redact::{MIN_SECRET_LEN, REDACTED, Redactor};
pub use seal::{
    SEAL_FILE, SEAL_FORMAT, Seal, load_or_create_key, public_key_path, public_key_pem,
    read_public_key, seal,
};
pub use verify::{
    Head, KeyCheck, Problem, ProblemKind, SealCheck, TornTail, VerifyOptions, VerifyReport, verify,
    verify_with,
};
pub use writer::{
    FLUSHER_LINGER, GROUP_MAX_DELAY, GROUP_MAX_LINES, LineTap, Log, SessionHeader, TORN_FILE,
};
