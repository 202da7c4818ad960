//! `chock plugin`: the WebAssembly plugin tools a project's chock.toml pins (docs/plugins.md).
//!
//! - `list` shows every plugin: its file and pin, whether the bytes still match, each import with
//!   the act the table decides before linking it, and each tool with the decision a call gets.
//! - `test NAME` loads one plugin exactly as a session does (pin, compile, imports decided, tools
//!   listed in a store whose every door is closed) and shows its tools' definitions; it fails,
//!   naming the file, rule or import, when a session could not start it.
//!
//! Loading runs the plugin's `tools` export, and nothing else, under its own fuel, time and memory
//! limits with no capability linked to a door: nothing of the project or the network is reached.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chock_plugin::{Capability, Import, LoadedPlugin, PluginEngine, PluginError};
use chock_policy::PluginConfig;
use chock_policy::Policy;

use crate::exit::{BAD_INPUT, Exit, FAILURE, REFUSED};
use crate::say::say;

/// `chock plugin …`.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// List the pinned plugins, their imports' and tools' decisions.
    List {
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
    /// Load one plugin as a session would, and show its tools.
    Test {
        /// The plugin's name (`[plugins.NAME]`).
        name: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
}

pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::List { project } => list(&project),
        PluginCommand::Test { name, project } => test(&name, &project),
    }
}

fn bad_input(err: impl std::fmt::Display) -> anyhow::Error {
    Exit::new(BAD_INPUT, err.to_string()).into()
}

/// The exit status a plugin that cannot start gets: refused when the table refused an import,
/// a failure otherwise (a changed file, a compile error, a tool list it cannot give).
fn status_of(err: &PluginError) -> u8 {
    match err {
        PluginError::Denied { .. } => REFUSED,
        _ => FAILURE,
    }
}

fn engine() -> anyhow::Result<PluginEngine> {
    PluginEngine::shared().map_err(|e| Exit::new(FAILURE, e).into())
}

/// The plugin's lines: file, pin, limits, then its imports and tools (or why it does not start).
fn show(
    config: &PluginConfig,
    project: &Path,
    policy: &Policy,
    engine: &PluginEngine,
    detail: bool,
) -> Result<(), PluginError> {
    say!("{}", config.name);
    say!("  file:    {}", config.path.display());
    say!("  pin:     sha256 {}", config.sha256);
    say!(
        "  limits:  {} s, {} MiB, {} fuel, {} KiB of output",
        config.timeout.as_secs_f64(),
        config.memory_bytes >> 20,
        config.fuel,
        config.output_bytes >> 10
    );
    let plugin = match LoadedPlugin::load(engine, project, config, policy) {
        Ok(plugin) => plugin,
        Err(err) => {
            say!("  starts:  no: {err}");
            return Err(err);
        }
    };
    say!("  starts:  yes");
    let mut wasi: Vec<&str> = plugin
        .imports()
        .iter()
        .filter_map(|i| match i {
            Import::Wasi { name } => name.strip_prefix("wasi:"),
            _ => None,
        })
        .map(|name| name.split_once('@').map_or(name, |(base, _)| base))
        .collect();
    wasi.sort_unstable();
    if !wasi.is_empty() {
        say!("  wasi:    {} (Chock's own, no act)", wasi.join(", "));
    }
    for import in plugin.imports() {
        match import {
            Import::Chock { name, capability } => match capability.action(&config.name) {
                Ok(Some(action)) => {
                    let verdict = policy.decide(&action);
                    let per_call = match capability {
                        Capability::Fetch => ", each fetch decided as net.fetch.<host>",
                        _ => ", and again on each use",
                    };
                    say!(
                        "  import {name}: {} as `{action}` ({}){per_call}",
                        verdict.decision,
                        verdict.decided_by
                    );
                }
                Ok(None) => say!("  import {name}: grants nothing"),
                Err(e) => say!("  import {name}: cannot be an act: {e}"),
            },
            Import::Wasi { .. } => {}
            Import::Unsupported { name } => say!("  import {name}: not provided"),
        }
    }
    for tool in plugin.tools() {
        let verdict = policy.decide(&tool.action);
        // A session offers the model no tool the table denies outright (docs/plugins.md).
        let offered = if verdict.decision == chock_policy::Decision::Deny {
            "; not offered to the model"
        } else {
            ""
        };
        say!(
            "  tool {}: {} as `{}` ({}){offered}",
            tool.name,
            verdict.decision,
            tool.action,
            verdict.decided_by
        );
        if detail {
            say!("    {}", tool.description);
            say!("    input: {}", tool.input_schema);
        }
    }
    Ok(())
}

fn list(project: &Path) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(project).map_err(bad_input)?;
    if policy.plugins().is_empty() {
        say!("no plugins: add [plugins.NAME] with path and sha256 to chock.toml (docs/plugins.md)");
        return Ok(ExitCode::SUCCESS);
    }
    let engine = engine()?;
    for config in policy.plugins() {
        // A plugin that does not start is shown as such; the others are still listed.
        let _ = show(config, project, &policy, &engine, false);
    }
    Ok(ExitCode::SUCCESS)
}

fn test(name: &str, project: &Path) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(project).map_err(bad_input)?;
    let Some(config) = policy.plugins().iter().find(|p| p.name == name) else {
        let known: Vec<&str> = policy.plugins().iter().map(|p| p.name.as_str()).collect();
        return Err(bad_input(format!(
            "no plugin named {name} in chock.toml (pinned: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    match show(config, project, &policy, &engine()?, true) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => Err(Exit::new(status_of(&err), format!("plugin {name} does not start")).into()),
    }
}
