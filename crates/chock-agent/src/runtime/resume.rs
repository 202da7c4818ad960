//! Rebuilding a session's conversation from its log, for resume.
//!
//! Each `model.request` logs the message appended since the previous request (the person's input,
//! or the tool results) and each `model.response` the reply's blocks, so the conversation is those
//! messages in log order. A session that crashed between a reply that called tools and the request
//! carrying their results leaves the model's calls unanswered: each gets its `tool.result` from the
//! log when the call finished, or a result saying it never did, so the conversation is valid again.

use std::collections::HashMap;

use chock_log::Event;
use chock_protocol::EventData;
use chock_protocol::log::OFF_TURN;
use chock_provider::{Block, Message, Role};

/// A log that cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// An event the conversation is rebuilt from does not fit its type.
    #[error("line {seq} ({kind}): {source}")]
    Payload {
        /// The event's `seq`.
        seq: u64,
        /// The event's kind.
        kind: chock_log::EventKind,
        /// Why its payload does not read as that kind.
        #[source]
        source: chock_protocol::PayloadError,
    },
    /// A logged message is not a message.
    #[error("line {seq}: the logged message does not read back: {source}")]
    Message {
        /// The event's `seq`.
        seq: u64,
        /// Why the message does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The log never reached the model.
    #[error("the session never asked the model anything: there is no conversation to resume")]
    Empty,
}

impl ResumeError {
    /// Whether the session asked for cannot be resumed (rather than a failure of the machine).
    pub fn is_bad_input(&self) -> bool {
        true
    }
}

/// What the log says of the conversation so far.
#[derive(Debug, Default)]
pub struct Rebuilt {
    /// The messages, as the next request will carry them.
    pub messages: Vec<Message>,
    /// The turns taken.
    pub turns: u32,
    /// Tokens so far.
    pub input_tokens: u64,
    /// Tokens so far.
    pub output_tokens: u64,
    /// Price so far (None once a reply's price was unknown).
    pub cost_usd: Option<f64>,
    /// What the model was shown of files (edit_file's guard), in log order.
    pub seen: Vec<chock_protocol::log::ShownLines>,
    /// The tasks and follow-ups the agent was given (each turn's `input`), in order.
    pub inputs: Vec<String>,
}

/// Rebuilds the conversation from `events` (a whole log, in order): the loop's requests and
/// replies; the calls outside its turns count for tokens and price only.
pub fn rebuild(events: &[Event]) -> Result<Rebuilt, ResumeError> {
    rebuild_with(events, true)
}

/// [`rebuild`]; with `answer_last` false, the calls of the model's last reply are left without
/// results when the log has none after them (the new owner of a handed-over session gives them
/// theirs: `crate::runtime::handover`).
pub fn rebuild_with(events: &[Event], answer_last: bool) -> Result<Rebuilt, ResumeError> {
    let mut out = Rebuilt {
        cost_usd: Some(0.0),
        ..Rebuilt::default()
    };
    let mut results: HashMap<String, (String, bool)> = HashMap::new();
    let mut asked = false;
    for event in events {
        let payload = |e: &Event| {
            e.payload().map_err(|source| ResumeError::Payload {
                seq: e.seq,
                kind: e.kind,
                source,
            })
        };
        match event.kind {
            chock_log::EventKind::ModelRequest => {
                let EventData::ModelRequest(request) = payload(event)? else {
                    continue;
                };
                if request.turn == OFF_TURN {
                    continue;
                }
                asked = true;
                if let Some(value) = request.new_message {
                    let message: Message =
                        serde_json::from_value(value).map_err(|source| ResumeError::Message {
                            seq: event.seq,
                            source,
                        })?;
                    if out.messages.last() != Some(&message) {
                        // A request after the model's calls carries their results itself; only
                        // one that does not (the session stopped between the calls and their
                        // results) needs them made up from the log, or they would be there twice.
                        if !carries_results(&message) {
                            answer_open_calls(&mut out.messages, &results);
                        }
                        out.messages.push(message);
                    }
                }
            }
            chock_log::EventKind::ModelResponse => {
                let EventData::ModelResponse(response) = payload(event)? else {
                    continue;
                };
                out.input_tokens += response.usage.input_tokens;
                out.output_tokens += response.usage.output_tokens;
                out.cost_usd = crate::budget::add_cost(out.cost_usd, response.cost_usd);
                if response.turn == OFF_TURN {
                    continue;
                }
                let content: Vec<Block> =
                    serde_json::from_value(response.content).map_err(|source| {
                        ResumeError::Message {
                            seq: event.seq,
                            source,
                        }
                    })?;
                out.messages.push(Message::assistant(content));
            }
            chock_log::EventKind::TurnStart => {
                if let EventData::TurnStart(start) = payload(event)? {
                    out.turns = out.turns.max(start.turn);
                    out.inputs.extend(start.input);
                }
            }
            chock_log::EventKind::ToolResult => {
                // Only what the model was told matters here: an older line of another shape
                // still gives its output.
                let Some(call_id) = &event.call_id else {
                    continue;
                };
                let told = match event.payload() {
                    Ok(EventData::ToolResult(result)) => {
                        out.seen.extend(result.shown);
                        Some((result.output, result.is_error))
                    }
                    _ => event.data.get("output").and_then(|o| o.as_str()).map(|o| {
                        let is_error = event.data.get("is_error").and_then(|e| e.as_bool());
                        (o.to_string(), is_error.unwrap_or(false))
                    }),
                };
                if let Some(told) = told {
                    results.insert(call_id.clone(), told);
                }
            }
            _ => {}
        }
    }
    if !asked {
        return Err(ResumeError::Empty);
    }
    if answer_last {
        answer_open_calls(&mut out.messages, &results);
    }
    Ok(out)
}

/// Whether `message` is the person's side answering tool calls.
fn carries_results(message: &Message) -> bool {
    message.role == Role::User
        && message
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
}

/// When the last message is the model's and it called tools, appends the results the log has
/// for those calls (or says they never ran).
fn answer_open_calls(messages: &mut Vec<Message>, results: &HashMap<String, (String, bool)>) {
    let Some(last) = messages.last() else { return };
    if last.role != Role::Assistant {
        return;
    }
    let calls: Vec<String> = last
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    if calls.is_empty() {
        return;
    }
    let content = calls
        .into_iter()
        .map(|id| {
            let (content, is_error) = results.get(&id).cloned().unwrap_or_else(|| {
                (
                    "not run: the session ended before this call finished".to_string(),
                    true,
                )
            });
            Block::ToolResult {
                tool_use_id: id,
                content,
                is_error,
            }
        })
        .collect();
    messages.push(Message {
        role: Role::User,
        content,
    });
}

/// A session opened again (`SessionBuilder::reopen`), before its conversation is rebuilt.
pub(super) struct Reopened {
    pub(super) agent: crate::agent::Agent,
    pub(super) chosen: super::Chosen,
    pub(super) review: crate::approval_reviewer::ReviewContext,
    pub(super) off_turn: crate::booking::OffTurnTally,
    pub(super) events: Vec<Event>,
    /// The children whose end was recorded at the reopen (they ended while nobody owned the
    /// session): a new owner tells the model of those that ran in the background.
    pub(super) orphans_completed: Vec<String>,
    /// Its MCP servers, to start once the runtime is made ([`super::SessionRuntime::start_mcp`]).
    pub(super) mcp: Option<super::mcp::PendingMcp>,
}
