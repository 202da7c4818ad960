//! The git base commit: the user's state when the session started, what every checkpoint, the
//! diff and apply measure the session's changes against.
//!
//! It costs a `git add -A` over the whole project (a stat of every tracked file and a read of
//! every directory), so it is written on a thread of its own while the session starts, and joined
//! only by what needs it: a checkpoint or a diff of a workspace that changed, an apply. A session
//! whose workspace never changed never waits for it: when its [`Workspace`](crate::Workspace) is
//! dropped with the base still being written, the job is abandoned (its git process killed), and
//! `meta.json` keeps `base: null`, so the next open records it then. Nothing is lost by that: with
//! an empty upper directory there is no copy of any project file whose start state the base would
//! have to vouch for, and whatever the session writes after reopening is copied up after that base.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::background::Background;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::meta::{Backing, Layout, Meta};

/// The thread writing the base, and the way to stop it.
#[derive(Debug)]
pub(crate) struct BaseJob {
    thread: JoinHandle<Result<(String, PathBuf)>>,
    control: Arc<Background>,
}

impl BaseJob {
    /// Starts writing the base of session `session` on a thread of its own.
    pub(crate) fn start(git: Git, layout: Layout, ref_name: String, session: String) -> BaseJob {
        let control = Arc::new(Background::default());
        let job_control = Arc::clone(&control);
        let thread = std::thread::spawn(move || {
            let base = record(&git, &layout, &ref_name, &session, Some(&job_control))?;
            Ok((base, git.ref_file(&ref_name)?))
        });
        BaseJob { thread, control }
    }

    /// The steering of the job's git, for a call to pause it while it runs.
    pub(crate) fn control(&self) -> Arc<Background> {
        Arc::clone(&self.control)
    }

    /// Waits for the base: the commit and the session ref's loose file. The job runs from now on
    /// even while calls hold it.
    pub(crate) fn join(self, layout: &Layout) -> Result<(String, PathBuf)> {
        self.control.need();
        self.thread.join().unwrap_or_else(|_| {
            Err(WorkspaceError::record(
                layout.meta(),
                "base thread panicked",
            ))
        })
    }

    /// Whether the base is still being written.
    pub(crate) fn running(&self) -> bool {
        !self.thread.is_finished()
    }

    /// Stops the job (its git process is killed) and waits for its thread, which then ends with
    /// an error nobody reads; `meta.json` is left saying `base: null`.
    pub(crate) fn abandon(self) {
        self.control.cancel();
        let _ = self.thread.join();
    }
}

/// Records the base now: a private copy of the user's index (so git's stat cache makes unchanged
/// files cheap), `git add -A`, `write-tree`, a commit whose parent is `HEAD`, the session ref, and
/// `meta.json`. A `control` pauses its two long git processes while calls run, and stops it at
/// the next git process (killing the running one) when cancelled.
pub(crate) fn record(
    git: &Git,
    layout: &Layout,
    ref_name: &str,
    session: &str,
    control: Option<&Background>,
) -> Result<String> {
    let index = layout.base_index();
    // A git killed while adding (an abandoned job) leaves its lock; nothing else writes this
    // private index, and the session's writer lock keeps one process on the session.
    let _ = fs::remove_file(index.with_extension("index.lock"));
    let user_index = git.user_index()?;
    if user_index.exists() {
        let _ = fs::remove_file(&index);
        // A second name for the user's index, not a copy: git never writes an index in place (it
        // writes `<index>.lock` and renames it over the name it was given), so the user's file is
        // only read, and a 100,000-file project's 10 MB are not written again (dirty data that a
        // call's overlay unmount, which syncs the filesystem, would wait for). Another
        // filesystem: a copy.
        if fs::hard_link(&user_index, &index).is_err() {
            fs::copy(&user_index, &index)
                .map_err(|e| WorkspaceError::io("copy the git index to", &index, e))?;
        }
    }
    let private = git.with_index(&index);
    let add = ["add", "-A", "--", "."];
    let write_tree = ["write-tree"];
    let tree = match control {
        Some(control) => {
            private.run_in_background(&add, control)?;
            private.run_in_background(&write_tree, control)?
        }
        None => {
            private.run(&add)?;
            private.run(&write_tree)?
        }
    };
    let tree = String::from_utf8_lossy(&tree).trim_end().to_string();
    if control.is_some_and(Background::cancelled) {
        return Err(WorkspaceError::record(
            layout.meta(),
            "the base was abandoned",
        ));
    }
    let head = git.head();
    let parents: Vec<&str> = head.iter().map(String::as_str).collect();
    let commit = git.commit_tree(
        &tree,
        &parents,
        &format!("chock: base of session {session}"),
    )?;
    git.run(&["update-ref", "-m", "chock: session base", ref_name, &commit])?;
    let path = layout.meta();
    let mut meta = Meta::load(&path)?;
    if let Backing::Git { base, .. } = &mut meta.backing {
        *base = Some(commit.clone());
    }
    meta.store(&path)?;
    Ok(commit)
}
