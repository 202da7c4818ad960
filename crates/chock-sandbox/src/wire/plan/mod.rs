//! The plan of one confined call: plain, serialisable data.
//!
//! A `Plan` says everything the driver needs and nothing about the host process that made it, so the
//! same plan can later be shipped into a microVM guest and built there by the same driver (ROADMAP).
//! Deciding (policy, classification, env scrubbing) happens before a plan exists; the driver only
//! applies it.
//!
//! Here the plan itself and its network; beside it what is mounted (`mounts`), the limits
//! (`limits`), the environment a call gets (`env`), the checks made before any kernel is touched
//! (`validate`) and the builder of the common case (`builder`).

mod builder;
mod env;
mod limits;
mod mounts;
mod validate;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use builder::PlanBuilder;
pub use env::{DEFAULT_PATH, ENV_ALLOWLIST, scrub_env};
pub use limits::Limits;
pub use mounts::{OwnOverlay, STORE_DIR, Shim, ShimDir, StorePath, WorkspaceMount};

/// One confined call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The command and its arguments. `argv[0]` without a `/` is looked up in the plan's `PATH`
    /// (the sandbox's, never the host process's).
    pub argv: Vec<String>,
    /// Working directory inside the sandbox (usually `project_path` or below it).
    pub cwd: PathBuf,
    /// The complete environment of the command, already scrubbed (see [`scrub_env`]).
    pub env: Vec<(String, String)>,
    /// The home directory inside the sandbox: an empty, writable, throwaway tmpfs at this path, so
    /// tools that write dotfiles work while nothing of the host's home is visible. Declared read/write
    /// paths below it are bound into it.
    pub home: PathBuf,
    /// What is mounted at `project_path` (read-write, except [`WorkspaceMount::ReadOnly`]).
    pub workspace: WorkspaceMount,
    /// With an overlay workspace: the call mounts no overlay of its own but attaches a clone of
    /// its session's one instance, which the host hands to the call ([`crate::SharedOverlay`],
    /// [`crate::spawn_shared`]), so calls that run at the same time see one filesystem. False: the
    /// call mounts an instance of its own, which is only sound while no other call uses the same
    /// upper directory.
    #[serde(default)]
    pub shared_overlay: bool,
    /// Where a call's own overlay instance (not shared) keeps what the call writes.
    #[serde(default)]
    pub own_overlay: OwnOverlay,
    /// The project's own path: the workspace appears here, so paths in error messages and build
    /// outputs match the real project.
    pub project_path: PathBuf,
    /// The policy file (inside `project_path`), bound read-only over itself (rule 2).
    pub policy_file: Option<PathBuf>,
    /// Host paths bound read-only at the same path (a toolchain under the home, ...).
    pub extra_read: Vec<PathBuf>,
    /// Host paths bound read-write at the same path (a declared cache).
    pub extra_write: Vec<PathBuf>,
    /// Nix store paths bound read-only (a dev shell's closure, a provisioned program's): each
    /// shown at its store path (`/nix/store/<hash>-<name>`) from where it really lies on the host
    /// (the same path, or under a store kept in another directory). Nothing else of the store is
    /// shown.
    #[serde(default)]
    pub store_paths: Vec<StorePath>,
    /// Resource limits.
    pub limits: Limits,
    /// The call's network.
    pub network: NetworkPlan,
    /// Wall-clock limit; at the end every process of the call is killed.
    pub timeout: Option<Duration>,
    /// Whether the call gets a channel to the host: a socket pair made per call, the call's end
    /// open in the command as descriptor [`crate::HOST_CHANNEL_FD`] and named in its environment
    /// ([`crate::HOST_CHANNEL_ENV`]), the host's end handed back by the start
    /// ([`crate::CallHandle::take_host_channel`]). Every process of the call inherits it; it is
    /// gone when the call is.
    #[serde(default)]
    pub host_channel: bool,
    /// Host programs bound read-only over paths of the tree (the git shim over each git), after
    /// everything else is mounted. Each target must exist in the tree (under `/usr`, say).
    #[serde(default)]
    pub shims: Vec<Shim>,
    /// Directories of the tree with host programs shown over many of their files (the git shim
    /// over each hard link of a git in its exec path): one read-only overlay each, whatever the
    /// number of files it hides, mounted with [`Plan::shims`]. Each target must be a directory of
    /// the tree with no other mount at or below it.
    #[serde(default)]
    pub shim_dirs: Vec<ShimDir>,
    /// The call is to be kept by another process than the one that starts it (a session's
    /// keeper, [`crate::CallHandle::keep`]), and so may outlive it: it is built the per-call way,
    /// never in the session's sandbox, whose init ends with the process that made it.
    #[serde(default)]
    pub kept: bool,
}

/// The call's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NetworkPlan {
    /// An empty network namespace with only a loopback interface, and Landlock refusing TCP.
    None,
    /// As `None`, plus a TCP listener on `127.0.0.1:port` inside the call's network namespace, made
    /// by the sandbox and handed back to the host ([`crate::SandboxChild::proxy_listener`]) so the host
    /// broker serves it. Landlock allows TCP connect to this port only.
    Proxy {
        /// The listener's port on `127.0.0.1`.
        port: u16,
    },
}

impl Plan {
    /// The common case: run `argv` in a bound copy of the project at `project_path`, with the host's
    /// environment scrubbed to the allowlist, the default limits, no network and no timeout.
    pub fn builder(
        argv: Vec<String>,
        workspace: WorkspaceMount,
        project_path: PathBuf,
    ) -> PlanBuilder {
        PlanBuilder::new(argv, workspace, project_path)
    }

    /// The value of `name` in the plan's environment.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}
