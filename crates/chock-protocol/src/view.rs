//! The session's view: one fold of its log events into what every front end shows of it — where
//! its log stands, who started it, its title and cost, the questions still open, and how (and
//! whether) it ended.
//!
//! Every reader of a session's history (`chock sessions list`, the daemon's `sessions.list` and
//! `approvals.pending`, the session runtime that comes after them) folds the log through
//! [`SessionView::apply`] instead of matching raw events itself, so two front ends cannot
//! disagree about the same log. The fold is pure: it takes the typed payloads of
//! [`crate::log`] and reads no file; what is not in the log (whether a process still writes the
//! session) stays with the caller.

use crate::EventKind;
use crate::log::{ApprovalAsk, EndReason, EventData, SessionEnd, SessionStart};

/// Where one event sits in its log: what [`SessionView::apply`] needs besides its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At<'a> {
    /// Its seq.
    pub seq: u64,
    /// When it was written.
    pub ts: &'a str,
    /// Its kind (known even when its data does not fit the kind's type).
    pub kind: EventKind,
    /// The tool call it is about.
    pub call_id: Option<&'a str>,
}

/// A question asked (`approval.ask` with a question id) that no `approval.answer` has named yet.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenQuestion {
    /// The seq of its `approval.ask`.
    pub seq: u64,
    /// The tool call it is about.
    pub call_id: Option<String>,
    /// Its id (`q-3`).
    pub question: String,
    /// The question as logged.
    pub ask: ApprovalAsk,
}

/// One session as its log tells it, folded event by event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionView {
    /// How many events were folded (readable or not).
    pub events: usize,
    /// The seq of the last event.
    pub last_seq: Option<u64>,
    /// When the last event was written.
    pub last_ts: Option<String>,
    /// The kind of the last event.
    pub last_kind: Option<EventKind>,
    /// Line 0: who started the session, where, with which provider and model.
    pub start: Option<SessionStart>,
    /// The title the model gave it (its last `set_title` call).
    pub title: Option<String>,
    /// Turns begun.
    pub turns: u32,
    /// Uncached input tokens of every model reply.
    pub input_tokens: u64,
    /// Output tokens of every model reply.
    pub output_tokens: u64,
    /// Model replies folded.
    pub model_responses: u32,
    /// The price of those replies (None once one had no price).
    priced: Option<f64>,
    /// The session's last `session.end`, unless it went on working after it (a resumed session
    /// that has not ended again). An apply or an adoption of its work, with the question asked
    /// for it, may follow an end without undoing it.
    pub end: Option<SessionEnd>,
    /// The questions still open, in log order.
    pub questions: Vec<OpenQuestion>,
}

impl SessionView {
    /// The view of `events`, folded in order.
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = (At<'a>, Option<&'a EventData>)>,
    ) -> SessionView {
        let mut view = SessionView::default();
        for (at, data) in events {
            view.apply(at, data);
        }
        view
    }

    /// Folds one more event. `data` is its typed payload, or None when its data does not fit its
    /// kind's type (such an event still counts as the log's last).
    pub fn apply(&mut self, at: At<'_>, data: Option<&EventData>) {
        self.events += 1;
        self.last_seq = Some(at.seq);
        self.last_ts = Some(at.ts.to_string());
        self.last_kind = Some(at.kind);
        // Work after an end means the session was taken up again.
        if matches!(
            at.kind,
            EventKind::SessionStart
                | EventKind::TurnStart
                | EventKind::ModelRequest
                | EventKind::ToolCall
        ) {
            self.end = None;
        }
        let Some(data) = data else {
            return;
        };
        match data {
            EventData::SessionStart(start) => self.start = Some(start.clone()),
            EventData::TurnStart(_) => self.turns += 1,
            EventData::ModelResponse(r) => {
                self.model_responses += 1;
                self.input_tokens += r.usage.input_tokens;
                self.output_tokens += r.usage.output_tokens;
                let before = if self.model_responses == 1 {
                    Some(0.0)
                } else {
                    self.priced
                };
                self.priced = before.zip(r.cost_usd).map(|(a, b)| a + b);
            }
            EventData::ToolCall(call) if call.tool == crate::TITLE_TOOL => {
                if let Some(title) = call
                    .input
                    .as_ref()
                    .and_then(|i| i.get("title"))
                    .and_then(|t| t.as_str())
                {
                    self.title = Some(title.to_string());
                }
            }
            EventData::ApprovalAsk(ask) => {
                if let Some(question) = &ask.question {
                    self.questions.push(OpenQuestion {
                        seq: at.seq,
                        call_id: at.call_id.map(str::to_string),
                        question: question.clone(),
                        ask: ask.clone(),
                    });
                }
            }
            EventData::ApprovalAnswer(answer) => {
                if let Some(question) = &answer.question {
                    self.questions.retain(|q| &q.question != question);
                }
            }
            EventData::SessionEnd(end) => {
                if self.title.is_none() {
                    self.title = end.summary.as_ref().and_then(|s| s.title.clone());
                }
                self.end = Some(end.clone());
            }
            _ => {}
        }
    }

    /// Whether the session has ended (and not been taken up again since).
    pub fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// Why it ended, if it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.end.as_ref().map(|e| e.reason)
    }

    /// The price of its model calls in US dollars: None before any call, or once one had no
    /// price (never a partial sum, which would read as the whole).
    pub fn cost_usd(&self) -> Option<f64> {
        self.priced
    }

    /// The project named in `session.start`.
    pub fn project(&self) -> Option<&str> {
        self.start.as_ref().and_then(|s| s.project.as_deref())
    }
}

#[cfg(test)]
mod tests;
