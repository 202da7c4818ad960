//! The plan of one confined call: plain, serialisable data.
//!
//! A `Plan` says everything the driver needs and nothing about the host process that made it, so the
//! same plan can later be shipped into a microVM guest and built there by the same driver (ROADMAP).
//! Deciding (policy, classification, env scrubbing) happens before a plan exists; the driver only
//! applies it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::wire::error::SandboxError;

/// Variables that may reach a tool call from the host environment, before the policy adds its own.
/// Everything else (API keys, SSH agent sockets, the user's shell settings) is dropped.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "LANG", "TERM", "TZ"];

/// The PATH a call gets when the host has none (or an empty one).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

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

/// A host program shown in place of a file of the call's tree ([`Plan::shims`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shim {
    /// The program on the host.
    pub source: PathBuf,
    /// The file of the tree it hides (absolute, inside the sandbox).
    pub target: PathBuf,
}

/// A directory of the call's tree shown with a host directory's files over some of its own
/// ([`Plan::shim_dirs`]): the call sees `layer`'s entries in place of the target's entries of the
/// same names, and every other entry of the target as it was, read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimDir {
    /// The host directory holding, under each name to hide, the program shown in its place
    /// (absolute, written by the host only).
    pub layer: PathBuf,
    /// The directory of the tree it lies over (absolute, inside the sandbox).
    pub target: PathBuf,
}

/// One nix store path a call sees, and where it lies on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorePath {
    /// Where it lies on the host (already checked by the policy's host path checker).
    pub source: PathBuf,
    /// Its store path, where the call sees it: directly under `/nix/store`.
    pub target: PathBuf,
}

/// The directory every store path a call sees lies directly under.
pub const STORE_DIR: &str = "/nix/store";

/// What backs the project directory inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkspaceMount {
    /// A host directory (the session's copy of the project) bound read-write.
    Bind {
        /// The host directory bound (the session's copy of the project).
        source: PathBuf,
    },
    /// An overlay mounted inside the call's user namespace (kernel >= 5.11): `lower` read-only
    /// (the real project), writes land in `upper`.
    Overlay {
        /// The lower directory, read-only (the real project).
        lower: PathBuf,
        /// The upper directory, where writes land.
        upper: PathBuf,
        /// overlayfs' work directory (on the same filesystem as `upper`).
        work: PathBuf,
    },
    /// The real project itself, read-only, and nothing writable at `project_path`: what a
    /// long-lived service the person configured (an MCP server) runs from, so that it runs what
    /// the person trusted and never what the agent wrote in its workspace. Shown through a
    /// read-only overlay of its own (`read_overlay.rs`), so a host socket in the project answers
    /// nothing. No declared write path may lie inside it.
    ReadOnly {
        /// The real project, shown read-only.
        source: PathBuf,
    },
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

/// Resource limits. rlimits are always applied; cgroup limits are best effort (the one best-effort
/// layer), and the call's [`crate::LimitsReport`] says which were on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// RLIMIT_NOFILE.
    pub nofile: u64,
    /// RLIMIT_FSIZE in bytes: the largest file the call can write.
    pub fsize_bytes: u64,
    /// cgroup v2 memory.max in bytes.
    pub memory_max_bytes: Option<u64>,
    /// cgroup v2 pids.max.
    pub pids_max: Option<u64>,
    /// cgroup v2 cpu.max as a share of one CPU in percent (100 = one whole CPU).
    pub cpu_max_percent: Option<u32>,
    /// Size of the call's /tmp (and of the sandbox home) tmpfs, in bytes.
    pub tmp_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            nofile: 4096,
            fsize_bytes: 8 << 30,
            memory_max_bytes: Some(4 << 30),
            pids_max: Some(1024),
            cpu_max_percent: None,
            tmp_size_bytes: 1 << 30,
        }
    }
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

    /// Checks what can be checked without touching the kernel: absolute paths, no `..`, no path
    /// that the overlay option syntax would misread, an argv that is not empty.
    pub fn validate(&self) -> Result<(), SandboxError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SandboxError::Plan("argv is empty".into()));
        }
        if self.argv.iter().any(|a| a.contains('\0')) {
            return Err(SandboxError::Plan("an argument contains a NUL byte".into()));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(SandboxError::Plan(format!(
                    "environment variable `{k}` is malformed"
                )));
            }
        }
        let mut paths: Vec<(&str, &Path)> = vec![
            ("cwd", &self.cwd),
            ("home", &self.home),
            ("project_path", &self.project_path),
        ];
        if self.shared_overlay && !matches!(self.workspace, WorkspaceMount::Overlay { .. }) {
            return Err(SandboxError::Plan(
                "a shared overlay needs an overlay workspace, not a bind".into(),
            ));
        }
        match &self.workspace {
            WorkspaceMount::Bind { source } => paths.push(("workspace source", source)),
            WorkspaceMount::ReadOnly { source } => {
                paths.push(("workspace source", source));
                // The real project is never writable from inside, not even a part of it.
                if let Some(p) = self
                    .extra_write
                    .iter()
                    .find(|p| p.starts_with(&self.project_path) || p.starts_with(source))
                {
                    return Err(SandboxError::Plan(format!(
                        "write path {} is inside the project {}, which this call sees read-only",
                        p.display(),
                        self.project_path.display()
                    )));
                }
            }
            WorkspaceMount::Overlay { lower, upper, work } => {
                for (what, p) in [
                    ("overlay lower", lower),
                    ("overlay upper", upper),
                    ("overlay work", work),
                ] {
                    paths.push((what, p));
                }
            }
        }
        if let Some(p) = &self.policy_file {
            paths.push(("policy_file", p));
            if !p.starts_with(&self.project_path) {
                return Err(SandboxError::Plan(format!(
                    "policy file {} is not inside the project {}",
                    p.display(),
                    self.project_path.display()
                )));
            }
        }
        for p in &self.extra_read {
            paths.push(("extra read path", p));
        }
        for p in &self.extra_write {
            paths.push(("extra write path", p));
        }
        for s in &self.store_paths {
            paths.push(("store path source", &s.source));
            paths.push(("store path", &s.target));
            // Directly under the store: the bind must never cover the store itself or land
            // anywhere else in the tree.
            if s.target.parent() != Some(Path::new(STORE_DIR)) {
                return Err(SandboxError::Plan(format!(
                    "store path {} is not directly under {STORE_DIR}",
                    s.target.display()
                )));
            }
        }
        for (what, p) in paths {
            if !p.is_absolute() {
                return Err(SandboxError::Plan(format!(
                    "{what} {} is not absolute",
                    p.display()
                )));
            }
            if p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(SandboxError::Plan(format!(
                    "{what} {} contains `..`",
                    p.display()
                )));
            }
            if p.as_os_str().as_encoded_bytes().contains(&0) {
                return Err(SandboxError::Plan(format!("{what} contains a NUL byte")));
            }
            if p == Path::new("/") {
                return Err(SandboxError::Plan(format!("{what} is `/`")));
            }
        }
        if self.own_overlay == OwnOverlay::InMemory
            && (self.shared_overlay || !matches!(self.workspace, WorkspaceMount::Overlay { .. }))
        {
            return Err(SandboxError::Plan(
                "own_overlay = in_memory needs an overlay workspace the call mounts itself".into(),
            ));
        }
        if self.limits.tmp_size_bytes == 0 {
            return Err(SandboxError::Plan("limits.tmp_size_bytes is 0".into()));
        }
        Ok(())
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

/// Where a call's own overlay instance (one it mounts itself, not the session's shared one)
/// keeps the upper layer, which holds everything the call writes to the workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnOverlay {
    /// The workspace's upper and work directories on the host, synced like any other files: the
    /// work is reviewed (and applied) after the call.
    #[default]
    Durable,
    /// The same directories, mounted `volatile`: a workspace thrown away unreviewed whose later
    /// calls still read what this one wrote, so nothing needs to reach the disk. The mount leaves
    /// `work/incompat/volatile`, which the next mount of the same layers removes first.
    Volatile,
    /// A tmpfs of the call's own, made in its mount namespace and gone with it: the one call of a
    /// session whose workspace is thrown away (`chock exec` without `--keep`), whose writes are
    /// read by nobody after it. Nothing of the workspace is created or removed on a disk. Its
    /// size is the kernel's tmpfs default, half of the machine's memory; the pages count against
    /// the call's memory limit. The upper and work paths of [`WorkspaceMount::Overlay`] are not
    /// used and need not exist.
    InMemory,
}

/// Builds the common plan; every field can still be set directly on the result.
#[derive(Debug, Clone)]
pub struct PlanBuilder {
    plan: Plan,
    extra_env_names: Vec<String>,
}

impl PlanBuilder {
    fn new(argv: Vec<String>, workspace: WorkspaceMount, project_path: PathBuf) -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
        Self {
            plan: Plan {
                argv,
                cwd: project_path.clone(),
                env: Vec::new(),
                home,
                workspace,
                shared_overlay: false,
                own_overlay: OwnOverlay::Durable,
                project_path,
                policy_file: None,
                extra_read: Vec::new(),
                extra_write: Vec::new(),
                store_paths: Vec::new(),
                limits: Limits::default(),
                network: NetworkPlan::None,
                timeout: None,
                host_channel: false,
                shims: Vec::new(),
                shim_dirs: Vec::new(),
                kept: false,
            },
            extra_env_names: Vec::new(),
        }
    }

    /// Working directory inside the sandbox (default: the project path).
    pub fn cwd(mut self, cwd: PathBuf) -> Self {
        self.plan.cwd = cwd;
        self
    }

    /// The home directory path inside the sandbox (default: the host's `$HOME`).
    pub fn home(mut self, home: PathBuf) -> Self {
        self.plan.home = home;
        self
    }

    /// Whether an overlay workspace is the session's shared instance (see [`Plan::shared_overlay`]).
    pub fn shared_overlay(mut self, shared: bool) -> Self {
        self.plan.shared_overlay = shared;
        self
    }

    /// Where a call's own overlay instance keeps its writes ([`Plan::own_overlay`]).
    pub fn own_overlay(mut self, own: OwnOverlay) -> Self {
        self.plan.own_overlay = own;
        self
    }

    /// The policy file to bind read-only over itself.
    pub fn policy_file(mut self, path: Option<PathBuf>) -> Self {
        self.plan.policy_file = path;
        self
    }

    /// Extra read-only paths.
    pub fn extra_read(mut self, paths: Vec<PathBuf>) -> Self {
        self.plan.extra_read = paths;
        self
    }

    /// Extra read-write paths.
    pub fn extra_write(mut self, paths: Vec<PathBuf>) -> Self {
        self.plan.extra_write = paths;
        self
    }

    /// Nix store paths to show read-only ([`Plan::store_paths`]).
    pub fn store_paths(mut self, paths: Vec<StorePath>) -> Self {
        self.plan.store_paths = paths;
        self
    }

    /// Names of host variables the policy lets through, beyond [`ENV_ALLOWLIST`].
    pub fn pass_env(mut self, names: Vec<String>) -> Self {
        self.extra_env_names = names;
        self
    }

    /// Resource limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.plan.limits = limits;
        self
    }

    /// The network plan.
    pub fn network(mut self, network: NetworkPlan) -> Self {
        self.plan.network = network;
        self
    }

    /// Whether the call gets a channel to the host ([`Plan::host_channel`]).
    pub fn host_channel(mut self, on: bool) -> Self {
        self.plan.host_channel = on;
        self
    }

    /// Host programs bound over files of the tree ([`Plan::shims`]).
    pub fn shims(mut self, shims: Vec<Shim>) -> Self {
        self.plan.shims = shims;
        self
    }

    /// Wall-clock limit.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.plan.timeout = timeout;
        self
    }

    /// The plan, with the environment scrubbed from the current process's environment.
    pub fn build(self) -> Plan {
        let host: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        self.build_with_env(&host)
    }

    /// The plan, with the environment scrubbed from `host_env` (for tests and for a daemon that
    /// carries the client's environment).
    pub fn build_with_env(mut self, host_env: &[(String, String)]) -> Plan {
        let names: Vec<&str> = self.extra_env_names.iter().map(String::as_str).collect();
        self.plan.env = scrub_env(host_env, &names, &self.plan.home);
        self.plan
    }
}

/// The environment a call gets: [`ENV_ALLOWLIST`] plus `extra` names from `host`, and `HOME` set to
/// the sandbox home. `PATH` falls back to [`DEFAULT_PATH`]. `HOME` from the host never passes (it is
/// always the sandbox's).
pub fn scrub_env(host: &[(String, String)], extra: &[&str], home: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in host {
        let allowed = ENV_ALLOWLIST.contains(&k.as_str()) || extra.contains(&k.as_str());
        if allowed && k != "HOME" && !out.iter().any(|(o, _)| o == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    match out.iter_mut().find(|(k, _)| k == "PATH") {
        Some((_, v)) if !v.is_empty() => {}
        Some((_, v)) => *v = DEFAULT_PATH.to_string(),
        None => out.push(("PATH".into(), DEFAULT_PATH.into())),
    }
    out.push(("HOME".into(), home.to_string_lossy().into_owned()));
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn scrub_keeps_only_the_allowlist_and_sets_home() {
        let host = env(&[
            ("PATH", "/usr/bin"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("HOME", "/home/u"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
            ("LANG", "C.UTF-8"),
            ("CARGO_TERM_COLOR", "always"),
        ]);
        let out = scrub_env(&host, &["CARGO_TERM_COLOR"], Path::new("/home/u"));
        assert_eq!(
            out,
            env(&[
                ("CARGO_TERM_COLOR", "always"),
                ("HOME", "/home/u"),
                ("LANG", "C.UTF-8"),
                ("PATH", "/usr/bin"),
            ])
        );
    }

    #[test]
    fn scrub_supplies_a_path() {
        let out = scrub_env(&[], &[], Path::new("/h"));
        assert_eq!(out, env(&[("HOME", "/h"), ("PATH", DEFAULT_PATH)]));
    }

    #[test]
    fn plan_round_trips_through_json() {
        let plan = Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Overlay {
                lower: "/p".into(),
                upper: "/s/u".into(),
                work: "/s/w".into(),
            },
            "/p".into(),
        )
        .network(NetworkPlan::Proxy { port: 3128 })
        .timeout(Some(Duration::from_secs(5)))
        .build_with_env(&[]);
        let json = serde_json::to_string(&plan).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(plan, back);
    }

    #[test]
    fn validate_refuses_relative_and_dotdot_paths() {
        let mut plan = Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Bind {
                source: "/s".into(),
            },
            "/p".into(),
        )
        .build_with_env(&[]);
        assert!(plan.validate().is_ok());
        plan.extra_read = vec!["rel".into()];
        assert!(
            plan.validate()
                .unwrap_err()
                .to_string()
                .contains("not absolute")
        );
        plan.extra_read = vec!["/a/../b".into()];
        assert!(plan.validate().unwrap_err().to_string().contains(".."));
        plan.extra_read = vec![];
        // A store path is bound directly under the store, never over it or elsewhere.
        for (target, ok) in [
            ("/nix/store/abc-x", true),
            ("/nix/store", false),
            ("/nix/store/abc-x/bin", false),
            ("/etc/abc-x", false),
        ] {
            plan.store_paths = vec![StorePath {
                source: "/s/nix/store/abc-x".into(),
                target: target.into(),
            }];
            assert_eq!(plan.validate().is_ok(), ok, "{target}");
        }
        plan.store_paths = vec![];
        plan.policy_file = Some("/elsewhere/chock.toml".into());
        assert!(
            plan.validate()
                .unwrap_err()
                .to_string()
                .contains("not inside the project")
        );
    }
}
