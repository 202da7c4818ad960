//! The builder of the common plan: a bound or overlaid project, the host's environment scrubbed,
//! the default limits, no network and no timeout, each changed by a call of its own.

use std::path::PathBuf;
use std::time::Duration;

use super::{Limits, NetworkPlan, OwnOverlay, Plan, Shim, StorePath, WorkspaceMount, scrub_env};

/// Builds the common plan; every field can still be set directly on the result.
#[derive(Debug, Clone)]
pub struct PlanBuilder {
    plan: Plan,
    extra_env_names: Vec<String>,
}

impl PlanBuilder {
    pub(super) fn new(argv: Vec<String>, workspace: WorkspaceMount, project_path: PathBuf) -> Self {
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

    /// Names of host variables the policy lets through, beyond
    /// [`ENV_ALLOWLIST`](super::ENV_ALLOWLIST).
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
