//! `chock sessions replay`: every act a session's log recorded, judged again by another table.
//!
//! An act is what one decision settled: a `decision` event, a `net.decision` at stage `gate`, or an
//! `approval.ask` naming an action. Several events of one tool call can record the same act (a
//! question, its answer, then the decision; a `fetch_url`'s decision and the broker's gate), so the
//! events of a call are folded into one act per action (see [`collect`]). The agent's narrowings
//! (`note` events about the ratchet) are replayed in order on top of the new table, so each act is
//! judged under the table as it stood when the act was decided.
//!
//! This module only reads events and asks a [`Policy`]: loading the table and printing are the
//! command's (`replay_cmd.rs`).

use chock_log::{Event, EventKind};
use chock_policy::{Action, Decision, Policy};
use chock_protocol::log::{AnswerKind, NetVerdict, RatchetChange, TableDecision};
use serde::Serialize;

use super::replay_fold::{Gathered, Pending, collect};

/// Which event holds what the log recorded of an act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedFrom {
    /// A `decision` event.
    Decision,
    /// An `approval.ask` (with its answer, or the broker's gate after it).
    Approval,
    /// A `net.decision` at stage `gate` with no question logged before it.
    NetGate,
}

/// What the log recorded of an act.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// What the table said (`None`: the question was logged without it).
    pub decision: Option<TableDecision>,
    /// The table's answer was inferred from the outcome: the broker's gate let the connection
    /// through (`allow`) or refused it (`deny`) and no question was logged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// Whether the act went ahead (`None`: the log holds no answer to its question).
    pub allowed: Option<bool>,
    /// What decided it, in the log's words.
    pub decided_by: Option<String>,
    /// Which event this was read from.
    pub from: RecordedFrom,
}

/// What the new table decides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replayed {
    /// The decision.
    pub decision: TableDecision,
    /// The rule, default or ratchet entry that decided it.
    pub decided_by: String,
}

/// How a replayed decision differs from the recorded one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Refused then, allowed by the new table outright.
    NowAllowed,
    /// Went ahead then, denied by the new table.
    NowRefused,
    /// The new table puts it to a person or a reviewer (and the old one did not, or another).
    NowAsked,
    /// Decided differently with the same outcome (asked and allowed then, allowed now; asked and
    /// refused then, denied now).
    Otherwise,
}

/// The replay's verdict on one act.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "judged", rename_all = "snake_case")]
pub enum Judgement {
    /// The new table decides as the recorded one did.
    Same {
        /// Its answer.
        replayed: Replayed,
    },
    /// The new table decides otherwise.
    Differs {
        /// Its answer.
        replayed: Replayed,
        /// How.
        change: Change,
    },
    /// Recorded with no action and refused: the input could not be classified.
    Unclassified,
    /// Recorded with no action and allowed: the call grants no capability (a plan, a title, a
    /// narrowing).
    NoCapability,
    /// The recorded action is not an action name this build can read.
    NotAnAction {
        /// Why.
        reason: String,
    },
}

/// One act and its replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActLine {
    /// The seq of the event holding the recorded decision.
    pub seq: u64,
    /// The tool call it belongs to.
    pub call_id: Option<String>,
    /// The act (`None`: recorded without one).
    pub action: Option<String>,
    /// What the log says.
    pub recorded: Recorded,
    /// What the new table says.
    #[serde(flatten)]
    pub judgement: Judgement,
}

/// One change to the ratchet, replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatchetLine {
    /// The note's seq.
    pub seq: u64,
    /// The call that made it.
    pub call_id: Option<String>,
    /// Restrict or widen.
    pub change: RatchetChange,
    /// The pattern.
    pub pattern: String,
    /// The decision it carries.
    pub decision: String,
    /// Why it could not be applied to the new table's ratchet (`None`: applied).
    pub error: Option<String>,
}

/// An event of a kind replay reads whose data does not fit its type: the act or narrowing it may
/// record cannot be judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnreadableLine {
    /// The event's seq.
    pub seq: u64,
    /// Its call.
    pub call_id: Option<String>,
    /// Its kind.
    pub kind: EventKind,
    /// Why it does not fit.
    pub reason: String,
}

/// One line of a replay, in log order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum Step {
    /// An act.
    Act(ActLine),
    /// A ratchet change.
    Ratchet(RatchetLine),
    /// An event that could not be read.
    Unreadable(UnreadableLine),
}

/// The counts of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Acts listed.
    pub acts: usize,
    /// Acts the new table decides otherwise.
    pub differ: usize,
    /// Of those: refused then, allowed now.
    pub now_allowed: usize,
    /// Allowed then, denied now.
    pub now_refused: usize,
    /// Put to a question now.
    pub now_asked: usize,
    /// Decided differently with the same outcome.
    pub otherwise: usize,
    /// Acts recorded with no action and refused (the input could not be classified).
    pub unclassified: usize,
    /// Acts recorded with no action and allowed (granting no capability).
    pub no_capability: usize,
    /// Acts whose action this build cannot read.
    pub not_an_action: usize,
    /// Events that do not fit their type.
    pub unreadable: usize,
    /// Ratchet changes that could not be applied.
    pub ratchet_errors: usize,
}

impl Counts {
    /// Whether every act was judged and none differs.
    pub fn all_same(&self) -> bool {
        self.differ == 0
            && self.not_an_action == 0
            && self.unreadable == 0
            && self.ratchet_errors == 0
    }
}

pub use chock_decide::table_decision;

fn allowed_by(answer: AnswerKind) -> Option<bool> {
    match answer {
        AnswerKind::AllowOnce | AnswerKind::AllowSession => Some(true),
        AnswerKind::Deny | AnswerKind::None => Some(false),
        AnswerKind::Reply => None,
    }
}

/// The seq and the record of a gathered act.
fn recorded(g: &Gathered) -> (u64, Recorded) {
    if let Some((seq, d)) = &g.decision {
        return (
            *seq,
            Recorded {
                decision: Some(d.decision),
                inferred: false,
                allowed: Some(d.allowed),
                decided_by: Some(d.decided_by.clone()),
                from: RecordedFrom::Decision,
            },
        );
    }
    let gate_allowed = g.gate.as_ref().map(|(_, v, _)| *v == NetVerdict::Allow);
    if let Some((ask_seq, ask)) = &g.ask {
        let seq = g.gate.as_ref().map_or(*ask_seq, |(seq, _, _)| *seq);
        return (
            seq,
            Recorded {
                decision: ask.decision,
                inferred: false,
                allowed: gate_allowed.or_else(|| g.answer.and_then(allowed_by)),
                decided_by: ask.decided_by.clone(),
                from: RecordedFrom::Approval,
            },
        );
    }
    let (seq, verdict, by) = g
        .gate
        .clone()
        .unwrap_or((g.first_seq, NetVerdict::Refuse, None));
    let allowed = verdict == NetVerdict::Allow;
    (
        seq,
        Recorded {
            decision: Some(if allowed {
                TableDecision::Allow
            } else {
                TableDecision::Deny
            }),
            inferred: true,
            allowed: Some(allowed),
            decided_by: by,
            from: RecordedFrom::NetGate,
        },
    )
}

fn is_question(d: TableDecision) -> bool {
    !matches!(d, TableDecision::Allow | TableDecision::Deny)
}

/// Judges one act under `policy`.
fn judge(action: Option<&str>, recorded: &Recorded, policy: &Policy) -> Judgement {
    let Some(name) = action else {
        return if recorded.allowed == Some(false) {
            Judgement::Unclassified
        } else {
            Judgement::NoCapability
        };
    };
    let action = match Action::parse(name) {
        Ok(action) => action,
        Err(err) => {
            return Judgement::NotAnAction {
                reason: err.to_string(),
            };
        }
    };
    let verdict = policy.decide(&action);
    let replayed = Replayed {
        decision: table_decision(verdict.decision),
        decided_by: verdict.decided_by.to_string(),
    };
    let now = replayed.decision;
    let differs = match recorded.decision {
        Some(then) => then != now,
        // Only the outcome is known: a difference only where the outcome surely changes.
        None => match now {
            TableDecision::Allow => recorded.allowed == Some(false),
            TableDecision::Deny => recorded.allowed == Some(true),
            _ => false,
        },
    };
    if !differs {
        return Judgement::Same { replayed };
    }
    let change = match now {
        TableDecision::Allow if recorded.allowed == Some(false) => Change::NowAllowed,
        TableDecision::Deny if recorded.allowed == Some(true) => Change::NowRefused,
        d if is_question(d) => Change::NowAsked,
        _ => Change::Otherwise,
    };
    Judgement::Differs { replayed, change }
}

/// Applies one recorded ratchet change to `policy` as the session did: a restriction narrows; a
/// widening removes the narrowings inside the pattern and then, unless it carries `allow`,
/// restricts the pattern to its decision.
fn apply_ratchet(line: &RatchetLine, policy: &mut Policy) -> Result<(), String> {
    let decision = Decision::from_name(&line.decision)
        .ok_or_else(|| format!("`{}` is not a decision", line.decision))?;
    match line.change {
        RatchetChange::Restrict => policy.restrict(&line.pattern, decision),
        RatchetChange::Widen => policy.widen(&line.pattern).and_then(|_| {
            if decision == Decision::Allow {
                Ok(())
            } else {
                policy.restrict(&line.pattern, decision)
            }
        }),
    }
    .map_err(|e| e.to_string())
}

/// Replays `events` with `base` as the table: every act judged, in log order, with the session's
/// ratchet changes applied as they came.
pub fn replay(events: &[Event], mut base: Policy) -> (Vec<Step>, Counts) {
    let mut counts = Counts::default();
    let mut steps = Vec::new();
    for pending in collect(events) {
        match pending {
            Pending::Ratchet(mut line) => {
                line.error = apply_ratchet(&line, &mut base).err();
                if line.error.is_some() {
                    counts.ratchet_errors += 1;
                }
                steps.push(Step::Ratchet(line));
            }
            Pending::Unreadable(line) => {
                counts.unreadable += 1;
                steps.push(Step::Unreadable(line));
            }
            Pending::Act(g) => {
                let g = *g;
                let (seq, recorded) = recorded(&g);
                let judgement = judge(g.action.as_deref(), &recorded, &base);
                counts.acts += 1;
                match &judgement {
                    Judgement::Same { .. } => {}
                    Judgement::Differs { change, .. } => {
                        counts.differ += 1;
                        match change {
                            Change::NowAllowed => counts.now_allowed += 1,
                            Change::NowRefused => counts.now_refused += 1,
                            Change::NowAsked => counts.now_asked += 1,
                            Change::Otherwise => counts.otherwise += 1,
                        }
                    }
                    Judgement::Unclassified => counts.unclassified += 1,
                    Judgement::NoCapability => counts.no_capability += 1,
                    Judgement::NotAnAction { .. } => counts.not_an_action += 1,
                }
                steps.push(Step::Act(ActLine {
                    seq,
                    call_id: g.call_id,
                    action: g.action,
                    recorded,
                    judgement,
                }));
            }
        }
    }
    (steps, counts)
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
