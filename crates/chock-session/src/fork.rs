//! `chock sessions fork SESSION --turn N`: a new session that starts where a completed turn of
//! another ended — its log names that line of the parent's log, its workspace is the one the turn
//! ended with, and whatever is rebuilt from a log (the conversation, the ratchet) is rebuilt from
//! the parent's log up to that line ([`chock_log::read_lineage`]). docs/forks.md.

use std::path::{Path, PathBuf};

use chock_log::{Event, EventData, Log, SessionHeader, SessionId};
use chock_policy::Policy;
use chock_protocol::log::{ForkOrigin, Note, RatchetChange, TurnEndReason};
use chock_workspace::Workspace;

use crate::error::SessionError;

/// A fork that was made: a closed session, taken up with a resume.
#[derive(Debug, Clone)]
pub struct Forked {
    /// The new session's id.
    pub id: SessionId,
    /// Its directory.
    pub dir: PathBuf,
    /// The line of the parent's log it starts after.
    pub origin: ForkOrigin,
}

/// Why a fork cannot be made from what was asked (bad input, each naming the session and turn).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkRefusal {
    /// The session has no such turn.
    #[error("session {session} has no turn {turn} (its turns: {turns})")]
    NoSuchTurn {
        /// The session whose log was searched (its id).
        session: String,
        /// The turn asked for.
        turn: u32,
        /// The turns it has, in words (`1 to 4`, or `none`).
        turns: String,
    },
    /// The turn did not complete: it is running, or it was interrupted or failed.
    #[error(
        "turn {turn} of session {session} is not a completed turn ({why}); fork at a turn that ended"
    )]
    NotCompleted {
        /// The session that logged the turn (its id).
        session: String,
        /// The turn asked for.
        turn: u32,
        /// Why it did not complete, in words.
        why: String,
    },
    /// The turn ended, but no workspace state was recorded with it (a log older than forks, or
    /// its record failed: the log has a `note` saying why).
    #[error(
        "turn {turn} of session {session} has no recorded workspace state, so it cannot be forked"
    )]
    NoState {
        /// The session that logged the turn (its id).
        session: String,
        /// The turn asked for.
        turn: u32,
    },
}

/// Applies the ratchet changes `events` record (`note {about: ratchet}`), in order, to `policy`.
pub(crate) fn apply_ratchet(policy: &mut Policy, events: &[Event]) -> Result<(), SessionError> {
    for event in events {
        if let Ok(EventData::Note(Note::Ratchet {
            change,
            pattern,
            decision,
            ..
        })) = event.payload()
        {
            let applied = match change {
                RatchetChange::Restrict => chock_policy::Decision::from_name(&decision)
                    .ok_or_else(|| format!("`{decision}` is not a decision"))
                    .and_then(|d| policy.restrict(&pattern, d).map_err(|e| e.to_string())),
                RatchetChange::Widen => policy
                    .widen(&pattern)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            };
            if let Err(reason) = applied {
                return Err(SessionError::Resume(format!(
                    "line {}: the ratchet change on {pattern} does not apply again: {reason}",
                    event.seq
                )));
            }
        }
    }
    Ok(())
}

/// Where turn `turn` of the session in `dir` ended: the session that logged it (a fork's inherited
/// turns are its parent's) and that `turn.end` line.
fn turn_end(dir: &Path, turn: u32) -> Result<(PathBuf, Event), SessionError> {
    let events = chock_log::read_events(dir)?;
    let session = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(origin) = chock_log::fork_origin(&events)
        && turn <= origin.turn
    {
        let parent = dir.parent().unwrap_or(Path::new(".")).join(&origin.session);
        return turn_end(&parent, turn);
    }
    let mut started = Vec::new();
    let mut end = None;
    for event in events {
        match event.payload() {
            Ok(EventData::TurnStart(t)) => started.push(t.turn),
            Ok(EventData::TurnEnd(t)) if t.turn == turn => end = Some((event, t)),
            _ => {}
        }
    }
    let Some((event, t)) = end else {
        if started.contains(&turn) {
            return Err(ForkRefusal::NotCompleted {
                session,
                turn,
                why: "it has not ended".into(),
            }
            .into());
        }
        let turns = match (started.first(), started.last()) {
            (Some(a), Some(b)) => format!("{a} to {b}"),
            _ => "none".into(),
        };
        return Err(ForkRefusal::NoSuchTurn {
            session,
            turn,
            turns,
        }
        .into());
    };
    match t.reason {
        TurnEndReason::NoToolCalls | TurnEndReason::ToolResults => {}
        TurnEndReason::Interrupted | TurnEndReason::Error => {
            let why = if t.reason == TurnEndReason::Interrupted {
                "it was interrupted"
            } else {
                "the model request failed"
            };
            return Err(ForkRefusal::NotCompleted {
                session,
                turn,
                why: why.into(),
            }
            .into());
        }
    }
    if t.workspace.is_none() {
        return Err(ForkRefusal::NoState { session, turn }.into());
    }
    Ok((dir.to_path_buf(), event))
}

/// Makes a fork of the session in `parent_dir` at the end of its completed turn `turn`: a new
/// session beside it whose line 0 names the parent and that turn's `turn.end` line (seq and
/// hash), whose workspace is the one the turn ended with, and whose ratchet is the parent's at
/// that line. The policy is read from the project first (rule 2), with those narrowings, so a
/// fork that could not be taken up is refused before anything is made. The new session is left
/// closed: a resume takes it up (`chock run --resume ID`).
pub fn fork(parent_dir: &Path, turn: u32, header: SessionHeader) -> Result<Forked, SessionError> {
    let (owner, end) = turn_end(parent_dir, turn)?;
    let Ok(EventData::TurnEnd(t)) = end.payload() else {
        unreachable!("turn_end returns a turn.end line");
    };
    let state = t.workspace.expect("turn_end checked the state");
    let hash = chock_log::line_hash(&owner, end.seq)?;
    let owner_id = owner
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let origin = ForkOrigin {
        session: owner_id.clone(),
        turn,
        seq: end.seq,
        hash,
    };
    // The lineage up to that line, checked (hash, parents) as a resume of the fork will read it.
    let lineage = chock_log::read_lineage_at(&owner, origin.seq, &origin.hash)?;
    let record = chock_workspace::read_turn(&owner, turn)?;
    let mut policy = Policy::load(&record.project)?;
    apply_ratchet(&mut policy, &lineage)?;
    let root = owner.parent().unwrap_or(Path::new(".")).to_path_buf();
    let parent_header = parent_header(&owner)?;
    let header = SessionHeader {
        project: Some(record.project.clone()),
        parent: Some(SessionId::parse(&owner_id)?),
        command: header.command.or(Some("fork".into())),
        provider: header.provider.or(parent_header.provider),
        model: header.model.or(parent_header.model),
        policy_file: policy.project_file().map(Path::to_path_buf),
        org_policy_file: policy.org_file().map(Path::to_path_buf),
        fork: Some(origin.clone()),
        ..header
    };
    let log = Log::create(&root, header)?;
    let id = log.id().clone();
    let dir = log.dir().to_path_buf();
    if let Err(e) = Workspace::fork(&owner, turn, &state.digest, &dir, id.as_str()) {
        // Nothing half-made is left: a session without its workspace would list as forked.
        drop(log);
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.into());
    }
    log.record(
        None,
        Note::Text {
            text: format!(
                "forked from session {owner_id} at the end of turn {turn} (line {}): {} changed paths",
                origin.seq, state.paths
            ),
        },
    )?;
    // The parent's guest snapshot of that turn, when it has one: the fork's guest starts from it.
    let snapshot = match crate::guest_snapshot::link_into_fork(&owner, turn, &dir) {
        Ok(true) => "its guest starts from the parent's snapshot of that turn".to_string(),
        Ok(false) => String::new(),
        Err(e) => format!("its guest boots cold: {e}"),
    };
    if !snapshot.is_empty() {
        log.record(None, Note::Text { text: snapshot })?;
    }
    log.sync()?;
    drop(log);
    Ok(Forked { id, dir, origin })
}

/// The provider and model the parent's line 0 names.
fn parent_header(dir: &Path) -> Result<SessionHeader, SessionError> {
    let events = chock_log::read_events(dir)?;
    let mut header = SessionHeader::default();
    if let Some(Ok(EventData::SessionStart(start))) = events.first().map(Event::payload) {
        header.provider = start.provider;
        header.model = start.model;
    }
    Ok(header)
}
