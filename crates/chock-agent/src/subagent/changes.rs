//! The child's workspace: made as a snapshot of the parent's merged view, and its changes
//! compared against that snapshot — what `take_subagent` writes into the parent's workspace.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chock_log::LogError;
use chock_policy::{Action, ActionError};
use chock_protocol::log::Note;
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Subagents, child_dir};
use chock_tools::ToolOutput;
use chock_tools::tool::{Access, Effect, Tool, ToolContext};
use chock_tools::view::{ViewError, WorkspaceView};

/// Files a snapshot or a comparison walks at most.
const WALK_LIMIT: usize = 50_000;

/// Copies the merged view `view` into the new directory `dest` (files only: `.git`, cache
/// directories and symlinks are left out, modes are not kept), and the policy file the parent's
/// policy was read from as `dest/chock.toml`. Returns how many files were copied.
pub(crate) fn snapshot(
    view: &WorkspaceView,
    policy_file: Option<&Path>,
    dest: &Path,
) -> Result<usize, ViewError> {
    let io = |source| ViewError::Io {
        path: dest.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dest).map_err(io)?;
    let into = WorkspaceView::direct(dest, dest);
    let files = view.walk(".", Path::new(""), WALK_LIMIT)?;
    let mut copied = 0;
    for rel in &files {
        if rel == Path::new(chock_policy::PROJECT_FILE) {
            continue;
        }
        let given = rel.display().to_string();
        let bytes = view.read(&given, rel)?;
        into.write(&given, rel, &bytes)?;
        copied += 1;
    }
    if let Some(policy) = policy_file {
        std::fs::copy(policy, dest.join(chock_policy::PROJECT_FILE)).map_err(io)?;
    }
    Ok(copied)
}

/// One file the child changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Relative to the project root.
    pub path: PathBuf,
    /// Its bytes in the snapshot (None: the child created it).
    pub before: Option<Vec<u8>>,
    /// Its bytes in the child's workspace (None: the child removed it).
    pub after: Option<Vec<u8>>,
}

/// What a child changed, against the snapshot it started from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The changed files, sorted by path.
    pub files: Vec<Change>,
}

impl Changes {
    /// A digest of the changes (each path with the hash of its new content, or `-` for a
    /// removal): what the decision names and `agent.complete` records.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for change in &self.files {
            hasher.update(change.path.to_string_lossy().as_bytes());
            hasher.update([0]);
            match &change.after {
                Some(bytes) => hasher.update(hex(&Sha256::digest(bytes))),
                None => hasher.update(b"-"),
            }
            hasher.update([b'\n']);
        }
        hex(&hasher.finalize())[..16].to_string()
    }

    /// The paths, as strings.
    pub fn paths(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|c| c.path.display().to_string())
            .collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_opt(view: &WorkspaceView, rel: &Path) -> Result<Option<Vec<u8>>, ViewError> {
    let given = rel.display().to_string();
    match view.read(&given, rel) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(ViewError::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The changes of the child whose session directory is `child_session` against its snapshot
/// `snapshot` (its project).
pub fn changes_of(snapshot: &Path, child_session: &Path) -> Result<Changes, String> {
    let workspace = chock_workspace::Workspace::open(child_session)
        .map_err(|e| format!("the child's workspace cannot be opened: {e}"))?;
    let child = WorkspaceView::from_mount(workspace.project(), &workspace.mount());
    let base = WorkspaceView::direct(workspace.project(), snapshot);
    let walk = |view: &WorkspaceView| {
        view.walk(".", Path::new(""), WALK_LIMIT)
            .map_err(|e| e.to_string())
    };
    let paths: BTreeSet<PathBuf> = walk(&child)?.into_iter().chain(walk(&base)?).collect();
    let mut files = Vec::new();
    for path in paths {
        if path == Path::new(chock_policy::PROJECT_FILE) {
            continue;
        }
        let before = read_opt(&base, &path).map_err(|e| e.to_string())?;
        let after = read_opt(&child, &path).map_err(|e| e.to_string())?;
        if before != after {
            files.push(Change {
                path,
                before,
                after,
            });
        }
    }
    Ok(Changes { files })
}

/// `take_subagent`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TakeInput {
    /// The child session's id, as spawn_agent reported it.
    pub child: String,
}

/// `take_subagent`: writes a finished child's changes into this session's workspace, decided
/// as `subagent.take` (the question names the digest and the paths).
#[derive(Debug)]
pub struct TakeSubagent {
    pub(crate) subagents: Arc<Subagents>,
}

impl TakeSubagent {
    /// The tool over the session's subagent state.
    pub fn new(subagents: Arc<Subagents>) -> Self {
        Self { subagents }
    }
}

impl Tool for TakeSubagent {
    type Input = TakeInput;

    fn name(&self) -> &str {
        "take_subagent"
    }

    fn description(&self) -> &str {
        "Take a finished child agent's changes (spawn_agent) into your workspace: every file it \
         created or changed is written here and every file it removed is removed here, unless you \
         changed the same file since the spawn (then nothing is written and the conflicts are \
         named). Decided as subagent.take."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, _input: &TakeInput) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "take_subagent: subagent.take, naming the digest of the child's changes",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: TakeInput,
    ) -> Result<ToolOutput, LogError> {
        let _ = &self.subagents;
        let log = &cx.decider.log;
        if chock_log::SessionId::parse(&input.child).is_err() {
            return Ok(ToolOutput::error(format!(
                "`{}` is not a session id",
                input.child
            )));
        }
        let mine = child_dir(log.dir(), &input.child);
        let snapshot = mine.join("project");
        let Some(root) = log.dir().parent() else {
            return Ok(ToolOutput::error(
                "the sessions directory is unknown".into(),
            ));
        };
        let child_session = root.join(&input.child);
        if !snapshot.is_dir() || !child_session.is_dir() {
            return Ok(ToolOutput::error(format!(
                "this session spawned no child {}",
                input.child
            )));
        }
        if matches!(
            chock_log::is_live(&child_session),
            Ok(chock_log::Liveness::Live { .. })
        ) {
            return Ok(ToolOutput::error(format!(
                "child {} is still running",
                input.child
            )));
        }
        let changes = match changes_of(&snapshot, &child_session) {
            Ok(c) => c,
            Err(e) => return Ok(ToolOutput::error(e)),
        };
        if changes.files.is_empty() {
            return Ok(ToolOutput::ok(format!(
                "child {} changed nothing",
                input.child
            )));
        }
        let digest = changes.digest();
        let action = match Action::parse("subagent.take") {
            Ok(a) => a,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let detail = format!(
            "take child {}'s changes (digest {digest}): {}",
            input.child,
            changes.paths().join(", ")
        );
        let settled = cx
            .decider
            .settle(Some(cx.call_id), &action, &detail)
            .await?;
        if !settled.allowed {
            return Ok(ToolOutput::error(settled.refusal));
        }
        let view = cx.host.view();
        let mut conflicts = Vec::new();
        for change in &changes.files {
            let now = match read_opt(view, &change.path) {
                Ok(now) => now,
                Err(e) => return Ok(ToolOutput::error(format!("not taken: {e}"))),
            };
            if now != change.before {
                conflicts.push(change.path.display().to_string());
            }
        }
        if !conflicts.is_empty() {
            return Ok(ToolOutput::error(format!(
                "not taken: you changed these files since child {} was spawned: {}; nothing was written",
                input.child,
                conflicts.join(", ")
            )));
        }
        let (writes, removals): (Vec<&Change>, Vec<&Change>) =
            changes.files.iter().partition(|c| c.after.is_some());
        log.record(
            Some(cx.call_id),
            Note::SubagentTaken {
                child: input.child.clone(),
                digest: digest.clone(),
                paths: changes
                    .files
                    .iter()
                    .map(|c| c.path.display().to_string())
                    .collect(),
            },
        )?;
        let mut output = ToolOutput::ok(String::new());
        let mut failed = Vec::new();
        for change in &writes {
            let given = change.path.display().to_string();
            match view.write(
                &given,
                &change.path,
                change.after.as_deref().unwrap_or_default(),
            ) {
                Ok(()) => output.changed.push(change.path.clone()),
                Err(e) => failed.push(format!("{given}: {e}")),
            }
        }
        let mut removed = Vec::new();
        for change in &removals {
            let given = change.path.display().to_string();
            match view.remove(&given, &change.path) {
                Ok(()) => {
                    output.changed.push(change.path.clone());
                    removed.push(given);
                }
                Err(e) => failed.push(format!("{given}: {e}")),
            }
        }
        let mut text = format!(
            "took {} file(s) from child {} (digest {digest}): {}",
            output.changed.len(),
            input.child,
            output
                .changed
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !removed.is_empty() {
            text.push_str(&format!(
                "\nremoved, as the child did: {}",
                removed.join(", ")
            ));
        }
        if !failed.is_empty() {
            text.push_str(&format!("\nnot written: {}", failed.join("; ")));
            output.is_error = true;
        }
        output.text = text;
        Ok(output)
    }
}
