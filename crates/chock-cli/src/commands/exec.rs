//! `chock exec`: one command, run exactly as the agent's run_command tool runs it: decided by the
//! project's chock.toml, logged, confined with every layer, in the session's throwaway workspace.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chock_decide::ApprovalBroker;
use chock_sandbox::{ExitStatus, SandboxError};
use chock_session::{CallOptions, CallOutcome, Output, Session, SessionError, SessionOptions};

use super::exec_egress::TerminalAnswerer;
use super::exec_terminal::ExecTerminal;
use crate::exit::{self, Exit};
use crate::say::say_err;

/// What `chock exec` is, in its help and in `chock --help`.
pub const ABOUT: &str =
    "Run one command exactly as the agent's run_command tool would: confined, in a throwaway copy";

/// Arguments of `chock exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Kill the command and everything it started after this many seconds (default: the policy's
    /// `[limits] timeout_secs`).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Keep the session's workspace afterwards (for `chock diff` and `chock apply`).
    #[arg(long)]
    pub keep: bool,
    /// Say what happens: the session, the action and its decision, every mount.
    #[arg(long, short)]
    pub verbose: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn status_code(status: ExitStatus) -> u8 {
    match status {
        ExitStatus::Exited(c) => u8::try_from(c & 0xff).unwrap_or(exit::FAILURE),
        ExitStatus::Signaled(s) => u8::try_from((128 + s) & 0xff).unwrap_or(exit::FAILURE),
        ExitStatus::TimedOut => exit::TIMED_OUT,
    }
}

/// Where `program` (a bare name) is on the host's PATH, for a command the sandbox does not show
/// (`cargo` in `~/.cargo/bin`, which no call sees unless `[sandbox] read` names it): the host path,
/// and the exact `[sandbox]` row that would show its directory (with `~/` for a directory in the
/// home, as the policy file writes it).
fn host_location(program: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let (dir, found) = std::env::split_paths(&path).find_map(|dir| {
        let candidate = dir.join(program);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some((dir, candidate))
    })?;
    let row = match &home {
        Some(h) if dir != *h && dir.starts_with(h) => {
            format!("~/{}", dir.strip_prefix(h).ok()?.display())
        }
        _ => dir.display().to_string(),
    };
    let mut text = format!(
        "`{program}` is {} on the host, a directory the sandbox does not show; this row in \
         chock.toml would show it:\n  [sandbox]\n  read = [\"{row}\"]",
        found.display()
    );
    if let Ok(real) = found.canonicalize()
        && !real.starts_with(&dir)
    {
        text.push_str(&format!(
            "\n  (it links to {}: that directory must be shown too)",
            real.display()
        ));
    }
    Some(text)
}

/// Makes the command's one confined call on the one runtime of the command, made here (a
/// multi-threaded one: the call's egress proxy is served on it, and its decision may wait on the
/// terminal on its blocking pool).
#[allow(
    clippy::disallowed_methods,
    reason = "`chock exec`'s one runtime, made and driven at the binary's edge"
)]
fn call(
    session: &Session,
    command: &[String],
    opts: &CallOptions,
    pipeline: &chock_decide::Pipeline,
) -> anyhow::Result<Result<chock_session::CallResult, SessionError>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let result = runtime.block_on(session.confined_call_async(command, opts, pipeline));
    // A question still open on the terminal (a connection asked as the command ended) is not
    // waited for: nobody answered it, a refusal.
    runtime.shutdown_background();
    Ok(result)
}

pub fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let ExecArgs {
        project,
        timeout,
        keep,
        verbose,
        command,
    } = args;
    let project = match project {
        Some(p) => p,
        None => std::env::current_dir().context("the current directory")?,
    };
    let header = chock_log::SessionHeader {
        command: Some("exec".into()),
        ..Default::default()
    };
    let session = match Session::open(
        &project,
        SessionOptions {
            header,
            // Without --keep the workspace is removed at the end, never reviewed: no base commit
            // or checkpoints are written for it (the call is confined the same).
            scratch: !keep,
            // One call: its own sandbox mounts the workspace overlay (no helper process), and
            // without --keep its writes stay in memory.
            calls: chock_session::Calls::One,
            // git inside the call goes through the shim installed beside `chock`.
            git_shim: chock_session::git_shim::installed(),
            ..SessionOptions::default()
        },
    ) {
        Ok(s) => s,
        Err(SessionError::Policy(e)) => {
            return Err(Exit::new(exit::BAD_INPUT, e.to_string()).into());
        }
        Err(e @ SessionError::Project { .. }) => {
            return Err(Exit::new(exit::BAD_INPUT, e.to_string()).into());
        }
        Err(e) => return Err(e).context("opening the session"),
    };
    // With a terminal, the person who answers the command's own ask also answers its connections'
    // asks, and the command's output goes through the terminal's hold (held back while a question is
    // open); without one, a connection's ask refuses and an ask-only table gives no proxy.
    let terminal = (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
        .then(ExecTerminal::open)
        .flatten()
        .map(Arc::new);
    let opts = CallOptions {
        timeout: timeout.map(Duration::from_secs),
        output: terminal
            .as_ref()
            .map_or(Output::Stream, |t| Output::StreamTo(t.output())),
        capture_limit: 64 << 10,
        ask_connections: terminal.is_some(),
        ..CallOptions::default()
    };
    if verbose {
        let plan = session.plan_for(&command, &opts);
        say_err!(
            "chock: session {} ({})",
            session.log().id().as_str(),
            session.log().dir().display()
        );
        say_err!(
            "chock: environment: {}",
            plan.env
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        match chock_sandbox::describe_mounts(&plan) {
            Ok(mounts) => mounts.iter().for_each(|m| say_err!("chock: mount: {m}")),
            Err(e) => say_err!("chock: mount: {e}"),
        }
    }
    // The one decision pipeline settles the command and each of its connections; the person at
    // the terminal (if any) is its one answerer.
    let mut broker = ApprovalBroker::new();
    if let Some(t) = &terminal {
        broker = broker.with(Arc::new(TerminalAnswerer::new(Arc::clone(t))));
    }
    let pipeline = session.pipeline(broker);
    let result = call(&session, &command, &opts, &pipeline)?;
    let session_dir = session.log().dir().to_path_buf();
    let closed = session.close(keep);
    let code = match result {
        Ok(r) => {
            if verbose {
                say_err!(
                    "chock: {} {} -> {}",
                    r.call_id,
                    r.action,
                    r.decision.as_str()
                );
            }
            match r.outcome {
                CallOutcome::Refused { by, reason } => {
                    if r.action == "exec.unparsed" {
                        say_err!(
                            "chock: `{}` has no class: it is not on the sandbox's PATH, or its path holds `..` or shell syntax",
                            command[0]
                        );
                        let program = command[0].rsplit('/').next().unwrap_or(&command[0]);
                        if let Some(t) = chock_policy::toolchains::toolchain_for_program(program) {
                            crate::say::err_block(format_args!(
                                "chock: `{program}` comes with the `{t}` toolchain; this row in \
                                 chock.toml would show it (or run `chock init`):\n  [sandbox]\n  \
                                 toolchains = [\"{t}\"]"
                            ));
                        } else if let Some(hint) = host_location(&command[0]) {
                            crate::say::err_block(format_args!("chock: {hint}"));
                        }
                    }
                    if r.decision == chock_policy::Decision::Deny {
                        say_err!("chock: refused `{}`: {reason} ({})", r.action, r.decided_by);
                    } else {
                        say_err!(
                            "chock: refused `{}`: {reason} (asked because {} says {}; answered by {by})",
                            r.action,
                            r.decided_by,
                            r.decision.as_str()
                        );
                    }
                    exit::REFUSED
                }
                CallOutcome::Ran { outcome, .. } => {
                    if let Some(note) = outcome.filter_note() {
                        say_err!("chock: {note}");
                    }
                    if outcome.status == ExitStatus::TimedOut {
                        say_err!(
                            "chock: timed out after {:.1}s; every process of the call was killed",
                            outcome.duration.as_secs_f64()
                        );
                    }
                    if verbose {
                        say_err!(
                            "chock: {:?} in {:?}; limits: {}",
                            outcome.status,
                            outcome.duration,
                            serde_json::to_string(&outcome.limits).unwrap_or_default()
                        );
                    }
                    status_code(outcome.status)
                }
            }
        }
        Err(SessionError::Sandbox(e @ SandboxError::Layer { .. })) => {
            // Its hint is a line of its own.
            crate::say::err_block(format_args!("chock: {e}"));
            exit::LAYER_MISSING
        }
        Err(SessionError::Sandbox(SandboxError::Exec {
            program,
            reason,
            not_found,
        })) => {
            say_err!("chock: {program}: {reason}");
            if not_found {
                exit::NOT_FOUND
            } else {
                exit::NOT_EXECUTABLE
            }
        }
        Err(e) => return Err(e).context("running the command"),
    };
    closed.context("closing the session")?;
    if keep {
        say_err!("chock: workspace kept in {}", session_dir.display());
    }
    crate::say::flush_passthrough();
    Ok(ExitCode::from(code))
}
