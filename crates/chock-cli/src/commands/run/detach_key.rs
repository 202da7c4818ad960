//! `chock run`'s detach key, Ctrl-\: at a terminal it hands the running session to the daemon.
//!
//! The terminal's line discipline turns Ctrl-\ into SIGQUIT for the foreground process group, in
//! the cooked mode `chock run` leaves the terminal in (a question's prompt included), so the key
//! works without taking the terminal over. The commands a session runs are in sessions of their
//! own (the sandbox's init calls `setsid`) and never see it; a subagent's `chock run` (same
//! process group, standard input not a terminal) swallows it ([`swallow`]).
//!
//! The key asks the daemon to adopt the session (`sessions.adopt`, as `chock detach` does from
//! another terminal); the daemon then asks this process to let go with SIGUSR1, which
//! `chock run` already takes as "hand over" (at the end of the turn, or at once while a question
//! waits), and the process exits 0 saying how to follow the session. No daemon listening, or a
//! refusal, is said on the terminal and the session goes on here.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::say::say_err;

/// How long the daemon waits for this process to let go: it does at the end of the turn it is in.
const WAIT_SECS: u64 = 600;

/// Takes SIGQUIT from now on (so Ctrl-\ no longer quits the process): the key's presses.
pub(crate) fn listen() -> std::io::Result<Signal> {
    signal(SignalKind::quit())
}

/// Takes SIGQUIT and does nothing with it: a subagent's `chock run` shares its parent's process
/// group, so the parent's Ctrl-\ reaches it too and must not end it.
pub(crate) fn swallow() -> std::io::Result<()> {
    // tokio's handler stays installed for the life of the process once registered: the stream
    // itself is not needed, and is dropped unread.
    signal(SignalKind::quit()).map(drop)
}

/// Hands session `id` to the daemon at each press of the key, until one is taken up. Runs for as
/// long as the task does (the caller aborts it then).
pub(crate) async fn watch(mut presses: Signal, id: String) {
    while presses.recv().await.is_some() {
        say_err!();
        say_err!(
            "chock: handing session {id} to the daemon (at the end of this turn, or now while a \
             question waits)"
        );
        match chock_client::handover::hand_to_daemon(&id, WAIT_SECS).await {
            // The daemon runs it: this process let go, and is on its way out.
            Ok(_) => return,
            Err(e) => {
                say_err!("chock: not handed over: {e}; the session goes on here");
            }
        }
    }
}
