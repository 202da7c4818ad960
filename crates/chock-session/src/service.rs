//! A long-lived confined process the host speaks to over its standard streams: an MCP server.
//! It is built by the same plan as a confined call ([`Session::plan_for`]: the policy file
//! read-only, the `[sandbox]` paths and limits, an environment from the allowlist) and started by
//! the same driver; only its standard streams are pipes both ways and it has no timeout of its
//! own (it lives as long as the session keeps it).
//!
//! What it sees at the project's path, and runs from (its working directory), is the **real
//! project, read-only** ([`WorkspaceMount::ReadOnly`]), never the session's workspace: it was
//! started from the person's configuration, so it runs what the person trusted, not what the
//! agent last wrote in its throwaway copy (which it does not see at all). It writes nothing of
//! the project; its own places are the caller's `extra_write` (its state directory, its caches).
//!
//! Nor does it see any other place the agent's commands write: the `[sandbox] write` paths are
//! not in its sandbox, and it does not start when a place it does see (the project, its `read`
//! and `cache` paths, its state, the system directories) contains one or lies inside one (an
//! `npx` cache the agent's `npm install` also writes would run the agent's package).
//!
//! Its network is the caller's to decide *before* it starts (chock-mcp settles
//! `mcp.<server>.network`): without that it gets no network at all, not even the egress proxy a
//! command would get; with it, each connection is then settled by the pipeline like a command's
//! (`net.connect.<host>.<port>`).

use std::fs::File;
use std::path::PathBuf;

use chock_broker::{CallProxy, PROXY_VARIABLES};
use chock_decide::Pipeline;
use chock_sandbox::{
    CallHandle, Killer, NetworkPlan, OwnOverlay, Plan, SandboxError, StdioMode, WorkspaceMount,
};

use crate::{CallOptions, Session, SessionError};

/// How to start a service.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// Its id in the log (each connection's decision is logged under it).
    pub call_id: String,
    /// Host paths it may read besides the policy's `[sandbox] read`.
    pub extra_read: Vec<PathBuf>,
    /// Host paths it may write (its state directory, its declared caches): the policy's
    /// `[sandbox] write` paths are the agent's, and not in a service's sandbox.
    pub extra_write: Vec<PathBuf>,
    /// Variables set in its environment after the allowlist (`XDG_STATE_HOME`, names the
    /// configuration passes, with their host values).
    pub env: Vec<(String, String)>,
    /// Whether it may reach the network through the broker (already decided by the caller).
    pub network: bool,
}

/// A running service: its three streams and, when it has the network, the proxy serving it.
/// It is held through its confiner's [`CallHandle`] and ended through it, never by a host pid
/// (a service confined somewhere else has none the host could signal). Dropping it kills the
/// service and its whole process tree (the handle's drop).
#[derive(Debug)]
pub struct Service {
    call: Box<dyn CallHandle>,
    killer: Killer,
    proxy: Option<CallProxy>,
    /// What the host writes to it.
    pub stdin: Option<File>,
    /// What it writes to the host.
    pub stdout: Option<File>,
    /// Its diagnostics.
    pub stderr: Option<File>,
}

impl Service {
    /// What kills it from anywhere, without waiting (an owner dropped outside any runtime).
    pub fn killer(&self) -> &Killer {
        &self.killer
    }

    /// Ends it: its whole process tree killed through its handle and waited for (every process
    /// of it is gone when this returns), then its proxy shut down (the connections' close
    /// records written).
    pub async fn stop(mut self) {
        self.killer.kill();
        let _ = self.call.wait().await;
        if let Some(proxy) = self.proxy.take() {
            proxy.shutdown().await;
        }
    }
}

impl Session {
    /// The plan a service started with `opts` would get (what `chock mcp test --verbose` could
    /// show, and what tests check).
    pub fn service_plan(&self, argv: &[String], opts: &ServiceOptions) -> Plan {
        let call = CallOptions {
            network: if opts.network {
                NetworkPlan::Proxy {
                    port: crate::PROXY_PORT,
                }
            } else {
                NetworkPlan::None
            },
            ..CallOptions::default()
        };
        let mut plan = self.plan_for(argv, &call);
        plan.timeout = None;
        plan.workspace = WorkspaceMount::ReadOnly {
            source: self.project.clone(),
        };
        plan.shared_overlay = false;
        plan.own_overlay = OwnOverlay::Durable;
        plan.cwd = self.project.clone();
        if !opts.network {
            // A command's plan gets the proxy when some row lets commands connect; a service
            // without `mcp.<server>.network` gets nothing.
            plan.network = NetworkPlan::None;
            plan.env
                .retain(|(name, _)| !PROXY_VARIABLES.contains(&name.as_str()));
        }
        // The agent's commands write the `[sandbox] write` paths: none of them is the service's.
        plan.extra_write.clone_from(&opts.extra_write);
        plan.extra_read.extend(opts.extra_read.iter().cloned());
        // The same rule as `[sandbox] env`'s: a key variable never reaches the process (the
        // caller refuses a table that names one; this keeps it out whatever the caller does).
        for (name, value) in opts
            .env
            .iter()
            .filter(|(n, _)| !self.withheld_env.contains(n))
        {
            plan.env.retain(|(n, _)| n != name);
            plan.env.push((name.clone(), value.clone()));
        }
        plan
    }

    /// Starts `argv` as a service, through the session's confiner like every call (prepared,
    /// then started with its standard streams piped both ways). The caller has decided and
    /// logged that it may start (and whether it has the network). Its proxy, if it has the
    /// network, is served on the caller's runtime.
    pub async fn spawn_service(
        &self,
        argv: &[String],
        opts: &ServiceOptions,
        pipeline: &Pipeline,
    ) -> Result<Service, SessionError> {
        if argv.is_empty() {
            return Err(SessionError::Sandbox(SandboxError::Plan(
                "no command given".into(),
            )));
        }
        let plan = self.service_plan(argv, opts);
        agent_writes_unseen(&plan, &self.policy.sandbox().write)?;
        // Its plan shares no overlay: the workspace is not in its sandbox.
        let confiner = self.confiner();
        let prepared = confiner.prepare(plan).await?;
        let mut call = confiner.start(prepared, StdioMode::Duplex, None).await?;
        let killer = call.killer()?;
        let proxy = call
            .take_egress()
            .map(|listener| {
                // A service carries out no push: nothing is granted beyond the table.
                let none = std::sync::Arc::new(crate::channel::Credentials::new());
                crate::egress::serve(
                    &tokio::runtime::Handle::current(),
                    pipeline,
                    &self.log,
                    &opts.call_id,
                    listener,
                    none,
                )
            })
            .transpose()?;
        Ok(Service {
            stdin: call.take_stdin(),
            stdout: call.take_stdout(),
            stderr: call.take_stderr(),
            call,
            killer,
            proxy,
        })
    }

    /// The session's directory (its log and workspace live there; a service's state directory
    /// too).
    pub fn dir(&self) -> &std::path::Path {
        self.log.dir()
    }
}

/// Refuses a service plan that would see a place the agent's commands write (`agent_writes`,
/// the `[sandbox] write` paths): the project, its read and write paths or the sandbox's base set
/// containing one of them or lying inside one (the one host path checker's rule).
fn agent_writes_unseen(plan: &Plan, agent_writes: &[PathBuf]) -> Result<(), SessionError> {
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    if let WorkspaceMount::ReadOnly { source } = &plan.workspace {
        seen.push(("the project", source.clone()));
    }
    seen.push(("the project", plan.project_path.clone()));
    seen.extend(plan.extra_read.iter().map(|p| ("its read path", p.clone())));
    seen.extend(
        plan.extra_write
            .iter()
            .map(|p| ("its write path", p.clone())),
    );
    seen.extend(
        chock_sandbox::BASE_HOST_DIRS
            .iter()
            .map(|d| ("a system directory", PathBuf::from(d))),
    );
    match chock_policy::sees_a_write_path(&seen, agent_writes) {
        Some((what, place, write)) => Err(SessionError::ServiceSeesAgentWrites {
            seen: format!("{what} {}", place.display()),
            write: write.to_path_buf(),
        }),
        None => Ok(()),
    }
}
