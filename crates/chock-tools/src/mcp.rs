//! An MCP server's tool in the registry (chock-mcp's [`McpTool`]): registered under its model
//! name (`mcp__<server>__<tool>`), decided as `mcp.<server>.tool.<tool>` at run time by chock-mcp
//! (the definition against its pin, the table made stricter by the server's annotations, the
//! question showing the raw server, tool and arguments), through the session's pipeline. The
//! loop neither knows nor changes.

use std::sync::Arc;

use chock_mcp::{CallOutcome, McpHub, McpTool};
use chock_policy::ActionError;
use serde_json::Value;

use super::ToolOutput;
use super::tool::{Access, DynTool, Effect, Prepared, ToolContext, ToolFuture};

/// One MCP tool, holding the session's hub (its servers live as long as their tools).
pub struct McpToolAdapter {
    tool: McpTool,
    description: String,
    _hub: Arc<McpHub>,
}

impl std::fmt::Debug for McpToolAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolAdapter")
            .field("name", &self.tool.model_name())
            .finish_non_exhaustive()
    }
}

impl McpToolAdapter {
    /// Every tool `hub` offers under `pipeline` (the session's decider's pipeline: what it denies,
    /// or would ask with nobody to ask, is not among them).
    pub fn offered(hub: &Arc<McpHub>, pipeline: &chock_decide::Pipeline) -> Vec<Arc<dyn DynTool>> {
        hub.offered(pipeline)
            .into_iter()
            .map(|tool| {
                let description = tool.description();
                Arc::new(McpToolAdapter {
                    tool,
                    description,
                    _hub: Arc::clone(hub),
                }) as Arc<dyn DynTool>
            })
            .collect()
    }
}

struct McpCall<'t> {
    tool: &'t McpTool,
    input: Value,
}

impl Prepared for McpCall<'_> {
    fn access(&self) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "the MCP client (the definition against its pin, the table made stricter by the server's annotations)",
        })
    }

    fn run<'a>(self: Box<Self>, cx: ToolContext<'a>) -> ToolFuture<'a>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let pipeline = cx.decider.pipeline();
            match self.tool.call(cx.call_id, &self.input, &pipeline).await {
                Ok(CallOutcome::Answered { text, is_error }) => Ok(ToolOutput {
                    text,
                    is_error,
                    changed: Vec::new(),
                }),
                Ok(CallOutcome::Refused { reason }) => Ok(ToolOutput::error(reason)),
                Err(chock_mcp::McpError::Log(e)) => Err(e),
                Err(e) => Ok(ToolOutput::error(e.to_string())),
            }
        })
    }
}

impl DynTool for McpToolAdapter {
    fn name(&self) -> &str {
        self.tool.model_name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.tool.input_schema()
    }

    /// Always `Mutating`: a server's read-only claim never loosens what a mode offers.
    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn Prepared + '_>, serde_json::Error> {
        Ok(Box::new(McpCall {
            tool: &self.tool,
            input: input.clone(),
        }))
    }
}
