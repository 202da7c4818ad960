//! The sessions on this machine, for a client choosing one: where they live and what each is,
//! read from their logs (a session another process runs is known only from its file).

pub use chock_log::{
    Liveness, LogError, SessionSummary, find_session, is_live, list_sessions, sessions_root,
};
