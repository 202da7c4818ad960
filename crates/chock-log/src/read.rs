//! Reading sessions back: their events, finding one by id or prefix, listing them all.

use std::path::{Path, PathBuf};

use crate::line::{Event, LOG_FILE, split_lines};
use crate::lock::{Liveness, is_live};
use chock_protocol::view::SessionView;

use crate::{LogError, SessionId};

/// Every complete event of the session in `dir`, in file order.
///
/// A torn last line (a write cut short by a crash: no trailing newline, or not JSON at the
/// very end) is skipped, as [`crate::verify()`] reports it. Any other unreadable line is an
/// error naming it. This does not check the chain: call [`crate::verify()`] for that.
pub fn read_events(dir: &Path) -> Result<Vec<Event>, LogError> {
    let path = dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).map_err(|e| LogError::io("read", &path, e))?;
    let (lines, _torn) = split_lines(&bytes);
    let mut events = Vec::with_capacity(lines.len());
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_slice::<Event>(line) {
            Ok(event) => events.push(event),
            Err(_) if i == last && serde_json::from_slice::<serde_json::Value>(line).is_err() => {
                break;
            }
            Err(e) => {
                return Err(LogError::BadLine {
                    path,
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(events)
}

/// The directory of the session whose id is `query` or starts with it. A prefix that fits
/// several sessions is refused with all of them named.
pub fn find_session(root: &Path, query: &str) -> Result<PathBuf, LogError> {
    let not_found = || LogError::NotFound {
        query: query.to_owned(),
        root: root.to_owned(),
    };
    if query.is_empty() || query.contains('/') {
        return Err(not_found());
    }
    let ids = session_ids(root)?;
    if let Some(exact) = ids.iter().find(|id| id.as_str() == query) {
        return Ok(root.join(exact.as_str()));
    }
    let matching: Vec<&SessionId> = ids
        .iter()
        .filter(|id| id.as_str().starts_with(query))
        .collect();
    match matching.as_slice() {
        [] => Err(not_found()),
        [one] => Ok(root.join(one.as_str())),
        many => Err(LogError::Ambiguous {
            query: query.to_owned(),
            candidates: many.iter().map(|id| id.to_string()).collect(),
        }),
    }
}

/// One session under the sessions root: its log folded into the session's view, and whether a
/// writer holds it now (which the log cannot tell).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session id.
    pub id: SessionId,
    /// Its directory.
    pub dir: PathBuf,
    /// Its complete events folded ([`chock_protocol::view::SessionView`]); empty when the log
    /// cannot be read.
    pub view: SessionView,
    /// Whether a writer holds it now.
    pub liveness: Liveness,
}

/// Every session under `root`, oldest first (ids sort by time). A directory whose name is not
/// a session id is skipped; a session whose log cannot be read is listed with 0 events.
pub fn list_sessions(root: &Path) -> Result<Vec<SessionSummary>, LogError> {
    let mut out = Vec::new();
    for id in session_ids(root)? {
        let dir = root.join(id.as_str());
        let events = read_events(&dir).unwrap_or_default();
        let liveness = is_live(&dir)?;
        out.push(SessionSummary {
            view: view_of(&events),
            id,
            dir,
            liveness,
        });
    }
    Ok(out)
}

/// The session's view of `events`: the one fold every reader of a session's history uses. An
/// event whose data does not fit its kind's type counts as the last event and nothing more.
pub fn view_of(events: &[Event]) -> SessionView {
    let mut view = SessionView::default();
    for event in events {
        view.apply(event.at(), event.payload().ok().as_ref());
    }
    view
}

fn session_ids(root: &Path) -> Result<Vec<SessionId>, LogError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io("read directory", root, e)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io("read directory", root, e))?;
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| SessionId::parse(n).ok())
        {
            ids.push(id);
        }
    }
    ids.sort();
    Ok(ids)
}
