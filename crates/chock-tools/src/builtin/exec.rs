//! run_command and read_output as [`Tool`]s. A command is the session's confined call (the path
//! `chock exec` takes), which classifies, decides and records it itself; the work is in
//! [`crate::commands`].

use chock_log::LogError;
use chock_policy::ActionError;
use chock_protocol::live::{ToolDisplay, ToolKind, input_field};
use serde_json::Value;

use crate::ToolOutput;
use crate::commands::{ReadOutputInput, RunInput};
use crate::tool::{Access, Effect, Tool, ToolContext};

/// `run_command`.
#[derive(Debug)]
pub struct RunCommand;

impl Tool for RunCommand {
    type Input = RunInput;

    fn name(&self) -> &str {
        "run_command"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Run `{}`", input_field(input, "command")),
            ToolKind::Execute,
        )
    }

    fn description(&self) -> &str {
        "Run a shell command (sh -c) confined in the sandbox, in the project's workspace copy, with no \
network. Decided as exec.<class>.<program>. With background: true it returns a handle at once; read its \
output later with read_output."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, _input: &RunInput) -> Result<Access, ActionError> {
        Ok(Access::Confined)
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: RunInput,
    ) -> Result<ToolOutput, LogError> {
        cx.state.commands.run(cx.call_id, &input).await
    }
}

/// `read_output`.
#[derive(Debug)]
pub struct ReadOutput;

impl Tool for ReadOutput {
    type Input = ReadOutputInput;

    fn name(&self) -> &str {
        "read_output"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Read the output of {}", input_field(input, "handle")),
            ToolKind::Read,
        )
    }

    fn description(&self) -> &str {
        "Read what a background command printed so far, and whether it has ended."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &ReadOutputInput) -> Result<Access, ActionError> {
        Ok(Access::Free {
            why: "reads a command this session already ran",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: ReadOutputInput,
    ) -> Result<ToolOutput, LogError> {
        Ok(cx.state.commands.read_output(&input))
    }
}
