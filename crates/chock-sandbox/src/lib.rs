//! The confined tool call: namespaces, mounts, Landlock, seccomp, limits, applied in-process after fork.
//!
//! A caller builds a [`Plan`] (plain data), then [`spawn`] forks and builds every layer in the child
//! before the command is executed. A layer that cannot be applied fails the call with
//! [`SandboxError::Layer`] before the command runs; there is no switch that turns a layer off.
//! See docs/sandbox.md for each layer and what it does and does not stop.

mod base_set;
pub use base_set::BASE_HOST_DIRS;
mod call_io;
mod caps;
mod cgroup;
mod command;
pub mod doctor;
mod error;
mod fresh;
mod hints;
mod init;
mod landlock_rules;
#[cfg(test)]
mod lifetime_tests;
mod limits;
mod mount_calls;
mod mount_ops;
mod mounts;
mod namespaces;
mod outcome;
mod own_overlay;
mod plan;
mod prepare;
mod read_overlay;
mod ready;
mod report;
pub mod seccomp_rules;
mod seccomp_watch;
mod session_sandbox;
mod shared_overlay;
mod socket_index;
mod socket_mask;
mod socket_tree;
mod spawn;
mod sys;
mod waiting;
mod zygote;

pub use error::{Layer, SandboxError};
pub use landlock_rules::{
    MINIMUM_ABI as LANDLOCK_MINIMUM_ABI, features as landlock_features, kernel_abi as landlock_abi,
};
pub use outcome::{ExitStatus, LimitsReport, Outcome};
pub use own_overlay::in_memory_supported;
pub use plan::{
    DEFAULT_PATH, ENV_ALLOWLIST, Limits, NetworkPlan, OwnOverlay, Plan, PlanBuilder,
    WorkspaceMount, scrub_env,
};
pub use ready::{Gate, GateKey, ReadyCall, gate};
pub use shared_overlay::{OverlayLease, SharedOverlay};
pub use socket_index::SocketIndex;
pub use spawn::{SandboxChild, StdioMode, ready_in_session, spawn, spawn_in_session, spawn_shared};

/// Walks `plan`'s declared `[sandbox]` paths into the session's socket `index` now, as the
/// session's first call would (one walk of each, its directories watched from then on), so that
/// call does not wait for it: a session starts this on a thread of its own while its model takes
/// the first turn. Nothing is decided here, and a failure is not returned: a path that cannot be
/// walked is walked again by the call that needs it, which then fails with it (rule 1).
pub fn warm_socket_index(plan: &Plan, index: &SocketIndex) {
    if plan.validate().is_ok() {
        let _ = mounts::build(plan, None, Some(index));
    }
}

/// The mounts a plan makes, in order, in words ("ro bind /usr", "tmpfs /tmp (size 1 GiB)"), for
/// `chock exec --verbose`.
pub fn describe_mounts(plan: &Plan) -> Result<Vec<String>, SandboxError> {
    plan.validate()?;
    Ok(mounts::build(plan, None, None)?
        .into_iter()
        .map(|s| s.label)
        .collect())
}
