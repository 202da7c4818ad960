//! Taking up a session that another process was running (`chock detach`, the daemon's adopt).
//!
//! The new owner opens the session as a resume does (the policy read first, then the log — whose
//! lock the old owner let go of, or lost by dying — and the workspace, rebuilt over the layout on
//! disk), writes `session.handover` naming both processes, and goes on with the task at its next
//! turn ([`SessionRuntime::carry_on`]). What the old owner left half done is read from the log
//! ([`crate::agent::Carried`]): a call it started and never recorded the end of is logged as outcome
//! unknown and is never run again; a person's question still open stays open, under its id, for
//! the new owner's answerers.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use chock_log::{Event, EventKind};
use chock_protocol::EventData;
use chock_protocol::log::{
    AnswerKind, ApprovalAnswer, Asked, HandoverHow, Note, Owner, SessionHandover, ToolResult,
};
use chock_provider::{Block, Role};

use super::background::LeftBackground;
use super::{BuildError, SessionBuilder, SessionRuntime, resume};
use crate::agent::{CallState, Carried, OpenCall};

/// How the reasons of the refusal of a question left open by a dead owner's running call begin.
pub const OWNER_GONE: &str = "owner-gone";

/// Who let go of the session and who takes it up.
#[derive(Debug, Clone)]
pub struct Handover {
    /// The process that wrote the log until now.
    pub from: Owner,
    /// This process.
    pub to: Owner,
    /// How the old owner let go.
    pub how: HandoverHow,
}

impl SessionBuilder {
    /// Takes up the session in `session_dir`, which another process was running and has let go
    /// of (or died): see the module's doc. The runtime returned goes on with the task at its next
    /// turn once [`SessionRuntime::carry_on`] is called; a session whose task had ended waits
    /// for input.
    pub fn adopt(
        self,
        session_dir: &std::path::Path,
        handover: Handover,
    ) -> Result<SessionRuntime, BuildError> {
        let mut r = self.reopen(session_dir)?;
        let rebuilt = resume::rebuild_with(&r.events, false)?;
        let own = chock_log::read_events(session_dir)?;
        let log = r.agent.log().clone();
        let root = session_dir.parent().unwrap_or(session_dir);
        let left = left_open(&own, &rebuilt.messages, root);
        let number = own
            .iter()
            .filter(|e| e.kind == EventKind::SessionHandover)
            .count();
        let (from_pid, to_pid) = (handover.from.pid, handover.to.pid);
        let unknown_text = format!(
            "outcome unknown: this call was running in process {} (the session's owner until \
             it was handed over), which stopped before it recorded how the call ended; it is not \
             run again, so check what it did before relying on it",
            from_pid
        );
        // The background commands the old owner's keeper keeps move with the session: this
        // owner takes the keeper up and follows them. Any other that never recorded its end
        // died with the old owner (it had no keeper), and its end is unknown.
        let background = LeftBackground::take_up(r.agent.toolbox(), &own);
        let unknown: Vec<String> = left
            .calls
            .iter()
            .filter(|c| matches!(c.state, CallState::Unknown(_)))
            .map(|c| c.id.clone())
            .chain(background.lost_handles())
            .collect();
        log.record(
            None,
            SessionHandover {
                number: u32::try_from(number + 1).unwrap_or(u32::MAX),
                from: handover.from,
                to: handover.to,
                how: handover.how,
                unknown: unknown.clone(),
                open_questions: left.questions.iter().map(|q| q.2.clone()).collect(),
            },
        )?;
        // A background command died with the process that ran it, before its end was
        // recorded: its end is unknown, and the model is told so.
        background.record_lost(&log)?;
        let mut carried = left.carried();
        for call in &mut carried.calls {
            if let CallState::Unknown(text) = &mut call.state {
                text.clone_from(&unknown_text);
                log.record(
                    Some(&call.id),
                    ToolResult {
                        tool: call.name.clone(),
                        is_error: true,
                        output: unknown_text.clone(),
                        changed: Vec::new(),
                        shown: Vec::new(),
                    },
                )?;
            }
        }
        // A question asked for a call that was running (its command's connection) can never be
        // used: what asked died with the old owner. Unanswered, it is a refusal; the log says so.
        for (call, action, question) in &left.orphaned {
            log.record(
                Some(call),
                ApprovalAnswer {
                    question: Some(question.clone()),
                    action: Some(action.clone()),
                    answer: AnswerKind::None,
                    by: None,
                    reasons: Some(format!(
                        "{OWNER_GONE}: process {from_pid}, which asked, stopped before the \
                         question was answered, and what asked stopped with it; refused"
                    )),
                    reply: None,
                    policy_file: None,
                },
            )?;
        }
        let orphans_completed = std::mem::take(&mut r.orphans_completed);
        let mut runtime = SessionRuntime::taken_over(r, rebuilt)?;
        super::background::take_up_children(&runtime, &own, &orphans_completed);
        background.follow(runtime.agent.toolbox(), session_dir)?;
        let broker = &runtime.agent.decider().broker;
        for (call, action, question) in &left.questions {
            broker.carry_question(call, action, question);
        }
        // The task goes on when it was under way: the last message is not the model's final
        // answer.
        let finished = matches!(
            runtime.conversation.last(),
            Some(m) if m.role == Role::Assistant
                && !m.content.iter().any(|b| matches!(b, Block::ToolUse { .. }))
        );
        if !finished {
            runtime.carried = Some(carried);
        }
        log.record(
            None,
            Note::Text {
                text: format!(
                    "handed over from process {} to process {}: {} messages rebuilt from the log, {} turns so far",
                    from_pid,
                    to_pid,
                    runtime.conversation.len(),
                    runtime.summary.turns
                ),
            },
        )?;
        Ok(runtime)
    }
}

/// Which of a call's `children` have no `agent.complete` and still run (their log's lock is
/// held): the new owner adopts them.
fn running_children(
    children: Option<&Vec<String>>,
    completed: &HashSet<String>,
    root: &Path,
) -> Option<Vec<String>> {
    let running: Vec<String> = children?
        .iter()
        .filter(|c| !completed.contains(*c))
        .filter(|c| {
            matches!(
                chock_log::is_live(&root.join(c)),
                Ok(chock_log::Liveness::Live { .. })
            )
        })
        .cloned()
        .collect();
    (!running.is_empty()).then_some(running)
}

/// What the log left open, read from this session's own events.
struct Left {
    calls: Vec<OpenCall>,
    turn_open: bool,
    /// (call id, action, question id) of each person's question still open on a call that runs
    /// again.
    questions: Vec<(String, String, String)>,
    /// The same, of each person's question still open on a call that was running (asked after
    /// the call's own decision: a command's connection, `net.connect`): what asked died with the
    /// old owner, so nothing can use an answer; it is settled as refused (owner gone).
    orphaned: Vec<(String, String, String)>,
}

impl Left {
    fn carried(&self) -> Carried {
        Carried {
            calls: self.calls.clone(),
            turn_open: self.turn_open,
        }
    }
}

/// The calls of the model's last reply that have no results after them, and what each gets.
fn left_open(events: &[Event], messages: &[chock_provider::Message], root: &Path) -> Left {
    let mut left = Left {
        calls: Vec::new(),
        turn_open: false,
        questions: Vec::new(),
        orphaned: Vec::new(),
    };
    let Some(last) = messages.last() else {
        return left;
    };
    if last.role != Role::Assistant {
        return left;
    }
    let mut results: HashMap<&str, (String, bool)> = HashMap::new();
    let mut started: HashSet<&str> = HashSet::new();
    let mut asks: HashMap<String, (String, String, String)> = HashMap::new();
    let mut open_turn: Option<u32> = None;
    let mut spawned: HashMap<&str, Vec<String>> = HashMap::new();
    let mut completed: HashSet<String> = HashSet::new();
    for event in events {
        let call = event.call_id.as_deref();
        match event.payload() {
            Ok(EventData::SessionSpawn(spawn)) => {
                if let Some(call) = call {
                    spawned.entry(call).or_default().push(spawn.child);
                }
            }
            Ok(EventData::AgentComplete(done)) => {
                if let Some(child) = done.child {
                    completed.insert(child);
                }
            }
            Ok(EventData::ToolResult(result)) => {
                if let Some(call) = call {
                    results.insert(call, (result.output, result.is_error));
                }
            }
            Ok(EventData::ToolCall(_) | EventData::Decision(_) | EventData::CommandResult(_)) => {
                if let Some(call) = call {
                    started.insert(call);
                }
            }
            Ok(EventData::ApprovalAsk(ask)) => {
                if let (Some(call), Some(question), Some(action), Asked::Person) =
                    (call, ask.question, ask.action, ask.asked)
                {
                    asks.insert(question.clone(), (call.to_string(), action, question));
                }
            }
            Ok(EventData::ApprovalAnswer(answer)) => {
                if let Some(question) = answer.question {
                    asks.remove(&question);
                }
            }
            Ok(EventData::TurnStart(start)) => open_turn = Some(start.turn),
            Ok(EventData::TurnEnd(end)) if open_turn == Some(end.turn) => open_turn = None,
            _ => {}
        }
    }
    // A call is asked about before its decision: one whose person's question is open has no
    // decision, and nothing of it ran.
    let decided: HashSet<&str> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Decision | EventKind::CommandResult))
        .filter_map(|e| e.call_id.as_deref())
        .collect();
    let waiting: HashMap<&str, &(String, String, String)> = asks
        .values()
        .filter(|(call, _, _)| !decided.contains(call.as_str()))
        .map(|q| (q.0.as_str(), q))
        .collect();
    left.orphaned = asks
        .values()
        .filter(|(call, _, _)| decided.contains(call.as_str()))
        .cloned()
        .collect();
    left.orphaned.sort_by(|a, b| a.2.cmp(&b.2));
    for block in &last.content {
        let Block::ToolUse { id, name, input } = block else {
            continue;
        };
        let state = if let Some((content, is_error)) = results.get(id.as_str()) {
            CallState::Answered {
                content: content.clone(),
                is_error: *is_error,
            }
        } else if let Some(question) = waiting.get(id.as_str()) {
            left.questions.push((*question).clone());
            CallState::Run
        } else if let Some(children) = running_children(spawned.get(id.as_str()), &completed, root)
        {
            CallState::Children(children)
        } else if started.contains(id.as_str()) {
            CallState::Unknown(String::new())
        } else {
            CallState::Run
        };
        left.calls.push(OpenCall {
            id: id.clone(),
            name: name.clone(),
            input: input.clone(),
            state,
        });
    }
    left.turn_open = open_turn.is_some();
    left
}
