//! The project's dev shell: evaluated and built on the host by `nix print-dev-env` at the
//! session's first call (decided as `nix.devshell` and logged first), its exported variables the
//! calls' environment and its closure the only store paths they see.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_decide::Pipeline;
use chock_protocol::log::{CommandResult, CommandStatus, ToolCall};

use super::{NixError, check_closure, closure_of, run};
use crate::{Session, SessionError};

/// Variables of a dev shell that describe the build that computed it, not the shell: never
/// passed to a call (the list `nix develop` keeps apart too, and the sandbox's own HOME).
const NOT_THE_SHELLS: &[&str] = &[
    "BASHOPTS",
    "HOME",
    "NIX_BUILD_TOP",
    "NIX_ENFORCE_PURITY",
    "NIX_LOG_FD",
    "NIX_REMOTE",
    "PPID",
    "SHELL",
    "SHELLOPTS",
    "SSL_CERT_FILE",
    "TEMP",
    "TEMPDIR",
    "TERM",
    "TMP",
    "TMPDIR",
    "TZ",
    "UID",
];

/// The call id the dev shell's act is logged under.
const CALL_ID: &str = "nix-devshell";

/// A project's dev shell, as its calls get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevShell {
    /// Its exported variables, `PATH` among them (the call's own PATH is appended to it).
    pub env: Vec<(String, String)>,
    /// Every store path of its closure.
    pub closure: Vec<PathBuf>,
}

/// The flake output a project's dev shell is: `devShells.<system>.default`.
fn installable(project: &Path) -> String {
    format!(
        "path:{}#devShells.{}-linux.default",
        project.display(),
        std::env::consts::ARCH
    )
}

/// The exported variables of `nix print-dev-env --json`'s output.
fn exported(json: &[u8]) -> Result<Vec<(String, String)>, NixError> {
    let bad = |why: String| NixError::Output {
        what: "nix print-dev-env".into(),
        why,
    };
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
    let vars = value["variables"]
        .as_object()
        .ok_or_else(|| bad("no `variables` object".into()))?;
    Ok(vars
        .iter()
        .filter(|(name, _)| !NOT_THE_SHELLS.contains(&name.as_str()))
        .filter(|(_, v)| v["type"] == "exported")
        .filter_map(|(name, v)| Some((name.clone(), v["value"].as_str()?.to_string())))
        .collect())
}

/// Where a profile link leads in the store (its generation link, then the store path).
fn profile_target(profile: &Path) -> Result<PathBuf, NixError> {
    let mut at = profile.to_path_buf();
    for _ in 0..8 {
        if at.starts_with(chock_sandbox::STORE_DIR) {
            return Ok(at);
        }
        let next = std::fs::read_link(&at).map_err(|e| NixError::Output {
            what: "the dev shell's profile".into(),
            why: format!("{}: {e}", at.display()),
        })?;
        at = at.parent().unwrap_or(Path::new("/")).join(next);
    }
    Err(NixError::Output {
        what: "the dev shell's profile".into(),
        why: "does not lead into the store".into(),
    })
}

impl Session {
    /// Settles the project's dev shell, once per session, before its first call is planned:
    /// nothing when the project has no `flake.nix` or the host no nix (`chock doctor` says so);
    /// else `nix.devshell` is decided and logged, and only then is nix run, on the host, under
    /// the call's deadline and interrupt (`call_id`). A refusal or a failure is logged and the
    /// session goes on without a dev shell: the agent may be the one to fix the flake. An
    /// interrupt ends the call (`SessionError::Nix`) and leaves the shell to the next call.
    ///
    /// Async like the call it comes before: the decision is awaited on the caller's runtime
    /// ([`Pipeline::settle`]); only nix itself, a host process waited for, runs off the
    /// runtime's workers.
    pub(crate) async fn settle_devshell(
        &self,
        pipeline: &Pipeline,
        call_id: &str,
    ) -> Result<(), SessionError> {
        if self.nix.devshell.get().is_some() {
            return Ok(());
        }
        let _one = self.nix.settling.lock().await;
        if self.nix.devshell.get().is_some() {
            return Ok(());
        }
        let shell = self.devshell_now(pipeline, call_id).await?;
        let _ = self.nix.devshell.set(shell);
        Ok(())
    }

    async fn devshell_now(
        &self,
        pipeline: &Pipeline,
        call_id: &str,
    ) -> Result<Option<DevShell>, SessionError> {
        if !self.project.join("flake.nix").is_file() || super::find_nix().is_none() {
            return Ok(None);
        }
        let deadline = Duration::from_secs(self.policy.limits().timeout_secs);
        let dir = self.log.dir().join("nix");
        let profile = dir.join("devshell");
        let args: Vec<String> = vec![
            "print-dev-env".into(),
            "--json".into(),
            "--no-write-lock-file".into(),
            "--profile".into(),
            profile.display().to_string(),
            "--".into(),
            installable(&self.project),
        ];
        let program = super::find_nix().unwrap_or_default();
        self.log.record(
            Some(CALL_ID),
            ToolCall {
                tool: "nix".into(),
                input: None,
                argv: Some(
                    std::iter::once(program.display().to_string())
                        .chain(args.iter().cloned())
                        .collect(),
                ),
                cwd: Some(self.project.display().to_string()),
                action: Some("nix.devshell".into()),
                resolved: Some(program.display().to_string()),
            },
        )?;
        let action = chock_policy::Action::parse("nix.devshell")
            .map_err(|e| SessionError::Sandbox(chock_sandbox::SandboxError::Plan(e.to_string())))?;
        let detail = format!(
            "evaluate and build the project's dev shell ({}) with nix on the host",
            installable(&self.project)
        );
        let settled = pipeline.settle(Some(CALL_ID), &action, &detail).await?;
        if !settled.allowed() {
            let (by, reason) = crate::call::refused_words(&settled);
            self.log
                .record(Some(CALL_ID), CommandResult::Refused { by, reason })?;
            return Ok(None);
        }
        let started = Instant::now();
        let built = super::off_the_runtime(|| {
            self.build_devshell(&dir, &profile, &args, deadline, call_id)
        });
        match built {
            Ok((shell, bytes)) => {
                self.log.record(
                    Some(CALL_ID),
                    CommandResult::Ran {
                        status: CommandStatus::Exited(0),
                        exit_code: Some(0),
                        limits: serde_json::Value::Null,
                        duration_ms: u64::try_from(started.elapsed().as_millis())
                            .unwrap_or(u64::MAX),
                        stdout_bytes: bytes,
                        stderr_bytes: 0,
                        truncated: false,
                        checkpoint: None,
                    },
                )?;
                Ok(Some(shell))
            }
            Err(NixError::Log(e)) => Err(e.into()),
            Err(e) => {
                let interrupted = matches!(e, NixError::Interrupted { .. });
                self.log.record(
                    Some(CALL_ID),
                    CommandResult::Failed {
                        error: "nix".into(),
                        layer: None,
                        message: e.to_string(),
                    },
                )?;
                if interrupted {
                    // The call was interrupted: it ends here, and the next call tries again.
                    return Err(e.into());
                }
                Ok(None)
            }
        }
    }

    /// Runs `nix print-dev-env` and lists and checks the closure of what it built.
    fn build_devshell(
        &self,
        dir: &Path,
        profile: &Path,
        args: &[String],
        deadline: Duration,
        call_id: &str,
    ) -> Result<(DevShell, usize), NixError> {
        let nix = self.nix.nix(deadline)?.clone();
        std::fs::create_dir_all(dir).map_err(|e| NixError::Output {
            what: "the session's nix directory".into(),
            why: format!("{}: {e}", dir.display()),
        })?;
        let running = self.running.clone();
        let out = run::run(
            &nix.program,
            args,
            "building the dev shell",
            deadline,
            &|_| {},
            &|kill| running.register(call_id, chock_sandbox::Killer::new(kill)),
        )?;
        let env = exported(&out.stdout)?;
        let closure = closure_of(&nix, &[profile_target(profile)?], deadline)?;
        check_closure(&nix, &self.policy, &closure)?;
        Ok((DevShell { env, closure }, out.stdout.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_shells_exported_variables_are_kept() {
        let json = br#"{"variables":{
            "PATH":{"type":"exported","value":"/nix/store/a-x/bin"},
            "HOME":{"type":"exported","value":"/homeless-shelter"},
            "TMPDIR":{"type":"exported","value":"/tmp/nix-build"},
            "LINENO":{"type":"var","value":"73"},
            "arr":{"type":"array","value":["a"]},
            "GREETING":{"type":"exported","value":"hi"}}}"#;
        let mut env = exported(json).unwrap();
        env.sort();
        assert_eq!(
            env,
            vec![
                ("GREETING".to_string(), "hi".to_string()),
                ("PATH".to_string(), "/nix/store/a-x/bin".to_string()),
            ]
        );
    }
}
