//! Handing a session this process runs to the daemon (a detach key: `chock run`'s Ctrl-\, the
//! terminal interface's): the daemon's `sessions.adopt`, and what to tell the person afterwards.
//!
//! The adopt asks the session's owner — this process — to let go (SIGUSR1, which the caller
//! takes as "hand over") and answers only once the owner has let go of the log, which it does by
//! exiting. So the caller sends the request from a task of its own, hands the session over when
//! the signal comes, and exits without waiting for the answer; an answer that does come first is
//! a refusal (no daemon, a session that ended, one the daemon runs already), and the session goes
//! on here.

use chock_protocol::rpc::{AdoptParams, Call, Started};

use crate::{ClientError, DaemonClient};

/// Asks the running daemon to take session `id` over from this process (`sessions.adopt`),
/// waiting at most `wait_secs` for this process to let go. Returns once the daemon runs it (which
/// a caller that exits on handing over never sees), or how it refused.
pub async fn hand_to_daemon(id: &str, wait_secs: u64) -> Result<Started, ClientError> {
    let mut client = DaemonClient::connect().await?;
    let started = client
        .call(&Call::SessionsAdopt(AdoptParams {
            session: id.to_string(),
            wait_secs: Some(wait_secs),
            subscribe: false,
        }))
        .await?;
    client.close().await;
    Ok(started)
}

/// How a person follows session `id` once the daemon runs it: `chock attach ID`, and the browser
/// UI's address when the daemon serves one (its `http-address` file).
pub fn how_to_follow(id: &str) -> String {
    let browser = chock_dirs::runtime_dir()
        .ok()
        .and_then(|dir| std::fs::read_to_string(dir.join(chock_dirs::HTTP_FILE)).ok())
        .map(|addr| addr.trim().to_string())
        .filter(|addr| !addr.is_empty());
    match browser {
        Some(addr) => format!("chock attach {id}, or in the browser at http://{addr}/"),
        None => format!("chock attach {id}"),
    }
}
