//! The session's side of a microVM guest's snapshots (`[sandbox] snapshots = true`,
//! docs/microvm.md "Snapshots and forks"): after each completed turn the warm guest is
//! snapshotted into the session's directory, with the turn it is of; a fork at that turn links
//! the snapshot into its own directory, and its session starts its guest from it before its
//! first call. A fork at an earlier turn finds no snapshot and boots cold; a snapshot that
//! exists and cannot be restored fails the session's opening (there is no silent cold boot).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{CallOptions, Session, SessionError};

/// The snapshot's directory in a session's directory (0700, its files 0600).
const DIR: &str = "guest-snapshot";
/// The file in it naming the completed turn it was taken at.
const TURN: &str = "turn";

fn failed(what: &str, e: impl std::fmt::Display) -> SessionError {
    SessionError::GuestSnapshot(format!("{what}: {e}"))
}

/// The snapshot's directory in the session directory `session_dir`.
fn dir_of(session_dir: &Path) -> PathBuf {
    session_dir.join(DIR)
}

/// The turn the snapshot in `session_dir` was taken at, if there is a whole one.
fn turn_of(session_dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir_of(session_dir).join(TURN))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl Session {
    /// Snapshots the session's warm guest at the end of completed turn `turn`, replacing the
    /// snapshot of an earlier turn, when the policy asks for snapshots (`[sandbox] snapshots`).
    /// `Ok(false)`: nothing to snapshot (no such policy, or no guest warm: no call ran yet).
    /// A snapshot that fails leaves none behind (a fork at that turn then boots cold).
    pub fn snapshot_guest(&self, turn: u32) -> Result<bool, SessionError> {
        let Some(guest) = self
            .guest
            .as_ref()
            .filter(|_| self.policy.sandbox().snapshots)
        else {
            return Ok(false);
        };
        let dir = dir_of(self.log.dir());
        if !guest.is_warm() {
            // An earlier turn's snapshot is not this turn's: a fork at this turn boots cold.
            remove(&dir);
            return Ok(false);
        }
        let taken = guest
            .snapshot(&dir)
            .map_err(|e| failed("take it", e))
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(dir.join(TURN))
                    .and_then(|mut f| f.write_all(turn.to_string().as_bytes()))
                    .map_err(|e| failed("record its turn", e))
            });
        if taken.is_err() {
            remove(&dir);
        }
        taken.map(|()| true)
    }

    /// Starts the session's guest from the snapshot in its directory, if it has one (a fork's,
    /// linked from its parent): the guest restored shows this session's workspace. A snapshot
    /// that cannot be restored is an error; nothing boots cold in its place.
    pub(crate) fn warm_up_from_snapshot(&self) -> Result<bool, SessionError> {
        let Some(guest) = self
            .guest
            .as_ref()
            .filter(|_| self.policy.sandbox().snapshots)
        else {
            return Ok(false);
        };
        let dir = dir_of(self.log.dir());
        if turn_of(self.log.dir()).is_none() {
            return Ok(false);
        }
        let plan = self.plan_for(&["true".to_string()], &CallOptions::default());
        guest.warm_up_from(&dir, &plan)?;
        Ok(true)
    }
}

/// Removes a snapshot directory (it holds guest memory), whether whole or not.
fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// Gives the fork in `fork_dir` the snapshot its parent in `parent_dir` took at the end of
/// `turn`, when the parent has that turn's (hard links where the filesystem allows, else
/// copies, 0600 in a 0700 directory). `Ok(false)`: the parent has none of that turn.
pub(crate) fn link_into_fork(
    parent_dir: &Path,
    turn: u32,
    fork_dir: &Path,
) -> Result<bool, SessionError> {
    if turn_of(parent_dir) != Some(turn) {
        return Ok(false);
    }
    let (from, to) = (dir_of(parent_dir), dir_of(fork_dir));
    let linked = (|| -> std::io::Result<()> {
        std::fs::DirBuilder::new().mode(0o700).create(&to)?;
        for entry in std::fs::read_dir(&from)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let target = to.join(entry.file_name());
            if std::fs::hard_link(entry.path(), &target).is_err() {
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)?;
                std::io::copy(&mut std::fs::File::open(entry.path())?, &mut out)?;
            }
        }
        Ok(())
    })();
    if let Err(e) = linked {
        remove(&to);
        return Err(failed(&format!("link it into {}", to.display()), e));
    }
    // The parent may have replaced its snapshot meanwhile (a later turn's): then none.
    if turn_of(fork_dir) != Some(turn) {
        remove(&to);
        return Ok(false);
    }
    Ok(true)
}
