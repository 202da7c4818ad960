//! Asking before an act the table did not simply allow. The caller supplies the answerer (the
//! agent's approval broker, a terminal prompt); nobody answering is a refusal (rule 3).

use chock_policy::Decision;

/// What is being asked.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub call_id: String,
    /// The action name (`exec.system.rm`).
    pub action: String,
    /// The table's answer: `ask`, `agent_review` or `agent_then_human`.
    pub decision: Decision,
    /// What decided it, in words ("chock.toml:12 (rule `exec.*`)").
    pub decided_by: String,
    /// The command.
    pub argv: Vec<String>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead; `by` names who answered ("terminal", "reviewer model", ...).
    Approved { by: String },
    /// No; `reason` is kept in the log.
    Refused { by: String, reason: String },
    /// Nobody answered (no terminal, a timeout): a refusal.
    NoAnswer,
}

/// Answers approval requests.
pub trait Approver: Send + Sync {
    fn approve(&self, request: &ApprovalRequest) -> Approval;

    /// Told how a call was settled once its decision (and any approval exchange) is in the log and
    /// before anything runs: `allowed` is whether it will run, `by` who settled it (the rule, or who
    /// answered). A caller that streams events (`chock run --json`) shows them in log order with it.
    fn settled(&self, call_id: &str, action: &str, decision: Decision, allowed: bool, by: &str) {
        let _ = (call_id, action, decision, allowed, by);
    }
}

/// Nobody to ask: every question is a refusal. `chock exec` without a terminal uses this.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

impl Approver for NoApprover {
    fn approve(&self, _request: &ApprovalRequest) -> Approval {
        Approval::NoAnswer
    }
}
