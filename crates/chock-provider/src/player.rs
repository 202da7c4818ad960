//! The offline player: a recorded model, played turn by turn through the `Provider` trait.
//!
//! Because it is a `Provider`, a played session goes through exactly the same loop, tools, approvals,
//! sandbox and log as a live one; only the model's words come from a file. `demo` is a recording built
//! into the binary; `script:FILE` plays one of your own (format in docs/providers.md).
//!
//! The turn to play is the number of assistant messages already in the request, so the player keeps no
//! state of its own and a resumed session picks up where it left off.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::error::ProviderError;
use crate::types::{Block, Request, Response, Role, StopReason, StreamEvent, Usage};
use crate::{Provider, ProviderFuture};

const DEMO: &str = include_str!("../recordings/demo.toml");

/// A recorded model: what it says and calls, turn by turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// A name for messages (`demo`, or the file's own).
    #[serde(default)]
    pub name: Option<String>,
    /// The model name reported in responses (default `offline`).
    #[serde(default)]
    pub model: Option<String>,
    /// The answer to a request that offers no tools: a reviewer call (`agent_review`) made through the same
    /// provider, for example `{"allow": true, "reasons": "reads only the workspace"}`. Such requests do not
    /// advance or consume the turns. Without it, they are played like any other request.
    #[serde(default)]
    pub review: Option<String>,
    /// Tools beyond the built-in ones that the recording calls (an MCP server's, a plugin's):
    /// checked when played against what the session offers, not when the file is read.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The turns, in order.
    #[serde(rename = "turn", default)]
    pub turns: Vec<Turn>,
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// What the model says before its calls (or as its final answer).
    #[serde(default)]
    pub text: Option<String>,
    /// The tool calls, in order. A turn without calls ends the session.
    #[serde(rename = "call", default)]
    pub calls: Vec<RecordedCall>,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The tool's name (`read_file`, `run_command`, …).
    pub tool: String,
    /// The tool's input object.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Checks on the result the harness sends back; a failed check stops the session.
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// What a tool result must look like.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Whether the result must (true) or must not (false) be an error.
    #[serde(default)]
    pub is_error: Option<bool>,
    /// Text the result must contain.
    #[serde(default)]
    pub contains: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// A tool a recording may call: its name and the input fields it requires, as the session's tool
/// registry says (the agent passes its own; this crate keeps no list of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolShape {
    /// The tool's name.
    pub name: String,
    /// The input fields it requires.
    pub required: Vec<String>,
}

impl Recording {
    /// Parses and checks a recording; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Recording, ProviderError> {
        let error = |message: String| ProviderError::Recording {
            file: file.to_owned(),
            message,
        };
        let recording: Recording = toml::from_str(text).map_err(|e| error(e.to_string()))?;
        if recording.turns.is_empty() {
            return Err(error("it has no `[[turn]]`".to_owned()));
        }
        for (t, turn) in recording.turns.iter().enumerate() {
            if turn.text.is_none() && turn.calls.is_empty() {
                return Err(error(format!(
                    "turn {} has neither `text` nor a `[[turn.call]]`",
                    t + 1
                )));
            }
            for (c, call) in turn.calls.iter().enumerate() {
                let at = format!("turn {}, call {} (`{}`)", t + 1, c + 1, call.tool);
                if !call.input.is_object() {
                    return Err(error(format!("{at}: `input` must be a table")));
                }
            }
        }
        if recording.turns.last().is_some_and(|t| !t.calls.is_empty()) {
            return Err(error(
                "the last turn must have no calls: it is the model's final answer".to_owned(),
            ));
        }
        Ok(recording)
    }

    /// Checks every call against `tools` (the session's tool registry): a tool it does not hold,
    /// or an input that lacks a field the tool requires, is refused naming the turn and call; `file`
    /// names the recording. A tool the recording declares (`tools = [...]`: an MCP server's, a
    /// plugin's) is checked when played, against the tools the session offers.
    pub fn check_tools(&self, file: &Path, tools: &[ToolShape]) -> Result<(), ProviderError> {
        let error = |message: String| ProviderError::Recording {
            file: file.to_owned(),
            message,
        };
        for (t, turn) in self.turns.iter().enumerate() {
            for (c, call) in turn.calls.iter().enumerate() {
                if self.tools.contains(&call.tool) {
                    continue;
                }
                let at = format!("turn {}, call {} (`{}`)", t + 1, c + 1, call.tool);
                let Some(shape) = tools.iter().find(|s| s.name == call.tool) else {
                    let known: Vec<&str> = tools.iter().map(|s| s.name.as_str()).collect();
                    return Err(error(format!(
                        "{at}: unknown tool; known tools: {} (declare another in `tools = [...]`)",
                        known.join(", ")
                    )));
                };
                let input = call.input.as_object();
                if let Some(missing) = shape
                    .required
                    .iter()
                    .find(|field| !input.is_some_and(|i| i.contains_key(field.as_str())))
                {
                    return Err(error(format!(
                        "{at}: `input` lacks the required field `{missing}`"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Plays a recording as a `Provider`.
#[derive(Debug, Clone)]
pub struct Player {
    name: String,
    /// The recording's file (`<built-in demo>` for the demo), named in its errors.
    file: PathBuf,
    recording: Recording,
}

impl Player {
    /// The built-in demo recording.
    pub fn demo() -> Player {
        let file = PathBuf::from("<built-in demo>");
        let recording = Recording::parse(DEMO, &file).unwrap_or_else(|e| {
            // The demo is checked by this crate's tests; a broken one is a build defect, not user input.
            panic!("the built-in demo recording is invalid: {e}")
        });
        Player {
            name: "demo".to_owned(),
            file,
            recording,
        }
    }

    /// A recording read from `path`.
    pub fn from_file(path: &Path) -> Result<Player, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProviderError::Recording {
            file: path.to_owned(),
            message: format!("cannot read it: {e}"),
        })?;
        Ok(Player {
            name: "script".to_owned(),
            file: path.to_owned(),
            recording: Recording::parse(&text, path)?,
        })
    }

    /// A player for a `--provider` value: `demo` or `script:FILE`. `None` when `spec` names neither.
    pub fn from_spec(spec: &str) -> Option<Result<Player, ProviderError>> {
        if spec == "demo" {
            return Some(Ok(Player::demo()));
        }
        let file = spec.strip_prefix("script:")?;
        Some(Player::from_file(&PathBuf::from(file)))
    }

    /// [`Recording::check_tools`] for this player's recording: every call is of a tool in
    /// `tools` (the session's registry) with the fields it requires.
    pub fn check_tools(&self, tools: &[ToolShape]) -> Result<(), ProviderError> {
        self.recording.check_tools(&self.file, tools)
    }

    /// The recording being played.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    fn recording_name(&self) -> String {
        self.recording
            .name
            .clone()
            .unwrap_or_else(|| self.name.clone())
    }

    fn model(&self) -> String {
        self.recording
            .model
            .clone()
            .unwrap_or_else(|| "offline".to_owned())
    }

    fn script_error(&self, message: String) -> ProviderError {
        ProviderError::Script {
            recording: self.recording_name(),
            message,
        }
    }

    fn call_id(turn: usize, call: usize) -> String {
        format!("play_{}_{}", turn + 1, call + 1)
    }

    /// Checks the results the harness sent back for the previous turn's calls.
    fn check_results(&self, req: &Request, turn: usize) -> Result<(), ProviderError> {
        let Some(previous) = turn.checked_sub(1).map(|t| &self.recording.turns[t]) else {
            return Ok(());
        };
        // Ids are unique per turn and call, so every user message may be searched: the harness is free to
        // add notes of its own after the results.
        let results: Vec<(&str, &str, bool)> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => Some((tool_use_id.as_str(), content.as_str(), *is_error)),
                _ => None,
            })
            .collect();
        for (c, call) in previous.calls.iter().enumerate() {
            let Some(expect) = &call.expect else { continue };
            let id = Self::call_id(turn - 1, c);
            let at = format!("turn {}, call {} (`{}`)", turn, c + 1, call.tool);
            let Some((_, content, is_error)) = results.iter().find(|(rid, _, _)| *rid == id) else {
                return Err(self.script_error(format!("{at}: no tool result came back for it")));
            };
            if let Some(want) = expect.is_error
                && want != *is_error
            {
                let got = if *is_error { "an error" } else { "a success" };
                return Err(self.script_error(format!(
                    "{at}: expected is_error = {want}, got {got}: {content}"
                )));
            }
            if let Some(needle) = &expect.contains
                && !content.contains(needle.as_str())
            {
                return Err(self.script_error(format!(
                    "{at}: expected the result to contain {needle:?}; it was: {content}"
                )));
            }
        }
        Ok(())
    }

    fn play(
        &self,
        req: &Request,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, ProviderError> {
        if let Some(review) = self
            .recording
            .review
            .as_ref()
            .filter(|_| req.tools.is_empty())
        {
            on_event(StreamEvent::TextDelta(review.clone()));
            return Ok(Response {
                content: vec![Block::Text {
                    text: review.clone(),
                }],
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
                model: self.model(),
                id: Some(format!("{}-review", self.recording_name())),
            });
        }
        let turn = req
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let total = self.recording.turns.len();
        let Some(recorded) = self.recording.turns.get(turn) else {
            return Err(self.script_error(format!(
                "the recording has {total} turns and all were played; the session asked for turn {}",
                turn + 1
            )));
        };
        self.check_results(req, turn)?;
        let mut content = Vec::new();
        if let Some(text) = &recorded.text {
            for piece in text.split_inclusive(' ') {
                on_event(StreamEvent::TextDelta(piece.to_owned()));
            }
            content.push(Block::Text { text: text.clone() });
        }
        for (c, call) in recorded.calls.iter().enumerate() {
            if !req.tools.is_empty() && !req.tools.iter().any(|t| t.name == call.tool) {
                return Err(self.script_error(format!(
                    "turn {}, call {}: the recording calls `{}`, which this session does not offer",
                    turn + 1,
                    c + 1,
                    call.tool
                )));
            }
            let id = Self::call_id(turn, c);
            on_event(StreamEvent::ToolCallStarted {
                id: id.clone(),
                name: call.tool.clone(),
            });
            content.push(Block::ToolUse {
                id,
                name: call.tool.clone(),
                input: call.input.clone(),
            });
        }
        let stop_reason = if recorded.calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Ok(Response {
            content,
            stop_reason,
            usage: Usage::default(),
            model: self.model(),
            id: Some(format!("{}-turn-{}", self.recording_name(), turn + 1)),
        })
    }
}

impl Provider for Player {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream<'a>(
        &'a self,
        req: &'a Request,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> ProviderFuture<'a> {
        Box::pin(async move { self.play(req, on_event) })
    }
}
