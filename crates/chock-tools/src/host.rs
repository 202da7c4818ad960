//! The host side of one agent session: the chock-session `Session` (policy, log, workspace, the
//! confined call), the host's view of the workspace for the file tools, and the reviewed apply.

use std::path::Path;
use std::sync::Arc;

use chock_log::LogError;
use chock_policy::Action;
use chock_protocol::log::Note;
use chock_session::Session;
use chock_workspace::{Backing, Selection};

use crate::ToolOutput;
use crate::gate::{Decider, Settled};
use crate::view::WorkspaceView;
use chock_protocol::text;

/// One session, as the agent's tools reach it.
#[derive(Debug)]
pub struct Host {
    session: Arc<Session>,
    view: WorkspaceView,
    network: chock_broker::BrokerConfig,
    /// Where the project's notes are kept (None: under Chock's data directory).
    memory_root: Option<std::path::PathBuf>,
}

impl Host {
    /// Wraps an open session.
    pub fn new(session: Session) -> Self {
        let view = WorkspaceView::from_mount(session.project(), &session.workspace().mount());
        Self {
            session: Arc::new(session),
            view,
            network: chock_broker::BrokerConfig::default(),
            memory_root: None,
        }
    }

    /// Keeps the project's notes under `root` instead of Chock's data directory (tests).
    #[must_use]
    pub fn with_memory_root(mut self, root: Option<std::path::PathBuf>) -> Self {
        self.memory_root = root;
        self
    }

    /// The notes of this session's project (docs/memory.md).
    pub fn memory(&self) -> Result<crate::memory::MemoryStore, crate::memory::MemoryError> {
        match &self.memory_root {
            Some(root) => crate::memory::MemoryStore::under(root, self.session.project()),
            None => crate::memory::MemoryStore::for_project(self.session.project()),
        }
    }

    /// Sets how fetch_url and web_search reach the network (nameservers, limits, search backend).
    #[must_use]
    pub fn with_network(mut self, network: chock_broker::BrokerConfig) -> Self {
        self.network = network;
        self
    }

    /// How fetch_url and web_search reach the network.
    pub fn network(&self) -> &chock_broker::BrokerConfig {
        &self.network
    }

    /// The session (its log, policy, workspace, and the confined call).
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The workspace as the file tools see it.
    pub fn view(&self) -> &WorkspaceView {
        &self.view
    }

    /// The real project.
    pub fn project(&self) -> &Path {
        self.session.project()
    }

    /// Records the workspace's state (git backing: a commit on `refs/chock/<session>`). A failure is
    /// noted in the log and does not stop the session: the overlay itself still holds the work.
    pub fn checkpoint(&self, label: &str) {
        if let Err(err) = self.session.workspace().checkpoint(label) {
            let _ = self.session.log().record(
                None,
                Note::CheckpointFailed {
                    checkpoint: label.to_string(),
                    failed: err.to_string(),
                },
            );
        }
    }

    /// Waits until every turn record is durable (they are synced off the turns' path): a session's
    /// end calls it before `session.end`. A failure is noted in the log.
    pub fn flush_turns(&self) {
        if let Err(err) = self.session.workspace().flush_turns() {
            let _ = self.session.log().record(
                None,
                Note::CheckpointFailed {
                    checkpoint: "turn records".to_string(),
                    failed: err.to_string(),
                },
            );
        }
    }

    /// Records the workspace at the end of completed turn `turn` (what a fork at that turn starts
    /// from, docs/forks.md), and snapshots the session's microVM guest when its policy asks
    /// (docs/microvm.md) and returns what `turn.end` says of it; a failure is noted in the log
    /// (the turn stands, a fork at it is refused).
    pub fn record_turn(&self, turn: u32) -> Option<chock_protocol::log::TurnState> {
        // With `[sandbox] snapshots`, the warm microVM guest too: a fork at this turn starts its
        // guest from it. One that fails is noted; the turn stands and such a fork boots cold.
        if let Err(err) = self.session.snapshot_guest(turn) {
            let _ = self.session.log().record(
                None,
                Note::CheckpointFailed {
                    checkpoint: format!("the guest's snapshot at turn {turn}"),
                    failed: err.to_string(),
                },
            );
        }
        match self.session.workspace().record_turn(turn) {
            Ok(state) => Some(chock_protocol::log::TurnState {
                digest: state.digest,
                paths: state.paths,
                commit: state.commit,
            }),
            Err(err) => {
                let _ = self.session.log().record(
                    None,
                    Note::CheckpointFailed {
                        checkpoint: format!("turn {turn}"),
                        failed: err.to_string(),
                    },
                );
                None
            }
        }
    }

    /// `request_action {"action": "workspace.apply"}`: decided at `workspace.apply` by the table or a
    /// person; if allowed, every change of the session is applied (checked against the project, nothing
    /// half-written) and recorded as a `workspace.apply` event before the files are written.
    pub async fn request_apply(
        &self,
        call_id: &str,
        decider: &Decider,
        reason: &str,
    ) -> Result<ToolOutput, LogError> {
        let log = self.session.log();
        let refuse = |text: String| -> Result<ToolOutput, LogError> { Ok(ToolOutput::error(text)) };
        let Ok(action) = Action::parse("workspace.apply") else {
            return refuse("internal: cannot name workspace.apply".into());
        };
        let workspace = self.session.workspace();
        if !matches!(workspace.backing(), Backing::Git { .. }) {
            let settled = Settled {
                allowed: false,
                decision: chock_policy::Decision::Deny,
                decided_by: "an overlay workspace has no base to apply against".into(),
                exact_rule: false,
                refusal: format!(
                    "refused: this project has no git, so its work cannot be applied; the person can copy it aside with `chock workspace adopt {}`",
                    workspace.session()
                ),
            };
            decider.decide_without_table(call_id, Some(&action), &settled)?;
            return refuse(settled.refusal);
        }
        // Never with a change to Chock's own policy: planning refuses one that is not named, and
        // the agent cannot name one (only the person can, with `chock apply --include-policy`).
        let plan = match workspace.plan_apply(&Selection::default()) {
            Ok(plan) => plan,
            Err(chock_workspace::WorkspaceError::ConfiguresChock { paths, .. }) => {
                let paths: Vec<String> = paths.iter().map(|p| text::line(p).to_string()).collect();
                let settled = Settled {
                    allowed: false,
                    decision: chock_policy::Decision::Deny,
                    decided_by: format!(
                        "the changes include Chock's own policy ({}), which only the person can apply",
                        paths.join(", ")
                    ),
                    exact_rule: false,
                    refusal: format!(
                        "refused, nothing was applied: your changes include {}, Chock's own policy for the next session; an in-session apply never writes it. The person can review it with `chock diff {}` and take it with `chock apply --include-policy`; say in your final message why it should change",
                        paths.join(", "),
                        workspace.session()
                    ),
                };
                decider.decide_without_table(call_id, Some(&action), &settled)?;
                return refuse(settled.refusal);
            }
            Err(err) => {
                let settled = Settled {
                    allowed: false,
                    decision: chock_policy::Decision::Deny,
                    decided_by: format!("the apply cannot be planned: {err}"),
                    exact_rule: false,
                    refusal: format!("refused: the apply cannot be planned: {err}"),
                };
                decider.decide_without_table(call_id, Some(&action), &settled)?;
                return refuse(settled.refusal);
            }
        };
        if plan.is_empty() {
            let settled = Settled {
                allowed: false,
                decision: chock_policy::Decision::Allow,
                decided_by: "nothing to apply".into(),
                exact_rule: false,
                refusal: String::new(),
            };
            decider.decide_without_table(call_id, Some(&action), &settled)?;
            return Ok(ToolOutput::ok(
                "nothing to apply: the project already holds every change".into(),
            ));
        }
        let Some(digest) = plan.digest().map(str::to_string) else {
            return refuse("internal: the apply plan has no digest".into());
        };
        let detail = apply_detail(self.project(), &digest, &plan.summary(), reason);
        // The pipeline logs the question, its answer and the decision before it returns.
        let settled = decider.settle(Some(call_id), &action, &detail).await?;
        if !settled.allowed {
            return refuse(format!(
                "{}; the work stays in the session for review (chock diff {})",
                settled.refusal,
                workspace.session()
            ));
        }
        // What lands is what was shown: planned again from the workspace as it is now, pinned to the
        // digest in the question. A command still running in the sandbox may have changed the
        // workspace while the answer was awaited; then nothing is written.
        let plan = match workspace.plan_apply_expecting(&Selection::default(), Some(&digest)) {
            Ok(plan) => plan,
            Err(err) => {
                let changed = matches!(err, chock_workspace::WorkspaceError::DigestMismatch { .. });
                log.record(
                    Some(call_id),
                    Note::ApplyFailed {
                        apply_id: None,
                        digest: Some(digest.clone()),
                        failed: err.to_string(),
                    },
                )?;
                return refuse(if changed {
                    format!(
                        "refused: the workspace changed while you waited for the answer, so what was approved (digest {digest}) is no longer what would land; nothing was applied. Let running commands finish, then ask again"
                    )
                } else {
                    format!(
                        "refused: the apply cannot be planned after the approval: {err}; nothing was applied"
                    )
                });
            }
        };
        let paths: Vec<String> = plan.ops.iter().map(|op| op.path.clone()).collect();
        log.record(Some(call_id), plan.event())?;
        let id = plan.apply_id.clone();
        match plan.commit() {
            Ok(_) => Ok(ToolOutput::ok(format!(
                "applied as {id}: {} (the person can revert it with `chock undo {id}`)",
                paths.join(", ")
            ))
            .with_changed(Path::new("."))),
            Err(err) => {
                log.record(
                    Some(call_id),
                    Note::ApplyFailed {
                        apply_id: Some(id.clone()),
                        digest: None,
                        failed: err.to_string(),
                    },
                )?;
                refuse(format!(
                    "the apply failed and nothing was half-written: {err}"
                ))
            }
        }
    }
}

/// The approval text of an apply: the project, the digest and the per-path `--stat` summary of
/// exactly what would be written, and the agent's reason, on one line with control characters and
/// bidi overrides escaped (a path or a reason cannot forge a line of the prompt or hide a path). The
/// digest makes the text name one act: a "yes for this session" covers that digest only.
fn apply_detail(project: &Path, digest: &str, summary: &str, reason: &str) -> String {
    let lines: Vec<String> = summary
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| text::line(l).to_string())
        .collect();
    format!(
        "apply the session's changes to {} — digest {digest} — exactly: {}; the agent says: {}",
        text::line(project.display()),
        lines.join(" ; "),
        text::line(reason)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apply_question_names_digest_and_paths_and_escapes_what_could_forge_it() {
        let digest = "ab".repeat(32);
        let summary = " f1 A evil\x1b[2Kname.txt | 1 +\n f2 M b.txt    | 2 +-\n 2 files changed, 2 insertions(+), 1 deletion(-)\n";
        let text = apply_detail(
            Path::new("/p"),
            &digest,
            summary,
            "done\nchock: approval needed for nothing \u{202e}",
        );
        assert!(text.contains(&digest), "{text}");
        assert!(text.contains("b.txt    | 2 +-"), "{text}");
        assert!(text.contains("evil\\u{1b}[2Kname.txt"), "{text}");
        assert!(text.contains("2 files changed"), "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{text}"
        );
    }
}
