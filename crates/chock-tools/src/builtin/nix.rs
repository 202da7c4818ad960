//! provision_program: the agent asks for one more program, built or fetched by nix on the host
//! (docs/nix.md). Each call is decided as `nix.build` before anything is built; the build's
//! progress is the call's live output; its closure is shown to every later command.

use std::sync::Arc;
use std::time::Duration;

use chock_log::LogError;
use chock_policy::{Action, ActionError};
use chock_protocol::live::{ToolDisplay, ToolKind, input_field};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::ToolOutput;
use crate::commands::live_output::OutputItem;
use crate::tool::{Access, Act, Effect, Tool, ToolContext};

/// provision_program's input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvisionInput {
    /// A nixpkgs attribute (`ripgrep`, built as `nixpkgs#ripgrep`) or a flake installable
    /// (`github:owner/repo#tool`, `path:/src/tool#default`).
    pub installable: String,
    /// Seconds the build may take (at most the policy's `[limits] timeout_secs`, the default).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_secs: Option<u64>,
}

/// What nix is asked to build: a bare attribute name is nixpkgs's.
fn installable_of(input: &ProvisionInput) -> String {
    let raw = input.installable.trim();
    if raw.contains('#') || raw.contains(':') || raw.starts_with('/') || raw.starts_with('.') {
        raw.to_string()
    } else {
        format!("nixpkgs#{raw}")
    }
}

/// `provision_program`: offered only where the table does not deny `nix.build` and the host has
/// nix.
#[derive(Debug)]
pub struct ProvisionProgram;

impl Tool for ProvisionProgram {
    type Input = ProvisionInput;

    fn name(&self) -> &str {
        "provision_program"
    }

    fn description(&self) -> &str {
        "Ask for one more program: a nixpkgs attribute (`ripgrep`) or a flake installable, built or \
fetched with nix on the host. Decided as nix.build. Once built, its closure is visible and its bin \
directory is on PATH from the next run_command on (running it is decided as exec.nix.store.<program>)."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn fixed_act(&self) -> Option<Action> {
        Action::parse("nix.build").ok()
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Provision `{}`", input_field(input, "installable")),
            ToolKind::Other,
        )
    }

    fn access(&self, input: &ProvisionInput) -> Result<Access, ActionError> {
        let installable = installable_of(input);
        Ok(Access::Acts(vec![Act::new(
            Action::parse("nix.build")?,
            format!(
                "build or fetch `{installable}` with nix on the host and show it to later commands"
            ),
        )]))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: ProvisionInput,
    ) -> Result<ToolOutput, LogError> {
        let installable = installable_of(&input);
        let item = Arc::new(OutputItem::new(
            format!("{}.output", cx.call_id),
            cx.decider.turn.load(std::sync::atomic::Ordering::Relaxed),
            cx.call_id,
            cx.decider.log.clone(),
            Arc::clone(cx.sink),
        ));
        let session = Arc::clone(cx.host.session());
        let (call_id, progress) = (cx.call_id.to_string(), Arc::clone(&item));
        let what = installable.clone();
        let timeout = input.timeout_secs.map(Duration::from_secs);
        // nix blocks: on a thread of the blocking pool, the turn awaits it (an interrupt kills
        // nix through the session's running calls, and this then returns).
        let built = tokio::task::spawn_blocking(move || {
            let line = |l: &str| {
                chock_session::OutputSink::write(
                    &*progress,
                    chock_session::Stream::Stderr,
                    format!("{l}\n").as_bytes(),
                );
            };
            session.provision(&what, &call_id, timeout, &line)
        })
        .await;
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                item.complete(false);
                return Ok(ToolOutput::error(format!("provisioning stopped: {e}")));
            }
        };
        item.complete(built.is_ok());
        Ok(match built {
            Ok(given) => {
                let outputs: Vec<String> = given
                    .outputs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                ToolOutput::ok(format!(
                    "built `{installable}`: {} ({} store paths in its closure). From the next \
                     run_command on they are visible and each output's bin directory is on PATH.",
                    outputs.join(", "),
                    given.closure.len()
                ))
            }
            Err(e) => ToolOutput::error(format!("provisioning `{installable}` failed: {e}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_attribute_is_nixpkgs() {
        let of = |s: &str| {
            installable_of(&ProvisionInput {
                installable: s.into(),
                timeout_secs: None,
            })
        };
        assert_eq!(of("ripgrep"), "nixpkgs#ripgrep");
        assert_eq!(of("path:/x#y"), "path:/x#y");
        assert_eq!(of("github:o/r"), "github:o/r");
    }
}
