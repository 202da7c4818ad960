//! The host side of one agent session: the chock-session `Session` (policy, log, workspace, the
//! confined call), the host's view of the workspace for the file tools, and the reviewed apply.

use std::path::Path;
use std::sync::Arc;

use chock_log::{EventKind, LogError};
use chock_policy::Action;
use chock_session::Session;
use chock_workspace::{Backing, Selection};
use serde_json::json;

use crate::gate::{Decider, Settled};
use crate::tools::ToolOutput;
use crate::view::WorkspaceView;

/// One session, as the agent's tools reach it.
#[derive(Debug)]
pub struct Host {
    session: Arc<Session>,
    view: WorkspaceView,
    network: chock_broker::BrokerConfig,
}

impl Host {
    /// Wraps an open session.
    pub fn new(session: Session) -> Self {
        let view = WorkspaceView::from_mount(session.project(), &session.workspace().mount());
        Self {
            session: Arc::new(session),
            view,
            network: chock_broker::BrokerConfig::default(),
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
            let _ = self.session.log().append(
                EventKind::Note,
                None,
                json!({ "checkpoint": label, "failed": err.to_string() }),
            );
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
            decider.log_decision(call_id, Some(&action), &settled)?;
            return refuse(settled.refusal);
        }
        let plan = match workspace.plan_apply(&Selection::default()) {
            Ok(plan) => plan,
            Err(err) => {
                let settled = Settled {
                    allowed: false,
                    decision: chock_policy::Decision::Deny,
                    decided_by: format!("the apply cannot be planned: {err}"),
                    exact_rule: false,
                    refusal: format!("refused: the apply cannot be planned: {err}"),
                };
                decider.log_decision(call_id, Some(&action), &settled)?;
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
            decider.log_decision(call_id, Some(&action), &settled)?;
            return Ok(ToolOutput::ok(
                "nothing to apply: the project already holds every change".into(),
            ));
        }
        let paths: Vec<String> = plan.ops.iter().map(|op| op.path.clone()).collect();
        let detail = format!(
            "apply the session's changes to {} ({} path(s): {}); the agent says: {reason}",
            self.project().display(),
            paths.len(),
            paths.join(", ")
        );
        let settled = decider.settle(Some(call_id), &action, &detail).await?;
        decider.log_decision(call_id, Some(&action), &settled)?;
        if !settled.allowed {
            return refuse(format!(
                "{}; the work stays in the session for review (chock diff {})",
                settled.refusal,
                workspace.session()
            ));
        }
        log.append(EventKind::WorkspaceApply, Some(call_id), plan.event())?;
        let id = plan.apply_id.clone();
        match plan.commit() {
            Ok(_) => Ok(ToolOutput::ok(format!(
                "applied as {id}: {} (the person can revert it with `chock undo {id}`)",
                paths.join(", ")
            ))
            .with_changed(Path::new("."))),
            Err(err) => {
                log.append(
                    EventKind::Note,
                    Some(call_id),
                    json!({ "workspace.apply": id, "failed": err.to_string() }),
                )?;
                refuse(format!(
                    "the apply failed and nothing was half-written: {err}"
                ))
            }
        }
    }
}
