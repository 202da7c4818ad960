//! The confined tool call: namespaces, mounts, Landlock, seccomp, limits, applied in-process after fork.
//!
//! A caller builds a [`Plan`] (plain data), then [`spawn`] forks and builds every layer in the child
//! before the command is executed. A layer that cannot be applied fails the call with
//! [`SandboxError::Layer`] before the command runs; there is no switch that turns a layer off.
//! See docs/sandbox.md for each layer and what it does and does not stop.

// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

// The crate is split by where its code runs (docs/architecture.md, "The execution seam"):
// `host` in the Chock process, `child` after fork in the call's processes, `wire` the definitions
// both read. `child` and `wire` never use `host`, and `wire` uses neither (`layering` checks it).
mod child;
pub mod confine;
mod host;
pub mod keeper;
#[cfg(test)]
mod layering;
mod wire;

pub use child::seccomp_rules;
pub use host::base_set::{BASE_HOST_DIRS, ETC_ENTRIES};
pub use host::credential_mask::{HOME_CREDENTIALS, credential_paths};
pub use host::doctor;

pub use child::landlock_rules::{
    MINIMUM_ABI as LANDLOCK_MINIMUM_ABI, features as landlock_features, kernel_abi as landlock_abi,
};
pub use confine::{
    BoxFuture, CallDoors, CallHandle, Confiner, KeptCall, Kill, Killer, PreparedCall,
};
pub use host::gate::{Gate, GateKey, gate};
pub use host::local::LocalConfiner;
pub use host::own_overlay::in_memory_supported;
pub use host::ready::ReadyCall;
pub use host::running::{wait_gone, watch_host_channel};
pub use host::seccomp_watch::SeccompWatch;
pub use host::shared_overlay::{OverlayLease, SharedOverlay};
pub use host::socket_index::SocketIndex;
pub use host::spawn::{
    SandboxChild, StdioMode, ready_in_session, spawn, spawn_in_session, spawn_shared,
};
pub use wire::error::{Layer, SandboxError};
pub use wire::host_channel::{HOST_CHANNEL_ENV, HOST_CHANNEL_FD, inherited_host_channel};
pub use wire::outcome::{ExitStatus, LimitsReport, Outcome};
pub use wire::plan::{
    DEFAULT_PATH, ENV_ALLOWLIST, Limits, NetworkPlan, OwnOverlay, Plan, PlanBuilder, STORE_DIR,
    Shim, ShimDir, StorePath, WorkspaceMount, scrub_env,
};

/// Walks `plan`'s declared `[sandbox]` paths into the session's socket `index` now, as the
/// session's first call would (one walk of each, its directories watched from then on), so that
/// call does not wait for it: a session starts this on a thread of its own while its model takes
/// the first turn. Nothing is decided here, and a failure is not returned: a path that cannot be
/// walked is walked again by the call that needs it, which then fails with it (rule 1).
pub fn warm_socket_index(plan: &Plan, index: &SocketIndex) {
    if plan.validate().is_ok() {
        let _ = host::mounts::build(plan, None, Some(index));
    }
}

/// The mounts a plan makes, in order, in words ("ro bind /usr", "tmpfs /tmp (size 1 GiB)"), for
/// `chock exec --verbose`.
pub fn describe_mounts(plan: &Plan) -> Result<Vec<String>, SandboxError> {
    plan.validate()?;
    Ok(host::mounts::build(plan, None, None)?
        .into_iter()
        .map(|s| s.label)
        .collect())
}
