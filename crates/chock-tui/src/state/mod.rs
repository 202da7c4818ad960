//! What the interface knows: the transcript so far, what is live now (the model's unfinished line,
//! a running command's output), the questions open, the plan and the cost; and how each [`Feed`]
//! changes it. Pure data, so every screen can be drawn from it in a test.
//!
//! Every text from outside (the model, a command, a tool's input, a question's detail) is escaped
//! here, once, by [`clean`] as it enters, and again at drawing for the live parts: nothing the
//! agent writes reaches the terminal as a control or bidi character.

mod detach;
mod earlier;
mod question;
mod review;

pub use question::ARM_DELAY;

use std::collections::VecDeque;
use std::time::Instant;

use chock_protocol::live::{AgentEvent, PlanStep, Summary};
use chock_protocol::live::{Ended, ItemKind};
use chock_protocol::log::AnswerKind;

use crate::feed::{Asked, Feed, TaskOutcome};
use crate::view::diff::DiffView;
use crate::view::sessions::SessionsView;

/// The person's task or follow-up, as the transcript shows it.
fn user_line(text: &str) -> String {
    format!("› {text}")
}

/// A tool call, as the transcript shows it: the tool and its input on one line.
fn tool_line(tool: &str, input: &serde_json::Value) -> String {
    format!("→ {tool} {}", chock_protocol::live::input_line(input))
}

/// A tool call's result: a mark and its first line.
fn result_line(ok: bool, summary: &str) -> String {
    let mark = if ok { "✓" } else { "✗" };
    format!("  {mark} {}", summary.lines().next().unwrap_or_default())
}

/// One line of text from outside, made safe to draw: the one escaper
/// ([`chock_protocol::text`]) with newlines escaped too, so a line is one line.
pub fn clean(text: &str) -> String {
    chock_protocol::text::escaped(text, chock_protocol::text::Layout::Line)
}

/// At most this many lines of one command's output go into the transcript.
pub const OUTPUT_LINES: usize = 20;
/// How many lines of a running command's output the live area keeps.
const LIVE_TAIL: usize = 8;

/// What kind of line a transcript line is (its colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The person's task or follow-up.
    User,
    /// The model's words.
    Model,
    /// A tool call.
    Tool,
    /// A decision about an act.
    Decision,
    /// A command's output.
    Output,
    /// A tool call's result.
    Result {
        /// Whether it succeeded.
        ok: bool,
    },
    /// The plan.
    Plan,
    /// Chock's own notes (a task ended, an apply).
    Note,
    /// Something failed.
    Error,
}

/// One finished transcript line, already escaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its colour.
    pub kind: Kind,
    /// The text (escaped: no control or bidi characters).
    pub text: String,
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No session yet: the first task makes one.
    NoSession,
    /// The session waits for a follow-up.
    Idle,
    /// A task runs.
    Working,
    /// The session ended.
    Ended,
}

/// Which screen is up.
#[derive(Debug, Clone, PartialEq)]
pub enum Screen {
    /// The transcript, the live area, the question and the input.
    Main,
    /// The session's diff (alternate screen).
    Diff(DiffView),
    /// The sessions to resume or attach to (alternate screen).
    Sessions(SessionsView),
}

/// The whole state.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// The screen up.
    pub screen: Screen,
    /// Where the session is.
    pub phase: Phase,
    /// The session's id, provider and model.
    pub session: Option<(String, String, String)>,
    /// What the person is typing.
    pub input: String,
    /// The model's unfinished line (raw; escaped when drawn).
    pub live_text: String,
    /// The running command's newest lines past those put into the transcript (escaped).
    pub live_output: VecDeque<String>,
    live_partial: String,
    /// Lines of the current command's output already in the transcript.
    output_lines: usize,
    /// The open questions, oldest first: the first is the one on screen.
    pub questions: VecDeque<Asked>,
    /// Since when no key was pressed while the question on screen was up: its answer keys count
    /// only [`ARM_DELAY`] after that ([`App::question_armed`]).
    pub question_quiet_since: Option<Instant>,
    /// The model's plan.
    pub plan: Vec<PlanStep>,
    /// The price so far (None: some reply's price is unknown).
    pub cost: Option<f64>,
    /// Tokens so far.
    pub tokens: (u64, u64),
    /// The turn running or last run.
    pub turn: u32,
    /// A one-line message on the status line (an apply's id, an error).
    pub status: Option<(Kind, String)>,
    /// A Ctrl-C interrupted the turn: the next one leaves.
    pub interrupt_armed: bool,
    /// The last apply made here (what undo reverts).
    pub last_apply: Option<String>,
    /// The person asked to leave.
    pub quit: bool,
    /// The session was handed to the daemon: leaving does not end it.
    pub handed_over: bool,
    /// Finished lines not yet put into the scrollback.
    pending: Vec<Line>,
}

impl Default for App {
    fn default() -> Self {
        Self::new()
    }
}

impl App {
    /// A state with no session yet: the task entry.
    pub fn new() -> Self {
        Self {
            screen: Screen::Main,
            phase: Phase::NoSession,
            session: None,
            input: String::new(),
            live_text: String::new(),
            live_output: VecDeque::new(),
            live_partial: String::new(),
            output_lines: 0,
            questions: VecDeque::new(),
            question_quiet_since: None,
            plan: Vec::new(),
            cost: Some(0.0),
            tokens: (0, 0),
            turn: 0,
            status: None,
            interrupt_armed: false,
            last_apply: None,
            quit: false,
            handed_over: false,
            pending: Vec::new(),
        }
    }

    /// Adds finished lines of `kind` (each line of `text`, escaped).
    pub fn say(&mut self, kind: Kind, text: &str) {
        for line in text.split('\n') {
            self.pending.push(Line {
                kind,
                text: clean(line),
            });
        }
    }

    /// Takes the finished lines not yet put into the scrollback.
    pub fn take_lines(&mut self) -> Vec<Line> {
        std::mem::take(&mut self.pending)
    }

    /// The finished lines waiting (for a test's eyes).
    pub fn waiting_lines(&self) -> &[Line] {
        &self.pending
    }

    /// The person's task or follow-up goes into the transcript and the session starts working.
    pub fn submitted(&mut self, text: &str) {
        self.say(Kind::User, &user_line(text));
        self.phase = Phase::Working;
        self.interrupt_armed = false;
        self.status = None;
    }

    /// Applies one [`Feed`].
    pub fn apply(&mut self, feed: Feed) {
        match feed {
            Feed::Started {
                session,
                provider,
                model,
            } => {
                self.say(
                    Kind::Note,
                    &format!("chock: session {session} (provider {provider}, model {model})"),
                );
                self.session = Some((session, provider, model));
                if self.phase == Phase::NoSession {
                    self.phase = Phase::Idle;
                }
            }
            Feed::Earlier(messages) => self.earlier(&messages),
            Feed::Live(event) => self.live(*event),
            Feed::Asked(asked) => {
                if !self.questions.iter().any(|q| q.id == asked.id) {
                    if self.questions.is_empty() {
                        self.question_quiet_since = Some(Instant::now());
                    }
                    // The whole question goes into the transcript too (escaped): the frame may
                    // have no room for all of a long detail.
                    if asked.approval {
                        let act = asked.action.as_deref().unwrap_or("an act");
                        let text = format!("  {} asks about {act}: {}", asked.id, asked.what);
                        self.say(Kind::Decision, &clean(&text));
                    }
                    self.questions.push_back(asked);
                }
            }
            Feed::Resolved {
                question,
                by,
                answer,
            } => self.resolved(&question, by.as_deref(), answer),
            Feed::TaskEnded(outcome) => self.task_ended(&outcome),
            Feed::Ended(summary) => {
                self.flush_live();
                self.questions.clear();
                // The live `session_ended` already said it, when it came.
                if let Some(summary) = summary
                    && self.phase != Phase::Ended
                {
                    self.summary(&summary);
                }
                self.phase = Phase::Ended;
            }
            Feed::HandedOver { follow } => {
                self.flush_live();
                self.questions.clear();
                let id = self
                    .session
                    .as_ref()
                    .map_or("", |s| s.0.as_str())
                    .to_string();
                self.say(
                    Kind::Note,
                    &format!("── session {id} was handed over to the daemon; follow it: {follow}"),
                );
                self.phase = Phase::Ended;
                // "handing the session to the daemon…" is done.
                self.status = None;
                self.handed_over = true;
                self.quit = true;
            }
            Feed::Diff(review, diff) => self.diff(review, *diff),
            Feed::Applied(review, applied) => self.applied(review, &applied),
            Feed::ReviewFailed(review, error) => self.review_failed(review, &error),
            Feed::Failed(why) => {
                self.say(Kind::Error, &format!("chock: {why}"));
                self.status = Some((Kind::Error, clean(&why)));
            }
        }
    }

    fn live(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Text { text, .. } => {
                self.live_text.push_str(&text);
                while let Some(at) = self.live_text.find('\n') {
                    let line: String = self.live_text.drain(..=at).collect();
                    self.say(Kind::Model, line.trim_end_matches('\n'));
                }
            }
            AgentEvent::TurnStarted { turn } => self.turn = turn,
            AgentEvent::ItemStarted {
                kind: ItemKind::CommandOutput { .. },
                ..
            } => {
                self.flush_text();
                self.live_output.clear();
                self.live_partial.clear();
                self.output_lines = 0;
            }
            AgentEvent::ItemStarted {
                kind: ItemKind::Message,
                ..
            } => self.flush_text(),
            AgentEvent::ItemDelta { text, .. } => self.output(&text),
            AgentEvent::ItemCompleted { .. } => {
                self.flush_text();
                if !self.live_partial.is_empty() {
                    let rest = std::mem::take(&mut self.live_partial);
                    self.output_line(&rest);
                }
                if self.output_lines > OUTPUT_LINES {
                    let more = self.output_lines - OUTPUT_LINES;
                    self.say(Kind::Output, &format!("    … {more} more line(s)"));
                }
                self.output_lines = 0;
                self.live_output.clear();
            }
            AgentEvent::ToolCall { tool, input, .. } => {
                self.flush_text();
                self.say(Kind::Tool, &tool_line(&tool, &input));
            }
            AgentEvent::Decision {
                action,
                allowed,
                decided_by,
                ..
            } if !action.is_empty() => {
                let word = if allowed { "allowed" } else { "refused" };
                self.say(Kind::Decision, &format!("  {word} {action}: {decided_by}"));
            }
            AgentEvent::ToolResult { ok, summary, .. } => {
                self.say(Kind::Result { ok }, &result_line(ok, &summary));
            }
            AgentEvent::PlanUpdated { steps } => {
                self.flush_text();
                self.say(Kind::Plan, "  plan:");
                for step in &steps {
                    self.say(Kind::Plan, &format!("    [{}] {}", step.status, step.step));
                }
                self.plan = steps;
            }
            AgentEvent::ModelResponse {
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                self.tokens.0 += input_tokens;
                self.tokens.1 += output_tokens;
                self.cost = match (self.cost, cost_usd) {
                    (Some(total), Some(c)) => Some(total + c),
                    _ => None,
                };
            }
            AgentEvent::ModelRetry {
                attempt,
                wait_ms,
                reason,
            } => self.say(
                Kind::Note,
                &format!("  (model request failed: {reason}; attempt {attempt}, retrying in {wait_ms} ms)"),
            ),
            AgentEvent::BackgroundEnded { handle, status } => self.say(
                Kind::Note,
                &format!("  (background {handle} ended: {status:?})"),
            ),
            AgentEvent::TurnEnded { .. } => self.flush_text(),
            AgentEvent::SessionEnded { summary } => {
                self.flush_live();
                self.summary(&summary);
                self.phase = Phase::Ended;
            }
            _ => {}
        }
    }

    fn output(&mut self, text: &str) {
        self.live_partial.push_str(text);
        while let Some(at) = self.live_partial.find('\n') {
            let line: String = self.live_partial.drain(..=at).collect();
            self.output_line(line.trim_end_matches(['\n', '\r']));
        }
    }

    fn output_line(&mut self, line: &str) {
        self.output_lines += 1;
        if self.output_lines <= OUTPUT_LINES {
            self.say(Kind::Output, &format!("    {line}"));
            return;
        }
        // Past the transcript's share, the live area keeps the newest lines in view.
        self.live_output.push_back(clean(line));
        while self.live_output.len() > LIVE_TAIL {
            self.live_output.pop_front();
        }
    }

    /// The running command's unfinished line (raw).
    pub fn live_partial(&self) -> &str {
        &self.live_partial
    }

    fn flush_text(&mut self) {
        if !self.live_text.is_empty() {
            let rest = std::mem::take(&mut self.live_text);
            self.say(Kind::Model, &rest);
        }
    }

    fn flush_live(&mut self) {
        self.flush_text();
        if !self.live_partial.is_empty() {
            let rest = std::mem::take(&mut self.live_partial);
            self.output_line(&rest);
        }
        self.live_output.clear();
    }

    fn resolved(&mut self, question: &str, by: Option<&str>, answer: Option<AnswerKind>) {
        let Some(at) = self.questions.iter().position(|q| q.id == question) else {
            return;
        };
        let Some(asked) = self.questions.remove(at) else {
            return;
        };
        if at == 0 {
            // The next question (if any) comes on screen now: its wait starts again.
            self.question_quiet_since = (!self.questions.is_empty()).then(Instant::now);
        }
        let what = asked.action.as_deref().unwrap_or("question");
        let text = match (answer, by) {
            (Some(answer), Some(by)) => format!("  {question} {what}: {} by {by}", said(answer)),
            _ => format!("  {question} {what}: nobody answered (refused)"),
        };
        self.say(Kind::Decision, &text);
    }

    fn task_ended(&mut self, outcome: &TaskOutcome) {
        self.flush_live();
        self.questions.clear();
        let text = match outcome {
            TaskOutcome::Ended(Ended::Interrupted) => {
                "── interrupted: the turn was stopped; type a follow-up, or Ctrl-C again to leave"
                    .to_string()
            }
            TaskOutcome::Ended(end) => {
                format!("── task ended ({end}); type a follow-up, /diff to review, Ctrl-C to leave")
            }
            TaskOutcome::Idle => {
                "── task ended; type a follow-up, /diff to review, Ctrl-C to leave".to_string()
            }
            TaskOutcome::Failed(why) => format!("── the session stopped: {why}"),
        };
        let kind = match outcome {
            TaskOutcome::Failed(_) => Kind::Error,
            _ => Kind::Note,
        };
        self.say(kind, &text);
        self.phase = match outcome {
            TaskOutcome::Failed(_) => Phase::Ended,
            _ => Phase::Idle,
        };
        if !matches!(outcome, TaskOutcome::Ended(Ended::Interrupted)) {
            self.interrupt_armed = false;
        }
    }

    fn summary(&mut self, s: &Summary) {
        let cost = chock_protocol::live::cost_text(s.cost_usd);
        self.say(
            Kind::Note,
            &format!(
                "── session {} ended ({}): {} turn(s), {} tool call(s), cost {cost}",
                s.session, s.ended, s.turns, s.tool_calls
            ),
        );
        if !s.review.is_empty() {
            self.say(
                Kind::Note,
                &format!("   review: {}   take: {}", s.review, s.take),
            );
        }
    }
}

/// An answer as the transcript says it.
pub fn said(answer: AnswerKind) -> &'static str {
    match answer {
        AnswerKind::AllowOnce => "allowed once",
        AnswerKind::AllowSession => "allowed for the session",
        AnswerKind::Deny => "refused",
        AnswerKind::Reply => "answered",
        AnswerKind::None => "not answered",
    }
}
