//! The confined tool call: namespaces, mounts, Landlock, seccomp, limits, applied in-process after fork.
//!
//! A caller builds a [`Plan`] (plain data), then [`spawn`] forks and builds every layer in the child
//! before the command is executed. A layer that cannot be applied fails the call with
//! [`SandboxError::Layer`] before the command runs; there is no switch that turns a layer off.

mod error;
mod outcome;
mod plan;
mod spawn;

pub use error::{Layer, SandboxError};
pub use outcome::{ExitStatus, LimitsReport, Outcome};
pub use plan::{
    DEFAULT_PATH, ENV_ALLOWLIST, Limits, NetworkPlan, Plan, PlanBuilder, WorkspaceMount, scrub_env,
};
pub use spawn::{SandboxChild, StdioMode, spawn};
