//! The workspace at the end of each completed turn, and a fork's workspace made from one.
//!
//! A turn's record is its change set — every path that differs from the session's start, with the
//! entry it has now (or none: deleted) — in `<session>/turns/<turn>.json`, the bytes in
//! `<session>/turns/blobs/<sha256>` (shared between turns: a file unchanged since the last turn is
//! not written again). So its cost is the size of the session's change, never of the project: the
//! scan is the one every checkpoint makes of the upper directory, by descriptor
//! ([`chock_beneath`]). A fork's workspace is a new overlay over the same project whose upper
//! directory is written from such a record: files, symlinks and directories as they were,
//! whiteouts where the turn had deleted a path. docs/forks.md.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use chock_log::clock::now_rfc3339;
use serde::{Deserialize, Serialize};

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::late_sync::LateSync;
use crate::meta::{Backing, Layout, META_FORMAT, Meta};
use crate::record::{Records, StoredEntry};
use crate::upper::RawChange;
use crate::workspace::Workspace;

/// Format of a turn record.
pub const TURN_FORMAT: u32 = 1;
/// The directory of turn records inside a session directory (beside `applies/`, so removing the
/// workspace keeps them).
pub const TURNS_DIR: &str = "turns";

/// What the workspace held at the end of one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The record's format; one this version does not read is refused.
    pub format: u32,
    /// The session's id.
    pub session: String,
    /// The turn whose end it records.
    pub turn: u32,
    /// See [`state_digest`].
    pub digest: String,
    /// The real project.
    pub project: PathBuf,
    /// The backing as it was (git: with its base commit).
    pub backing: Backing,
    /// Git: the commit the session ref pointed at.
    pub commit: Option<String>,
    /// Every changed path and what it holds after the turn (`None`: deleted).
    pub changes: BTreeMap<String, Option<StoredEntry>>,
}

/// What a turn record says in the log's `turn.end` (`chock_protocol::log::TurnState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSummary {
    /// See [`state_digest`].
    pub digest: String,
    /// How many paths differ from the session's start.
    pub paths: u64,
    /// Git backing: the checkpoint commit the session ref pointed at.
    pub commit: Option<String>,
}

/// SHA-256 (hex) over a change set's paths and after-entries, length-prefixed and versioned: the
/// same state gives the same digest on every machine, any byte, mode or link target another.
pub fn state_digest(changes: &BTreeMap<String, Option<Entry>>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut put = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(b"chock turn state 1");
    for (path, entry) in changes {
        put(path.as_bytes());
        match entry {
            None => put(b"-"),
            Some(e) => put(e.hash().as_bytes()),
        }
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn turns_dir(session_dir: &Path) -> PathBuf {
    session_dir.join(TURNS_DIR)
}

fn record_path(session_dir: &Path, turn: u32) -> PathBuf {
    turns_dir(session_dir).join(format!("{turn}.json"))
}

/// The turn records of one workspace, and the thread that makes them durable off the turn's path
/// (late_sync.rs); see the module.
#[derive(Debug)]
pub(crate) struct Turns {
    /// `<session>/turns`.
    dir: PathBuf,
    /// Records and their blobs, synced off the turn's path.
    late: LateSync,
}

/// What a turn record says besides its change set: whose workspace it is and where it stands.
pub(crate) struct TurnContext<'a> {
    /// The session's id.
    pub(crate) session: &'a str,
    /// The real project.
    pub(crate) project: &'a Path,
    /// The backing, with the base (see `Before::recorded_backing`).
    pub(crate) backing: Backing,
    /// Git: the commit the session ref points at.
    pub(crate) commit: Option<String>,
}

impl Turns {
    /// The turn records of the session in `session_dir`.
    pub(crate) fn new(session_dir: &Path) -> Turns {
        Turns {
            dir: turns_dir(session_dir),
            late: LateSync::default(),
        }
    }

    /// Waits until every turn record written so far (and its blobs) is durable.
    pub(crate) fn flush(&self) -> Result<()> {
        self.late.flush()
    }

    /// Records `raw`, the workspace's change set at the end of `turn` (see the module). The record
    /// is in place when this returns and durable soon after ([`Turns::flush`]).
    pub(crate) fn record(
        &self,
        turn: u32,
        raw: BTreeMap<String, RawChange>,
        context: TurnContext<'_>,
    ) -> Result<TurnSummary> {
        let records = Records::new(self.dir.clone());
        let mut changes = BTreeMap::new();
        let mut entries = BTreeMap::new();
        for (path, change) in raw {
            let stored = match &change.new {
                Some(entry) => Some(records.store_late(entry, &self.late)?),
                None => None,
            };
            changes.insert(path.clone(), stored);
            entries.insert(path, change.new);
        }
        let digest = state_digest(&entries);
        let TurnContext {
            session,
            project,
            backing,
            commit,
        } = context;
        let record = TurnRecord {
            format: TURN_FORMAT,
            session: session.to_string(),
            turn,
            digest: digest.clone(),
            project: project.to_path_buf(),
            backing,
            commit: commit.clone(),
            changes,
        };
        let path = self.dir.join(format!("{turn}.json"));
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)
                .map_err(|e| WorkspaceError::io("create", &self.dir, e))?;
        }
        let bytes =
            serde_json::to_vec_pretty(&record).map_err(|e| WorkspaceError::record(&path, e))?;
        // In place now (a fork can read it at once), durable soon after: nothing the session does
        // next waits on it (late_sync.rs).
        self.late.write(&path, &bytes)?;
        Ok(TurnSummary {
            digest,
            paths: record.changes.len() as u64,
            commit,
        })
    }
}

/// Makes the workspace of fork `session_id` (in `session_dir`) from the record of `turn` in
/// the parent session `parent_dir`, which must have the digest the parent's log names
/// (`expect`). The new upper directory holds exactly that turn's change set; a git fork
/// measures against the parent's base commit and its ref starts at the turn's checkpoint.
pub(crate) fn fork(
    parent_dir: &Path,
    turn: u32,
    expect: &str,
    session_dir: &Path,
    session_id: &str,
) -> Result<Workspace> {
    let record = read_record(parent_dir, turn)?;
    let path = record_path(parent_dir, turn);
    let blobs = Records::new(turns_dir(parent_dir));
    let mut entries = BTreeMap::new();
    for (rel, stored) in &record.changes {
        // Each path is walked as plain names when it is written (`..`, `/` refused there).
        let entry = match stored {
            Some(s) => Some(blobs.load(s)?),
            None => None,
        };
        entries.insert(rel.clone(), entry);
    }
    let digest = state_digest(&entries);
    if digest != expect || record.digest != expect {
        return Err(WorkspaceError::record(
            &path,
            format!(
                "the recorded state has digest {digest}, the parent's log says {expect}: \
                 the record was changed"
            ),
        ));
    }
    let (project, layout) = Layout::create(&record.project, session_dir)?;
    let backing = match &record.backing {
        Backing::Git {
            top, prefix, base, ..
        } => Backing::Git {
            top: top.clone(),
            prefix: prefix.clone(),
            ref_name: format!("refs/chock/{session_id}"),
            base: base.clone(),
        },
        Backing::Overlay => Backing::Overlay,
    };
    if let Backing::Git {
        top,
        ref_name,
        base: Some(base),
        ..
    } = &backing
    {
        let start = record.commit.as_deref().unwrap_or(base);
        Git::new(top).run(&["update-ref", "-m", "chock: fork", ref_name, start])?;
    }
    let meta = Meta {
        format: META_FORMAT,
        session: session_id.to_string(),
        project,
        backing,
        created: now_rfc3339(),
    };
    write_upper(&layout.upper(), &entries)?;
    meta.store(&layout.meta())?;
    let workspace = Workspace::open(session_dir)?;
    // A parent whose base was not written yet at that turn (it had changed nothing) leaves
    // the fork to record its own, as a new session does.
    workspace.wait_base()?;
    Ok(workspace)
}

/// The record of `turn` in `session_dir`.
pub fn read_record(session_dir: &Path, turn: u32) -> Result<TurnRecord> {
    let path = record_path(session_dir, turn);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let session = session_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(WorkspaceError::NoTurnState {
                session,
                turn,
                path,
            });
        }
        Err(e) => return Err(WorkspaceError::io("read", &path, e)),
    };
    let record: TurnRecord =
        serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::record(&path, e))?;
    if record.format != TURN_FORMAT || record.turn != turn {
        return Err(WorkspaceError::record(
            &path,
            format!(
                "format {} turn {} is not format {TURN_FORMAT} turn {turn}",
                record.format, record.turn
            ),
        ));
    }
    Ok(record)
}

/// Writes `changes` into the empty upper directory `upper`: each entry made by descriptor, parent
/// directories as plain directories, and a whiteout for each deleted path whose parent is still a
/// directory (a path below a deleted or replaced directory is hidden by that one).
fn write_upper(upper: &Path, changes: &BTreeMap<String, Option<Entry>>) -> Result<()> {
    let root =
        chock_beneath::Dir::open_root(upper).map_err(|e| WorkspaceError::io("open", upper, e))?;
    let hidden_below = |rel: &str| {
        let mut at = rel;
        while let Some((parent, _)) = at.rsplit_once('/') {
            if changes
                .get(parent)
                .is_some_and(|e| !matches!(e, Some(Entry::Dir)))
            {
                return true;
            }
            at = parent;
        }
        false
    };
    for (rel, entry) in changes {
        if hidden_below(rel) {
            continue;
        }
        let shown = upper.join(rel);
        let (dir, name) = root
            .parent(Path::new(rel), true)
            .map_err(|e| WorkspaceError::io("open", &shown, e.into()))?;
        let made = match entry {
            None => dir.make_whiteout(name),
            Some(Entry::Dir) => match dir.make_dir(name, 0o755) {
                // Made already as the parent of an entry below it.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            },
            Some(Entry::File { exec, data }) => {
                dir.make_file(name, data, if *exec { 0o755 } else { 0o644 })
            }
            Some(Entry::Symlink { target }) => {
                use std::os::unix::ffi::OsStrExt;
                dir.make_symlink(name, OsStr::from_bytes(target))
            }
        };
        made.map_err(|e| WorkspaceError::io("make", &shown, e))?;
    }
    Ok(())
}
