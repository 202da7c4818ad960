//! The tools about the session itself: update_plan, set_title, read_guidance, ask_user (none grants
//! a capability), restrict_self (narrowing is free; a widening is the act `ratchet.widen_action`)
//! and request_action (`workspace.apply`). ask_user, restrict_self and request_action do their work
//! in `dispatch/acts.rs`.

use std::sync::PoisonError;

use chock_log::LogError;
use chock_policy::{ActionError, Decision};
use chock_protocol::live::{ToolDisplay, ToolKind, input_field};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::Value;

use crate::ToolOutput;
use crate::events::{AgentEvent, PlanStep};
use crate::prompt::{GUIDANCE, guidance};
use crate::tool::{Access, Effect, Tool, ToolContext};

pub use chock_protocol::live::StepStatus;

/// One step.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanStepInput {
    /// What to do.
    pub step: String,
    /// Default: pending.
    #[serde(default)]
    pub status: StepStatus,
}

/// update_plan's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanInput {
    /// The whole plan, in order.
    pub steps: Vec<PlanStepInput>,
}

/// set_title's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TitleInput {
    /// A short title (at most 100 characters are kept).
    pub title: String,
}

fn guidance_topics(_: &mut SchemaGenerator) -> Schema {
    let topics: Vec<&str> = GUIDANCE.iter().map(|(t, _)| *t).collect();
    json_schema!({ "type": "string", "enum": topics })
}

/// read_guidance's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GuidanceInput {
    /// The topic.
    #[schemars(schema_with = "guidance_topics")]
    pub topic: String,
}

/// ask_user's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskInput {
    /// The question.
    pub question: String,
}

fn decision_names(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = Decision::ALL.iter().map(|d| d.as_str()).collect();
    json_schema!({ "type": "string", "enum": names })
}

/// restrict_self's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestrictInput {
    /// An action pattern, e.g. exec.* or fs.write.
    pub action: String,
    /// At least this strictly from now on; allow removes an earlier restriction (a widening: asked).
    #[schemars(schema_with = "decision_names")]
    pub decision: String,
}

/// request_action's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestInput {
    /// The act asked for: workspace.apply (the only act that can be requested; any other is
    /// refused by name).
    pub action: String,
    /// Why, for the person who answers.
    pub reason: String,
}

/// `update_plan`.
#[derive(Debug)]
pub struct UpdatePlan;

impl Tool for UpdatePlan {
    type Input = PlanInput;

    fn name(&self) -> &str {
        "update_plan"
    }

    fn display(&self, _input: &Value) -> ToolDisplay {
        ToolDisplay::new("Update the plan", ToolKind::Think)
    }

    fn description(&self) -> &str {
        "Replace your plan: an ordered list of steps with status pending, in_progress or done."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &PlanInput) -> Result<Access, ActionError> {
        Ok(Access::Free {
            why: "a plan is words",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: PlanInput,
    ) -> Result<ToolOutput, LogError> {
        let steps: Vec<PlanStep> = input
            .steps
            .into_iter()
            .map(|s| PlanStep {
                step: s.step,
                status: s.status,
            })
            .collect();
        *cx.state.plan.lock().unwrap_or_else(PoisonError::into_inner) = steps.clone();
        let lines: Vec<String> = steps
            .iter()
            .map(|s| format!("[{}] {}", s.status, s.step))
            .collect();
        cx.sink.emit(&AgentEvent::PlanUpdated { steps });
        Ok(ToolOutput::ok(format!(
            "plan updated:\n{}",
            lines.join("\n")
        )))
    }
}

/// `set_title`.
#[derive(Debug)]
pub struct SetTitle;

impl Tool for SetTitle {
    type Input = TitleInput;

    fn name(&self) -> &str {
        chock_protocol::TITLE_TOOL
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Title: {}", input_field(input, "title")),
            ToolKind::Other,
        )
    }

    fn description(&self) -> &str {
        "Give this session a short title."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &TitleInput) -> Result<Access, ActionError> {
        Ok(Access::Free {
            why: "a title is words",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: TitleInput,
    ) -> Result<ToolOutput, LogError> {
        let title: String = input.title.trim().chars().take(100).collect();
        *cx.state
            .title
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(title.clone());
        cx.sink.emit(&AgentEvent::TitleSet {
            title: title.clone(),
        });
        Ok(ToolOutput::ok(format!("title set: {title}")))
    }
}

/// `read_guidance`.
#[derive(Debug)]
pub struct ReadGuidance;

impl Tool for ReadGuidance {
    type Input = GuidanceInput;

    fn name(&self) -> &str {
        "read_guidance"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Read guidance on {}", input_field(input, "topic")),
            ToolKind::Read,
        )
    }

    fn description(&self) -> &str {
        "Read a short note from Chock's guidance shelf."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &GuidanceInput) -> Result<Access, ActionError> {
        Ok(Access::Free {
            why: "the shelf is compiled in",
        })
    }

    async fn run<'a>(
        &'a self,
        _cx: ToolContext<'a>,
        input: GuidanceInput,
    ) -> Result<ToolOutput, LogError> {
        Ok(match guidance(&input.topic) {
            Some(text) => ToolOutput::ok(text.to_string()),
            None => ToolOutput::error(format!(
                "no guidance on {:?}; topics: {}",
                input.topic,
                GUIDANCE
                    .iter()
                    .map(|(t, _)| *t)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        })
    }
}

/// `ask_user`.
#[derive(Debug)]
pub struct AskUser;

impl Tool for AskUser {
    type Input = AskInput;

    fn name(&self) -> &str {
        "ask_user"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Ask: {}", input_field(input, "question")),
            ToolKind::Other,
        )
    }

    fn description(&self) -> &str {
        "Ask the person a question. If nobody is there to answer, the answer is \"no answer\"."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &AskInput) -> Result<Access, ActionError> {
        Ok(Access::Free {
            why: "a question to the person",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: AskInput,
    ) -> Result<ToolOutput, LogError> {
        cx.ask_user(cx.call_id, &input.question).await
    }
}

/// `restrict_self`.
#[derive(Debug)]
pub struct RestrictSelf;

impl Tool for RestrictSelf {
    type Input = RestrictInput;

    fn name(&self) -> &str {
        "restrict_self"
    }

    fn description(&self) -> &str {
        "Narrow your own permissions for the rest of the session: the given action pattern is decided at \
least as strictly as `decision`. Widening a restriction again asks ratchet.widen_action."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, _input: &RestrictInput) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "the ratchet: a narrowing is free, a widening is ratchet.widen_action",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: RestrictInput,
    ) -> Result<ToolOutput, LogError> {
        cx.restrict_self(cx.call_id, &input).await
    }
}

/// `request_action`.
#[derive(Debug)]
pub struct RequestAction;

impl Tool for RequestAction {
    type Input = RequestInput;

    fn name(&self) -> &str {
        "request_action"
    }

    fn description(&self) -> &str {
        "Ask for an act outside your reach. Supported: workspace.apply (ask for your work to be written into \
the real project). The policy table or a person answers."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, _input: &RequestInput) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "the apply: workspace.apply, asked with the digest of the planned changes",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: RequestInput,
    ) -> Result<ToolOutput, LogError> {
        cx.request_action(cx.call_id, &input).await
    }
}
