//! A forked session's history: its parent's log up to the line it forked at, then its own.
//!
//! A fork's line 0 names the parent and one line of the parent's log by seq and hash
//! (`chock_protocol::log::ForkOrigin`). Whatever is rebuilt from a log — the conversation, the
//! ratchet — is rebuilt from [`read_lineage`], so a fork is the parent up to that line and itself
//! after it, and a parent whose line no longer has that hash (edited, truncated, replaced) is
//! refused by name rather than followed. docs/forks.md.

use std::path::{Path, PathBuf};

use crate::line::{Event, LOG_FILE, sha256_hex, split_lines};
use crate::read::read_events;
use crate::{EventData, LogError};

/// How many forks deep a lineage may go (a cycle of forged headers ends here).
pub const MAX_FORK_DEPTH: usize = 64;

/// The hash of line `seq` of the log in `dir`: SHA-256 of its exact bytes with the newline, the
/// `prev` the next line carries (the chain's head once that line is written).
pub fn line_hash(dir: &Path, seq: u64) -> Result<String, LogError> {
    let path = dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).map_err(|e| LogError::io("read", &path, e))?;
    let (lines, _) = split_lines(&bytes);
    usize::try_from(seq)
        .ok()
        .and_then(|n| lines.get(n))
        .map(|line| sha256_hex(line))
        .ok_or_else(|| LogError::Fork {
            dir: dir.to_path_buf(),
            reason: format!("the log has no line {seq}"),
        })
}

/// The hash of line `seq` once every line up to it is checked to chain (line 0 to the session's
/// genesis, each next line's `prev` to the line before): an edit anywhere before the fork's line
/// is a break here, not only an edit of that line.
fn chained_hash(dir: &Path, events: &[Event], seq: u64) -> Result<String, LogError> {
    let path = dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).map_err(|e| LogError::io("read", &path, e))?;
    let (lines, _) = split_lines(&bytes);
    let broken = |reason: String| LogError::Fork {
        dir: dir.to_path_buf(),
        reason,
    };
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut prev = crate::line::genesis_hash(&id);
    for (n, (line, event)) in lines.iter().zip(events).enumerate() {
        if event.seq != n as u64 || event.prev != prev {
            return Err(broken(format!(
                "line {n} does not chain to the line before it: the parent's log changed"
            )));
        }
        prev = sha256_hex(line);
        if event.seq == seq {
            return Ok(prev);
        }
    }
    Err(broken(format!("the log has no line {seq} to fork from")))
}

/// The fork origin line 0 of `events` names, if any.
pub fn fork_origin(events: &[Event]) -> Option<chock_protocol::log::ForkOrigin> {
    match events.first()?.payload() {
        Ok(EventData::SessionStart(start)) => start.fork,
        _ => None,
    }
}

/// The events of the session in `dir` with, for a fork, its parent's lineage up to the line it
/// forked at first (the parent's directory is a sibling of `dir`, in the same sessions root).
/// Each log's events keep their own seqs.
pub fn read_lineage(dir: &Path) -> Result<Vec<Event>, LogError> {
    lineage(dir, None, 0)
}

/// [`read_lineage`] of the session in `dir` up to its own line `seq`, which must have `hash`: what
/// a fork at that line inherits.
pub fn read_lineage_at(dir: &Path, seq: u64, hash: &str) -> Result<Vec<Event>, LogError> {
    lineage(dir, Some((seq, hash)), 0)
}

fn lineage(dir: &Path, upto: Option<(u64, &str)>, depth: usize) -> Result<Vec<Event>, LogError> {
    let mut own = read_events(dir)?;
    if let Some((seq, hash)) = upto {
        let refused = |reason: String| LogError::Fork {
            dir: dir.to_path_buf(),
            reason,
        };
        if own.iter().all(|e| e.seq != seq) {
            return Err(refused(format!("the log has no line {seq} to fork from")));
        }
        let actual = chained_hash(dir, &own, seq)?;
        if actual != hash {
            return Err(refused(format!(
                "line {seq} has hash {actual}, not the {hash} the fork recorded: the parent's log changed"
            )));
        }
        own.retain(|e| e.seq <= seq);
    }
    let Some(origin) = fork_origin(&own) else {
        return Ok(own);
    };
    if depth >= MAX_FORK_DEPTH {
        return Err(LogError::Fork {
            dir: dir.to_path_buf(),
            reason: format!("more than {MAX_FORK_DEPTH} forks deep"),
        });
    }
    let parent = parent_dir(dir, &origin.session)?;
    let mut all = lineage(&parent, Some((origin.seq, &origin.hash)), depth + 1)?;
    all.append(&mut own);
    Ok(all)
}

/// The directory of session `id` beside `dir`.
fn parent_dir(dir: &Path, id: &str) -> Result<PathBuf, LogError> {
    let id = crate::SessionId::parse(id)?;
    let root = dir.parent().unwrap_or(Path::new("."));
    let parent = root.join(id.as_str());
    if !parent.join(LOG_FILE).exists() {
        return Err(LogError::Fork {
            dir: dir.to_path_buf(),
            reason: format!(
                "its parent session {id} is not in {} (a fork needs its parent's log)",
                root.display()
            ),
        });
    }
    Ok(parent)
}
