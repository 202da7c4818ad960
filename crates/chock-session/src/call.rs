//! What a confined call is made of: its options, its result, its plan and its class. The call
//! itself (classify → decide → log the decision (durable) → sandbox → log the result) is made in
//! one place, awaited: `call_async.rs`.

use std::path::PathBuf;
use std::time::Duration;

use chock_decide::{Outcome as Settlement, RefusedBy, Settled};
use chock_policy::{Decision, LimitsConfig};
use chock_protocol::log::CommandStatus;
use chock_sandbox::{ExitStatus, Limits, NetworkPlan, Outcome, Plan, WorkspaceMount};

use crate::Session;
use crate::call_output::Output;
use crate::classify::ExecContext;

/// How to run one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Wall-clock limit (default: the policy's `[limits] timeout_secs`).
    pub timeout: Option<Duration>,
    /// Working directory inside the sandbox: relative to the project, or absolute inside it.
    pub cwd: Option<PathBuf>,
    /// Where the command's output goes (it is captured in every case).
    pub output: Output,
    /// How many bytes of each stream to keep.
    pub capture_limit: usize,
    /// The network asked for; the call gets the proxy anyway when the table may let it connect
    /// (see `ask_connections`).
    pub network: NetworkPlan,
    /// The call's id in the log (the agent passes its tool-use id); default `call-<n>`.
    pub call_id: Option<String>,
    /// Whether a connection the table puts to a question may be asked about (through the call's
    /// pipeline, when it has someone to ask): then rows that only ask give the call the proxy
    /// too. `false`, or nobody to ask: such a connection is refused and only allowing rows give
    /// the call a proxy.
    pub ask_connections: bool,
    /// Hand the call, once started, to this keeper ([`crate::Keep`]): the command outlives this
    /// process, and its output and end come through the keeper. A confiner that cannot hand a
    /// call over keeps it here, as without.
    pub keep: Option<crate::Keeping>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: None,
            cwd: None,
            output: Output::Capture,
            capture_limit: 1 << 20,
            network: NetworkPlan::None,
            call_id: None,
            ask_connections: true,
            keep: None,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The policy or a person refused: nothing ran.
    Refused {
        /// Who refused, in words: the rule, the person or reviewer, or `chock`.
        by: String,
        /// Why, in words.
        reason: String,
    },
    /// The command ran.
    Ran {
        /// How it ended, and the limits it ran under.
        outcome: Outcome,
        /// Its standard output, up to the capture limit.
        stdout: Vec<u8>,
        /// Its standard error, up to the capture limit.
        stderr: Vec<u8>,
        /// Whether either stream went past the capture limit and was cut.
        truncated: bool,
    },
}

/// The result of [`Session::confined_call_async`].
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The call's id in the log.
    pub call_id: String,
    /// The act the command was classified as (`exec.<class>.<program>`).
    pub action: String,
    /// What the table said of the act.
    pub decision: Decision,
    /// Which rule decided it, in words ("chock.toml:12 (rule `exec.*`)").
    pub decided_by: String,
    /// How the pipeline settled the act (who allowed or refused it).
    pub settled: Settled,
    /// Whether it ran, and what came of it.
    pub outcome: CallOutcome,
}

/// Who refused and why, in words, for [`CallOutcome::Refused`].
pub(crate) fn refused_words(settled: &Settled) -> (String, String) {
    match &settled.outcome {
        Settlement::Refused {
            by: RefusedBy::Table,
            ..
        } => (settled.rule.clone(), "the policy denies it".to_string()),
        Settlement::Refused {
            by: RefusedBy::Person { name } | RefusedBy::Reviewer { name },
            reason,
        } => (
            name.clone(),
            if reason.is_empty() {
                "answered no".to_string()
            } else {
                reason.clone()
            },
        ),
        Settlement::Refused {
            by: RefusedBy::Harness,
            reason,
        } => ("chock".to_string(), reason.clone()),
        Settlement::Unanswered { .. } | Settlement::Allowed { .. } => (
            "nobody".to_string(),
            "nobody answered: a refusal".to_string(),
        ),
    }
}

pub(crate) fn command_status(status: ExitStatus) -> CommandStatus {
    match status {
        ExitStatus::Exited(code) => CommandStatus::Exited(code),
        ExitStatus::Signaled(signal) => CommandStatus::Signaled(signal),
        ExitStatus::TimedOut => CommandStatus::TimedOut,
    }
}

/// The sandbox limits for a policy's `[limits]`.
pub(crate) fn limits_from(cfg: &LimitsConfig) -> Limits {
    const MIB: u64 = 1 << 20;
    Limits {
        nofile: cfg.open_files,
        fsize_bytes: cfg.file_size_mb.saturating_mul(MIB),
        memory_max_bytes: Some(cfg.memory_mb.saturating_mul(MIB)),
        pids_max: Some(cfg.pids),
        cpu_max_percent: Some(u32::try_from(cfg.cpu_percent).unwrap_or(u32::MAX)),
        tmp_size_bytes: cfg.tmp_size_mb.saturating_mul(MIB),
    }
}

impl Session {
    /// The plan the sandbox would get for `argv` (also what `chock exec --verbose` prints).
    pub fn plan_for(&self, argv: &[String], opts: &CallOptions) -> Plan {
        self.plan_asking(argv, opts, opts.ask_connections)
    }

    pub(crate) fn plan_asking(&self, argv: &[String], opts: &CallOptions, can_ask: bool) -> Plan {
        let sandbox = self.policy.sandbox();
        let limits = self.policy.limits();
        let cwd = match &opts.cwd {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => self.project.join(c),
            None => self.project.clone(),
        };
        let timeout = opts
            .timeout
            .or(Some(Duration::from_secs(limits.timeout_secs)));
        let mut plan = Plan::builder(argv.to_vec(), self.workspace.mount(), self.project.clone())
            .shared_overlay(self.confiner.overlay().is_some())
            .own_overlay(self.own_overlay)
            .cwd(cwd)
            .policy_file(self.policy.project_file().map(PathBuf::from))
            .extra_read(sandbox.read.clone())
            .extra_write(sandbox.write.clone())
            .pass_env(
                sandbox
                    .env
                    .iter()
                    .filter(|name| !self.withheld_env.contains(name))
                    .cloned()
                    .collect(),
            )
            .limits(limits_from(limits))
            .network(crate::egress::network_for(
                &self.policy,
                opts.network,
                can_ask,
                self.git.as_ref().is_some_and(|g| g.host_dir().is_some()),
            ))
            .store_paths(self.nix.store_paths())
            .timeout(timeout)
            .build();
        // A toolchain's per-project cache: the tool is pointed at this project's own copy (a
        // `write` path above), whatever the host's variable says.
        for (name, dir) in &sandbox.set_env {
            plan.env.retain(|(n, _)| n != name);
            plan.env.push((name.clone(), dir.display().to_string()));
        }
        self.nix.apply_env(&mut plan);
        crate::egress::point_at_proxy(&mut plan);
        if let Some(git) = &self.git {
            git.apply(&mut plan);
        }
        plan
    }

    pub(crate) fn classify(&self, plan: &Plan) -> crate::classify::Classified {
        let layers: Vec<PathBuf> = match &plan.workspace {
            WorkspaceMount::Overlay { upper, .. } => vec![upper.clone()],
            WorkspaceMount::Bind { source } => vec![source.clone()],
            // Nothing a call writes lands there.
            WorkspaceMount::ReadOnly { .. } => Vec::new(),
        };
        let extra: Vec<PathBuf> = plan
            .extra_read
            .iter()
            .chain(&plan.extra_write)
            .cloned()
            .collect();
        let devshell: Vec<PathBuf> = self
            .nix
            .devshell()
            .map(|d| d.closure.clone())
            .unwrap_or_default();
        let ctx = ExecContext {
            project: &self.project,
            workspace_layers: &layers,
            extra: &extra,
            devshell: &devshell,
            store: self.nix.store_dir(),
            path: plan.env_var("PATH").unwrap_or(chock_sandbox::DEFAULT_PATH),
            cwd: &plan.cwd,
        };
        ctx.classify(&plan.argv[0])
    }
}

impl Session {
    /// Writes, once per session, that the socket index fell back to a walk per call (it only
    /// matters to a call with declared paths).
    pub(crate) fn note_socket_walks(&self, plan: &Plan) {
        if plan.extra_read.is_empty() && plan.extra_write.is_empty() {
            return;
        }
        let Some(why) = self.confiner.sockets().degraded() else {
            return;
        };
        if !self
            .sockets_degraded_noted
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let _ = self
                .log
                .record(None, chock_protocol::log::Note::SocketIndexDegraded { why });
        }
    }
}
