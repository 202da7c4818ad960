//! The gate: what the host asks before an act leaves.
//!
//! The broker does not know who answers. The agent implements [`Gate`] with its approval broker (the
//! table first, then a human or a reviewer); `chock exec` implements it with a plain table lookup where
//! `ask` has nobody to ask and so refuses. Either way the broker only acts on [`GateAnswer::Allow`].

use std::future::Future;
use std::pin::Pin;

use std::sync::{Arc, RwLock};

use chock_policy::{Action, DecidedBy, Decision, Pattern, Policy, Verdict};

/// A boxed future, so `Gate` can be used as `Arc<dyn Gate>`.
pub type GateFuture<'a> = Pin<Box<dyn Future<Output = GateAnswer> + Send + 'a>>;

/// How far an allow reaches, which decides the address rules (chock-broker's `AddressPolicy`).
///
/// Only a project or org rule that names the host exactly (no wildcard; the rule's pattern equals the
/// action) is [`AllowScope::ExactHost`] ([`scope_of`] decides it). Any wildcard rule, a ratchet row or
/// a shipped default, and an approval of an act such a row put to a question, is
/// [`AllowScope::Pattern`]: it reaches public addresses only, so approving `evil.example` can never
/// reach a service on the operator's own network that the name was pointed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowScope {
    /// Allowed by a wildcard rule or an approval: public addresses only.
    Pattern,
    /// Allowed by a rule naming this host exactly: loopback and the private ranges too.
    ExactHost,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateAnswer {
    /// Go ahead, with the reach of the allow.
    Allow {
        /// How the allow was given.
        scope: AllowScope,
        /// Who decided, for the log ("chock.toml:12 (rule `net.fetch.com.example`)", "approved by user").
        decided_by: String,
    },
    /// Do not; `reason` is shown to the caller and logged.
    Refuse {
        /// Why, in words (includes who decided).
        reason: String,
    },
}

impl GateAnswer {
    /// A refusal with a reason.
    pub fn refuse(reason: impl Into<String>) -> Self {
        Self::Refuse {
            reason: reason.into(),
        }
    }
}

/// What the host asks before an act leaves. `detail` says what exactly would happen ("fetch
/// <https://example.com/a>"), for a person answering.
pub trait Gate: Send + Sync {
    /// Decide `action`. An answer nobody gives must come back as a refusal, never as a wait forever.
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a>;
}

/// Whether a rule pattern names `action` exactly: no wildcard and the same text. Only [`scope_of`]
/// reads this: whether a row may reach loopback and private addresses also depends on who wrote it.
fn is_exact_rule(pattern: &str, action: &Action) -> bool {
    !pattern
        .split('.')
        .any(|label| label == "*" || label.contains('*'))
        && pattern == action.as_str()
}

/// A gate answering from a fixed list of (pattern, allow?) rows; the first matching row wins and no
/// match refuses. Used by tests and by callers that have already reduced their table to rows.
#[derive(Debug, Clone, Default)]
pub struct RuleGate {
    rows: Vec<(String, bool)>,
}

impl RuleGate {
    /// An empty table: everything is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an allow row (`net.fetch.test.allowed`, or a wildcard `net.fetch.test.*`).
    #[must_use]
    pub fn allow(mut self, pattern: &str) -> Self {
        self.rows.push((pattern.to_owned(), true));
        self
    }

    /// Add a deny row.
    #[must_use]
    pub fn deny(mut self, pattern: &str) -> Self {
        self.rows.push((pattern.to_owned(), false));
        self
    }

    fn answer(&self, action: &Action) -> GateAnswer {
        for (pattern, allow) in &self.rows {
            if pattern_matches(pattern, action) {
                return if *allow {
                    // The caller's rows stand for the operator's own table, as a project row does.
                    let row = Verdict {
                        decision: Decision::Allow,
                        decided_by: DecidedBy::Project {
                            file: "RuleGate".into(),
                            line: 0,
                            pattern: pattern.clone(),
                        },
                    };
                    GateAnswer::Allow {
                        scope: scope_of(&row, action),
                        decided_by: format!("rule `{pattern}`"),
                    }
                } else {
                    GateAnswer::refuse(format!("denied by rule `{pattern}`"))
                };
            }
        }
        GateAnswer::refuse(format!("no rule allows `{action}` and nobody is asked"))
    }
}

/// `a.b.*` matches `a.b` followed by one or more labels; otherwise the texts must be equal.
fn pattern_matches(pattern: &str, action: &Action) -> bool {
    match pattern.strip_suffix(".*") {
        Some(prefix) => action
            .as_str()
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.')),
        None => pattern == "*" || pattern == action.as_str(),
    }
}

impl Gate for RuleGate {
    fn decide<'a>(&'a self, action: &'a Action, _detail: &'a str) -> GateFuture<'a> {
        let answer = self.answer(action);
        Box::pin(async move { answer })
    }
}

/// How far an allow decided by `verdict`'s row reaches, for every door (the table gates, the agent's
/// approval broker, a command's asked connections): [`AllowScope::ExactHost`] only when the row was
/// written by the project (`chock.toml`) or the organisation (the org bundle) and its pattern names
/// `action` exactly. Every other row is [`AllowScope::Pattern`], even one naming the host exactly:
///
/// - a **ratchet** row is the agent's own narrowing (`restrict_self`). Narrowing a wildcard `ask` to
///   an exact `agent_review` is legal, so if it counted, the agent could pick which host an approval
///   reaches loopback and private addresses on;
/// - a **shipped default** is nobody's statement about this operator's network;
/// - no row at all is `ask`, and an approval of it is an approval of a name, nothing more.
///
/// An answer by a person or a reviewer does not widen this: it allows the act, with the reach of the
/// row that put it to them.
pub fn scope_of(verdict: &Verdict, action: &Action) -> AllowScope {
    let pattern = match &verdict.decided_by {
        DecidedBy::Project { pattern, .. } | DecidedBy::Org { pattern, .. } => pattern.as_str(),
        DecidedBy::Ratchet { .. } | DecidedBy::ShippedDefault { .. } | DecidedBy::NoRule => {
            return AllowScope::Pattern;
        }
    };
    if is_exact_rule(pattern, action) {
        AllowScope::ExactHost
    } else {
        AllowScope::Pattern
    }
}

/// The gate of `chock exec` and of anything else with nobody to ask: the policy table alone. `allow`
/// allows; every other decision (`ask`, the reviews, `deny`) refuses, because an approval nobody can
/// answer is a refusal.
#[derive(Debug, Clone)]
pub struct TableGate {
    policy: TablePolicy,
}

/// The table a [`TableGate`] reads: fixed, or the session's live policy whose ratchet may narrow
/// while a command runs (each decision reads it afresh).
#[derive(Debug, Clone)]
enum TablePolicy {
    Fixed(Arc<Policy>),
    Live(Arc<RwLock<Policy>>),
}

impl TableGate {
    /// A gate answering from `policy`.
    pub fn new(policy: Arc<Policy>) -> Self {
        Self {
            policy: TablePolicy::Fixed(policy),
        }
    }

    /// A gate answering from the session's live policy, read at every decision.
    pub fn live(policy: Arc<RwLock<Policy>>) -> Self {
        Self {
            policy: TablePolicy::Live(policy),
        }
    }

    fn verdict(&self, action: &Action) -> Verdict {
        match &self.policy {
            TablePolicy::Fixed(policy) => policy.decide(action),
            // A poisoned lock still holds the last policy written; deciding by it is no wider.
            TablePolicy::Live(policy) => match policy.read() {
                Ok(policy) => policy.decide(action),
                Err(poisoned) => poisoned.into_inner().decide(action),
            },
        }
    }

    /// The answer for `action`, synchronously.
    pub fn answer(&self, action: &Action) -> GateAnswer {
        let verdict = self.verdict(action);
        match verdict.decision {
            Decision::Allow => GateAnswer::Allow {
                scope: scope_of(&verdict, action),
                decided_by: verdict.decided_by.to_string(),
            },
            Decision::Deny => GateAnswer::refuse(format!("denied by {}", verdict.decided_by)),
            other => GateAnswer::refuse(format!(
                "{} says `{}` and nobody can be asked here",
                verdict.decided_by,
                other.as_str()
            )),
        }
    }
}

impl Gate for TableGate {
    fn decide<'a>(&'a self, action: &'a Action, _detail: &'a str) -> GateFuture<'a> {
        let answer = self.answer(action);
        Box::pin(async move { answer })
    }
}

/// Whether any project or org rule allows something under `net.connect.*`: only then does a confined
/// call get the egress proxy (`NetworkPlan::Proxy`). Each connection is still decided on its own; this
/// only spares a call a listener that could never lead anywhere.
pub fn commands_may_connect(policy: &Policy) -> bool {
    a_connect_rule_decides(policy, |decision| decision == Decision::Allow)
}

/// Whether a project or org rule under `net.connect.*` decides as `decides` says. Shipped defaults
/// never count: they would give every call a listener.
pub fn a_connect_rule_decides(policy: &Policy, decides: impl Fn(Decision) -> bool) -> bool {
    let Ok(connect) = Pattern::parse("net.connect.*") else {
        return false;
    };
    policy
        .project_rules()
        .rules()
        .iter()
        .chain(policy.org_rules().rules())
        .any(|rule| decides(rule.decision) && rule.pattern.overlaps(&connect))
}
