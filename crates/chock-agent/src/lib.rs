//! The agent core: the session, the loop, the tools and the approvals, as a library that emits events.
//!
//! Nothing here talks to a terminal on its own. The loop emits [`events`] to whoever runs it (the CLI
//! today, a daemon later) and puts every question it cannot answer from the policy table to an
//! [`approval::ApprovalBroker`], whose answerers are pluggable: a terminal, a reviewer model, later a
//! browser. Nobody answering is a refusal.
#![forbid(unsafe_code)]

pub mod agent;
pub mod approval;
pub mod approval_reviewer;
mod booking;
pub mod budget;
pub mod events;
pub mod gate;
pub mod host;
pub mod mcp_sampler;
pub mod memory;
pub mod prompt;
pub mod runtime;
pub mod subagent;
pub mod tools;
pub mod view;
