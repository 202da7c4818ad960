//! What the pipeline settled about one act: typed, so every caller branches on the outcome and
//! every text (the log's `decided_by`, the model's refusal) is derived from it, never the reverse.

use crate::AllowScope;
use chock_policy::Decision;
use serde::Serialize;

use crate::broker::{Nobody, Role};

/// Who let an act go ahead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum AllowedBy {
    /// The table's row says `allow`.
    Table,
    /// A person answered yes.
    Person {
        /// The answerer (`terminal`, a client's name).
        name: String,
    },
    /// A reviewer model answered yes.
    Reviewer {
        /// The reviewer (`reviewer:<model>`).
        name: String,
        /// Its reasons.
        reasons: String,
    },
    /// A person's earlier "yes for this session" to this exact act.
    SessionAllow,
    /// The harness, with no table row: the act grants no capability (a plan, a title).
    Harness {
        /// Why no row is needed.
        why: String,
    },
}

/// Who refused an act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum RefusedBy {
    /// The table's row says `deny`.
    Table,
    /// A person answered no.
    Person {
        /// The answerer.
        name: String,
    },
    /// A reviewer model answered no.
    Reviewer {
        /// The reviewer.
        name: String,
    },
    /// The harness, with no table row: the input could not be named as an act, or the act cannot
    /// be carried out (the policy is unavailable, an apply with no base).
    Harness,
}

/// How one act was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// It goes ahead.
    Allowed {
        /// Who allowed it.
        by: AllowedBy,
        /// How far an allow of a network act reaches ([`crate::scope_of`] of the row).
        scope: AllowScope,
    },
    /// It does not.
    Refused {
        /// Who refused.
        by: RefusedBy,
        /// Why, in words: an answerer's reasons, or the harness's reason (may be empty).
        reason: String,
    },
    /// Nobody answered the question: a refusal.
    Unanswered {
        /// Who was asked.
        asked: Role,
        /// Why nobody answered.
        why: Nobody,
    },
}

/// The settled act: what the table said and what came of it. The `decision` event written for it
/// is [`Settled::decided_by`] and [`Settled::allowed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settled {
    /// The act (`None`: the input could not be named as one).
    pub action: Option<String>,
    /// What the table said (for the harness's own decisions: `allow` or `deny`).
    pub decision: Decision,
    /// Which rule said it, in words (`chock.toml:12 (rule `exec.*`)`), or the harness's reason.
    pub rule: String,
    /// What came of it.
    pub outcome: Outcome,
    /// The question ids asked on the way (reviewer first for `agent_then_human`).
    pub questions: Vec<String>,
}

/// Which summary count an outcome adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Count {
    /// Allowed by the table outright.
    AllowedByTable,
    /// Allowed by a person (or an earlier "yes for this session").
    AllowedByPerson,
    /// Allowed by a reviewer model.
    AllowedByReviewer,
    /// Refused by the table.
    DeniedByTable,
    /// Refused by a person or reviewer.
    DeniedByAnswer,
    /// Refused because nobody answered.
    Unanswered,
}

impl Settled {
    /// Whether the act goes ahead.
    pub fn allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed { .. })
    }

    /// The reach of an allow (`Pattern` for a refusal).
    pub fn scope(&self) -> AllowScope {
        match self.outcome {
            Outcome::Allowed { scope, .. } => scope,
            _ => AllowScope::Pattern,
        }
    }

    /// The summary count this outcome adds to (`None`: the harness's own decisions).
    pub fn count(&self) -> Option<Count> {
        Some(match &self.outcome {
            Outcome::Allowed { by, .. } => match by {
                AllowedBy::Table => Count::AllowedByTable,
                AllowedBy::Person { .. } | AllowedBy::SessionAllow => Count::AllowedByPerson,
                AllowedBy::Reviewer { .. } => Count::AllowedByReviewer,
                AllowedBy::Harness { .. } => return None,
            },
            Outcome::Refused { by, .. } => match by {
                RefusedBy::Table => Count::DeniedByTable,
                RefusedBy::Person { .. } | RefusedBy::Reviewer { .. } => Count::DeniedByAnswer,
                RefusedBy::Harness => return None,
            },
            Outcome::Unanswered { .. } => Count::Unanswered,
        })
    }

    /// Who settled it, in words: the rule for the table and the harness, else the rule, the
    /// table's decision and who answered (`chock.toml:3 (rule `fs.*`): ask; allowed by terminal`).
    pub fn decided_by(&self) -> String {
        let rule = &self.rule;
        let decision = self.decision.as_str();
        match &self.outcome {
            Outcome::Allowed { by, .. } => match by {
                AllowedBy::Table | AllowedBy::Harness { .. } => rule.clone(),
                AllowedBy::Person { name } => format!("{rule}: {decision}; allowed by {name}"),
                AllowedBy::Reviewer { name, reasons } => {
                    format!("{rule}: {decision}; allowed by {name}: {reasons}")
                }
                AllowedBy::SessionAllow => {
                    format!("{rule}: {decision}; allowed for this session earlier")
                }
            },
            Outcome::Refused { by, .. } => match by {
                RefusedBy::Table | RefusedBy::Harness => rule.clone(),
                RefusedBy::Person { name } | RefusedBy::Reviewer { name } => {
                    format!("{rule}: {decision}; refused by {name}")
                }
            },
            Outcome::Unanswered { asked, why } => {
                let who = match asked {
                    Role::Human => "nobody answered",
                    Role::Reviewer => "no reviewer verdict",
                };
                match why {
                    Nobody::TimedOut => format!("{rule}: {decision}; {who} in time"),
                    Nobody::NoAnswerer | Nobody::Dropped => format!("{rule}: {decision}; {who}"),
                }
            }
        }
    }

    /// Who answered, when someone did (for a caller that names the rule itself).
    pub fn answered_by(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Allowed {
                by: AllowedBy::Person { name } | AllowedBy::Reviewer { name, .. },
                ..
            }
            | Outcome::Refused {
                by: RefusedBy::Person { name } | RefusedBy::Reviewer { name },
                ..
            } => Some(name),
            _ => None,
        }
    }

    /// The refusal as the model (or a person on the command line) reads it; `None` when allowed.
    pub fn refusal(&self) -> Option<String> {
        let action = self.action.as_deref().unwrap_or("the act");
        let rule = &self.rule;
        let decision = self.decision.as_str();
        Some(match &self.outcome {
            Outcome::Allowed { .. } => return None,
            Outcome::Refused { by, reason } => match by {
                RefusedBy::Table => format!("refused: {action} is denied by {rule}"),
                RefusedBy::Harness => format!("refused: {reason}"),
                RefusedBy::Person { name } => {
                    format!("refused: {action} was refused by {name} ({rule}: {decision})")
                }
                RefusedBy::Reviewer { .. } => format!(
                    "refused: {action} was refused by the reviewer model ({rule}): {reason}"
                ),
            },
            Outcome::Unanswered { asked, why } => {
                let when = match why {
                    Nobody::TimedOut => " in time",
                    Nobody::NoAnswerer | Nobody::Dropped => "",
                };
                match asked {
                    Role::Human => format!(
                        "refused: {action} needs a person's approval ({rule}: {decision}) and nobody was there to answer{when}"
                    ),
                    Role::Reviewer => format!(
                        "refused: {action} needs a reviewer's verdict ({rule}) and none came{when}"
                    ),
                }
            }
        })
    }
}
