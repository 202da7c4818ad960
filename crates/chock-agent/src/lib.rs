//! The agent's turn loop: the session runtime (build, resume, submit a task, end), the turns
//! (model call, tool calls, the end rule), the budget, subagents, and the off-turn model calls (the
//! reviewer model, MCP sampling), as a library that emits events.
//!
//! Nothing here talks to a terminal on its own. The loop emits events
//! ([`chock_tools::events`]) to whoever runs it (the CLI, the daemon, the runtime's actor) and puts
//! every question it cannot answer from the policy table to an [`approval::ApprovalBroker`], whose
//! answerers are pluggable: a terminal (chock-terminal), a reviewer model, a browser. Nobody
//! answering is a refusal. The tools it calls and the session they reach (host, decider, view) are
//! chock-tools; the person's configuration is chock-config.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod agent;
pub mod approval;
pub mod approval_reviewer;
mod booking;
pub mod budget;
pub mod mcp_sampler;
pub mod runtime;
pub mod subagent;
