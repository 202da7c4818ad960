//! The two ways to drive a session — in this process ([`local`]) or in the daemon ([`daemon`]) —
//! and the list of sessions to choose from.

pub mod daemon;
pub mod local;

use std::collections::HashMap;
use std::time::Duration;

use chock_protocol::rpc::{Call, NoParams, SessionList, SessionState};
use chock_runtime::sessions::Liveness;

use crate::TuiError;
use crate::view::sessions::{SessionRow, SessionsView, Where};

/// The states of the sessions the running daemon owns (None: no daemon answered in 2 s).
async fn daemon_states() -> Option<HashMap<String, SessionState>> {
    let ask = async {
        let mut client = daemon::connect().await.ok()?;
        let list: SessionList = client.call(&Call::SessionsList(NoParams {})).await.ok()?;
        client.close().await;
        Some(
            list.sessions
                .into_iter()
                .filter(|s| s.owned)
                .map(|s| (s.session, s.state))
                .collect(),
        )
    };
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()
        .flatten()
}

/// Every session under the sessions root, newest first, with the daemon's word on those it runs.
pub async fn list_sessions() -> Result<SessionsView, TuiError> {
    let root = chock_runtime::sessions::sessions_root()?;
    let listed = tokio::task::spawn_blocking(move || chock_runtime::sessions::list_sessions(&root))
        .await
        .map_err(|e| TuiError::Terminal(std::io::Error::other(e)))??;
    let states = daemon_states().await;
    let mut rows: Vec<SessionRow> = listed
        .into_iter()
        .map(|s| {
            let id = s.id.to_string();
            let ended = s.view.ended();
            let at = match (states.as_ref().and_then(|d| d.get(&id)), ended, s.liveness) {
                (Some(state), _, _) => Where::Daemon(*state),
                (None, true, _) => Where::Ended,
                (None, false, Liveness::Live { .. }) => Where::Elsewhere,
                (None, false, _) => Where::Stopped,
            };
            SessionRow {
                id,
                dir: s.dir,
                at,
                project: s.view.project().map(str::to_string),
                last_ts: s.view.last_ts,
            }
        })
        .collect();
    rows.reverse();
    Ok(SessionsView {
        rows,
        cursor: 0,
        daemon: states.is_some(),
        refused: None,
        forking: None,
    })
}
