//! What decides an act besides the live table: a ruling the caller puts (the policy-file
//! confirmation is always a person's), a harness decision with no row; and the table's decision
//! in the log's words and back.

use crate::{AllowScope, scope_of};
use chock_policy::{Action, Decision, Verdict};
use chock_protocol::log::TableDecision;

/// What the table says of an act, when the caller puts the question on another footing than the
/// live table (the policy-file confirmation of `chock apply --include-policy` is always a person's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruling {
    /// The decision.
    pub decision: Decision,
    /// Which rule said it, in words.
    pub rule: String,
    /// The reach of an allow.
    pub scope: AllowScope,
    /// The policy file the question is about, named in the ask and the answer.
    pub policy_file: Option<String>,
    /// Lines shown with the question (`Question::context`).
    pub context: Vec<String>,
}

impl Ruling {
    /// The ruling of `verdict`'s row for `action`.
    pub fn of(verdict: &Verdict, action: &Action) -> Self {
        Self {
            decision: verdict.decision,
            rule: verdict.decided_by.to_string(),
            scope: scope_of(verdict, action),
            policy_file: None,
            context: Vec::new(),
        }
    }
}

/// A decision the harness makes with no table row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Harness {
    /// The act grants no capability (a plan, a title): it goes ahead.
    Allow {
        /// Why no row is needed.
        why: String,
    },
    /// The input names no act, or the act cannot be carried out.
    Refuse {
        /// Why, in words for the log.
        why: String,
    },
}

/// The table's decision as the log writes it.
pub fn table_decision(decision: Decision) -> TableDecision {
    match decision {
        Decision::Allow => TableDecision::Allow,
        Decision::Deny => TableDecision::Deny,
        Decision::Ask => TableDecision::Ask,
        Decision::AgentReview => TableDecision::AgentReview,
        Decision::AgentThenHuman => TableDecision::AgentThenHuman,
    }
}

/// The table decision a log or a client names, as the policy's.
pub fn policy_decision(decision: TableDecision) -> Decision {
    match decision {
        TableDecision::Allow => Decision::Allow,
        TableDecision::Deny => Decision::Deny,
        TableDecision::Ask => Decision::Ask,
        TableDecision::AgentReview => Decision::AgentReview,
        TableDecision::AgentThenHuman => Decision::AgentThenHuman,
    }
}
