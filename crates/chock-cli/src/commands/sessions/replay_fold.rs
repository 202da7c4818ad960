//! Reading a log into acts for `replay.rs`: which events record one act, folded together.

use chock_log::{Event, EventData, EventKind, PayloadError};
use chock_protocol::log::{AnswerKind, ApprovalAsk, NetDecision, NetVerdict, Note};

use super::replay::{RatchetLine, UnreadableLine};

/// The events of one act, gathered while reading the log.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub(super) first_seq: u64,
    pub(super) call_id: Option<String>,
    pub(super) action: Option<String>,
    pub(super) decision: Option<(u64, chock_protocol::log::Decision)>,
    pub(super) ask: Option<(u64, ApprovalAsk)>,
    pub(super) answer: Option<AnswerKind>,
    pub(super) gate: Option<(u64, NetVerdict, Option<String>)>,
}

/// One thing `collect` found (an act is boxed: it is much the largest).
pub(super) enum Pending {
    Act(Box<Gathered>),
    Ratchet(RatchetLine),
    Unreadable(UnreadableLine),
}

/// The acts, ratchet changes and unreadable events of a log, in the order they first appear.
///
/// Folding: within one tool call (events with the same `call_id`) and one action, an
/// `approval.ask` opens an act, a second ask (a reviewer, then a person) joins it, the answer
/// joins it, the `decision` joins it, and a `net.decision` gate joins the act that has no gate
/// yet. Events with no call id are never folded into each other (the command line's own acts,
/// `chock apply` and its policy-file confirmation, are separate acts), except an answer, which
/// joins the question before it.
pub(super) fn collect(events: &[Event]) -> Vec<Pending> {
    let mut out = Vec::new();
    for event in events {
        if !matches!(
            event.kind,
            EventKind::Decision
                | EventKind::NetDecision
                | EventKind::ApprovalAsk
                | EventKind::ApprovalAnswer
                | EventKind::Note
        ) {
            continue;
        }
        let call_id = event.call_id.clone();
        let payload = match event.payload() {
            Ok(payload) => payload,
            Err(err) => {
                out.push(Pending::Unreadable(UnreadableLine {
                    seq: event.seq,
                    call_id,
                    kind: event.kind,
                    reason: shape_reason(&err),
                }));
                continue;
            }
        };
        let call = event.call_id.as_deref();
        match payload {
            EventData::Decision(d) => {
                let open = match d.action.as_deref() {
                    Some(action) => find_open(&mut out, call, action, |g| {
                        g.decision.is_none() && g.gate.is_none()
                    }),
                    None => None,
                };
                match open {
                    Some(g) => g.decision = Some((event.seq, d)),
                    None => out.push(Pending::Act(Box::new(Gathered {
                        first_seq: event.seq,
                        call_id,
                        action: d.action.clone(),
                        decision: Some((event.seq, d)),
                        ..Gathered::default()
                    }))),
                }
            }
            EventData::NetDecision(NetDecision::Gate {
                action,
                decision,
                decided_by,
                reason,
                ..
            }) => {
                let gate = (event.seq, decision, decided_by.or(reason));
                match find_open(&mut out, call, &action, |g| g.gate.is_none()) {
                    Some(g) => g.gate = Some(gate),
                    None => out.push(Pending::Act(Box::new(Gathered {
                        first_seq: event.seq,
                        call_id,
                        action: Some(action),
                        gate: Some(gate),
                        ..Gathered::default()
                    }))),
                }
            }
            EventData::ApprovalAsk(ask) => {
                // The agent's free question to the person names no action: no act.
                let Some(action) = ask.action.clone() else {
                    continue;
                };
                let open = find_open(&mut out, call, &action, |g| {
                    g.decision.is_none() && g.gate.is_none()
                });
                match open {
                    // A second question of the same act (the person after the reviewer).
                    Some(g) => {
                        g.ask = Some((event.seq, ask));
                        g.answer = None;
                    }
                    None => out.push(Pending::Act(Box::new(Gathered {
                        first_seq: event.seq,
                        call_id,
                        action: Some(action),
                        ask: Some((event.seq, ask)),
                        ..Gathered::default()
                    }))),
                }
            }
            EventData::ApprovalAnswer(answer) => {
                let target = out.iter_mut().rev().find_map(|p| match p {
                    Pending::Act(g)
                        if g.call_id.as_deref() == call
                            && g.answer.is_none()
                            && g.ask.as_ref().is_some_and(|(_, ask)| {
                                match (&answer.question, &ask.question) {
                                    (Some(a), Some(q)) => a == q,
                                    _ => answer.action.is_none() || answer.action == ask.action,
                                }
                            }) =>
                    {
                        Some(g)
                    }
                    _ => None,
                });
                if let Some(g) = target {
                    g.answer = Some(answer.answer);
                }
            }
            EventData::Note(Note::Ratchet {
                change,
                pattern,
                decision,
                ..
            }) => out.push(Pending::Ratchet(RatchetLine {
                seq: event.seq,
                call_id,
                change,
                pattern,
                decision,
                error: None,
            })),
            _ => {}
        }
    }
    out
}

/// The latest act of call `call` (never one without a call id) for `action` that `open` accepts.
fn find_open<'a>(
    pending: &'a mut [Pending],
    call: Option<&str>,
    action: &str,
    open: impl Fn(&Gathered) -> bool,
) -> Option<&'a mut Gathered> {
    let call = call?;
    pending.iter_mut().rev().find_map(|p| match p {
        Pending::Act(g)
            if g.call_id.as_deref() == Some(call) && g.action.as_deref() == Some(action) =>
        {
            open(g).then_some(&mut **g)
        }
        _ => None,
    })
}

fn shape_reason(err: &PayloadError) -> String {
    match err {
        PayloadError::Shape { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}
