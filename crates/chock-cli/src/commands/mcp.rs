//! `chock mcp`: the MCP servers a project and the person configure (docs/mcp.md).
//!
//! - `list` starts nothing: each server, where it comes from, its trust state, and the tools
//!   approved for it with the decision each call would get from the table.
//! - `test NAME` starts one trusted server in a scratch session (confined, nobody to ask: a
//!   network question is a refusal; an HTTP one reached through the broker, its destination
//!   decided by the table alone), lists its tools with their pin and decision, and stops it.
//! - `trust NAME` shows a server's exact definition and the files its command line names in the
//!   project (each pinned by content), asks the person (a terminal, or `--yes`), records the
//!   hashes in Chock's data directory and pins the tools it lists now.
//!
//! Trust is decided here and nowhere else: a session never asks to trust a server mid-start (it
//! logs the refusal with this command's name), so a repository cannot time a question to catch a
//! hurried yes.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use chock_config::config::Config;
use chock_decide::ApprovalBroker;
use chock_mcp::{Configured, McpHub, PinState, StartContext, TrustStore};
use chock_policy::Policy;
use chock_policy::mcp::Transport;
use chock_session::{Session, SessionOptions};

use crate::exit::{BAD_INPUT, Exit, FAILURE, REFUSED};
use crate::say::{say, say_err};

/// `chock mcp …`.
#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// List the configured servers, their trust state and their approved tools' decisions.
    List {
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
    /// Start one server (confined, in a scratch session), list its tools and stop it.
    Test {
        /// The server's name (`[mcp.servers.NAME]`).
        name: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
    /// Review and trust a server's exact definition, and pin the tools it lists now.
    Trust {
        /// The server's name.
        name: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// Trust without asking (the definition is still printed).
        #[arg(long)]
        yes: bool,
    },
    /// Authorize Chock at a streamable HTTP server through OAuth in the browser; the token is
    /// kept in the keyring (else a 0600 file) and never printed.
    Login {
        /// The server's name.
        name: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
        /// A client ID registered beforehand with the authorization server (else the server's
        /// dynamic registration).
        #[arg(long)]
        client_id: Option<String>,
    },
    /// Forget the token stored for a streamable HTTP server.
    Logout {
        /// The server's name.
        name: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
}

pub fn run(cmd: McpCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        McpCommand::List { project } => list(&project),
        McpCommand::Test { name, project } => test(&name, &project),
        McpCommand::Trust { name, project, yes } => trust(&name, &project, yes),
        McpCommand::Login {
            name,
            project,
            client_id,
        } => super::mcp_login::login(&name, &project, client_id),
        McpCommand::Logout { name, project } => super::mcp_login::logout(&name, &project),
    }
}

fn bad_input(err: impl std::fmt::Display) -> anyhow::Error {
    Exit::new(BAD_INPUT, err.to_string()).into()
}

/// The servers configured for `project`, the policy, and the trust file.
pub(crate) fn load(project: &Path) -> anyhow::Result<(Vec<Configured>, Policy, TrustStore)> {
    let config = Config::load().map_err(bad_input)?;
    let policy = Policy::load(project).map_err(bad_input)?;
    let servers = chock_mcp::configured(
        &policy,
        project,
        &config.mcp_servers,
        config.source.as_deref(),
    );
    let path = chock_mcp::default_trust_path().map_err(bad_input)?;
    let trust = TrustStore::open(&path).map_err(bad_input)?;
    Ok((servers, policy, trust))
}

pub(crate) fn find<'a>(servers: &'a [Configured], name: &str) -> anyhow::Result<&'a Configured> {
    servers
        .iter()
        .find(|s| s.def.name == name)
        .ok_or_else(|| bad_input(chock_mcp::McpError::Unknown(name.to_string())))
}

fn transport_words(server: &Configured) -> String {
    match &server.def.transport {
        Transport::Stdio { command, args } => {
            let mut words = vec![command.clone()];
            words.extend(args.iter().cloned());
            format!("stdio: {}", words.join(" "))
        }
        Transport::Http { url } => format!("http: {url}"),
        Transport::Sse { url } => format!("sse: {url}"),
    }
}

/// Where the path is, relative to the project when inside it (so output is the same anywhere).
fn shown(path: &Path, project: &Path) -> String {
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    path.strip_prefix(&project)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

fn list(project: &Path) -> anyhow::Result<ExitCode> {
    let (servers, policy, trust) = load(project)?;
    if servers.is_empty() {
        say!("no MCP servers: add [mcp.servers.NAME] to chock.toml or config.toml (docs/mcp.md)");
        return Ok(ExitCode::SUCCESS);
    }
    for server in &servers {
        let name = &server.def.name;
        let state = trust.state(&server.origin, name, &server.hash);
        let state = match (state, files_of(server)) {
            (chock_mcp::TrustState::Trusted, Ok(Some(files))) => trust
                .files_changed(&server.origin, name, &files.pinned)
                .map_or_else(|| state.word().to_string(), |c| c.to_string()),
            (chock_mcp::TrustState::Trusted, Err(e)) => e.to_string(),
            _ => state.word().to_string(),
        };
        say!("{name}");
        say!(
            "  from:    {} ({})",
            server.origin.word(),
            shown(Path::new(&server.file_words()), project)
        );
        say!("  how:     {}", transport_words(server));
        say!("  trust:   {state}");
        match &server.def.transport {
            Transport::Stdio { .. } => {
                let network = chock_policy::Action::mcp_network(name).map(|a| policy.decide(&a));
                if let Ok(verdict) = network {
                    say!("  network: {} ({})", verdict.decision, verdict.decided_by);
                }
            }
            // The host reaches it; each connection is this act, through the broker.
            Transport::Http { url } | Transport::Sse { url } => {
                match chock_mcp::destination_action(url) {
                    Some(action) => {
                        let verdict = policy.decide(&action);
                        say!(
                            "  reached: {} as `{action}` ({})",
                            verdict.decision,
                            verdict.decided_by
                        );
                    }
                    None => say!("  reached: never (`{url}` names no host)"),
                }
            }
        }
        let tools = trust.pinned_tools(&server.origin, name);
        if tools.is_empty() {
            say!("  tools:   none approved yet (`chock mcp test {name}` lists them)");
        }
        for tool in tools {
            match chock_mcp::names::tool_action(name, &tool) {
                Ok(action) => {
                    let verdict = policy.decide(&action);
                    say!(
                        "  tool {tool}: {} as `{action}` ({})",
                        verdict.decision,
                        verdict.decided_by
                    );
                }
                Err(e) => say!("  tool {tool}: cannot be an act: {e}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a project's stdio server's command line names in the project (its files, pinned when it
/// is trusted and checked at every start); `None` for any other server.
fn files_of(server: &Configured) -> Result<Option<chock_mcp::ProjectFiles>, chock_mcp::McpError> {
    match &server.origin {
        chock_mcp::Origin::Project { project, .. } => {
            chock_mcp::files::project_files(&server.def, project).map(Some)
        }
        _ => Ok(None),
    }
}

/// A scratch session over `project` (its workspace is removed when it closes), withholding the
/// key variables of the person's configuration as a run's session does: a server's `env` naming
/// one is refused here too.
pub(crate) fn scratch(project: &Path) -> anyhow::Result<Session> {
    let config = Config::load().map_err(bad_input)?;
    Session::open(
        project,
        SessionOptions {
            withheld_env: config.key_env_names(),
            header: chock_log::SessionHeader {
                command: Some("mcp".into()),
                ..Default::default()
            },
            scratch: true,
            ..SessionOptions::default()
        },
    )
    .map_err(bad_input)
}

/// Starts `server` in a scratch session, prints its tools, stops it.
fn start_and_show(
    project: &Path,
    server: &Configured,
    trust: TrustStore,
    trusting: bool,
) -> anyhow::Result<ExitCode> {
    let session = scratch(project)?;
    let pipeline = session.pipeline(ApprovalBroker::new());
    let cx = StartContext {
        pipeline: pipeline.clone(),
        sampler: None,
        trust: Arc::new(Mutex::new(trust)),
        trusting,
        network: chock_broker::BrokerConfig::default(),
        browser: None,
        sign_in_transport: None,
    };
    // The servers run on this command's runtime, and are stopped on it before it goes.
    let code = super::block_on(async {
        let mut hub = McpHub::start(&session, std::slice::from_ref(server), &cx)
            .await
            .map_err(|e| Exit::new(FAILURE, e.to_string()))?;
        let code = show(&hub, &pipeline);
        hub.stop("chock mcp is done").await;
        Ok::<u8, anyhow::Error>(code)
    })??;
    let _ = session.close(false);
    Ok(ExitCode::from(code))
}

/// Says how each started server stands (its tools, their decisions and pins), or why the one
/// that did not start did not; the exit status.
fn show(hub: &McpHub, pipeline: &chock_decide::Pipeline) -> u8 {
    if let Some((_, err)) = hub.failures().first() {
        let status = if chock_mcp::server::is_untrusted(err).is_some() {
            REFUSED
        } else {
            FAILURE
        };
        say_err!("chock: {err}");
        status
    } else {
        for running in hub.servers() {
            match &running.configured().def.transport {
                Transport::Stdio { .. } => say!(
                    "{}: started confined ({}network)",
                    running.name(),
                    if running.has_network() { "" } else { "no " }
                ),
                Transport::Http { url } | Transport::Sse { url } => say!(
                    "{}: reached at {url} through the broker (each connection decided as `net.connect`)",
                    running.name()
                ),
            }
            for listed in running.tools() {
                let decision = McpHub::decision_for(pipeline, &listed.def);
                let pin = match &listed.pin {
                    PinState::Pinned => "approved".to_string(),
                    PinState::Changed { pinned: None } => "new since trusted: refused".to_string(),
                    PinState::Changed { pinned: Some(_) } => {
                        "changed since approved: refused".to_string()
                    }
                };
                let floor = listed
                    .def
                    .annotation_floor()
                    .map(|(_, why)| format!("; stricter: {why}"))
                    .unwrap_or_default();
                say!(
                    "  tool {}: {decision} as `{}` ({pin}{floor})",
                    listed.def.name,
                    listed.def.action
                );
            }
        }
        0
    }
}

fn test(name: &str, project: &Path) -> anyhow::Result<ExitCode> {
    let (servers, _, trust) = load(project)?;
    let server = find(&servers, name)?.clone();
    start_and_show(project, &server, trust, false)
}

fn trust(name: &str, project: &Path, yes: bool) -> anyhow::Result<ExitCode> {
    let (servers, _, trust) = load(project)?;
    let server = find(&servers, name)?.clone();
    let def = &server.def;
    say!(
        "MCP server `{name}` from {} ({})",
        server.origin.word(),
        shown(Path::new(&server.file_words()), project)
    );
    say!("  how:      {}", transport_words(&server));
    say!(
        "  env:      {}",
        if def.env.is_empty() {
            "(none)".to_string()
        } else {
            def.env.join(", ")
        }
    );
    let paths = |p: &[PathBuf]| {
        if p.is_empty() {
            "(none)".to_string()
        } else {
            p.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    say!("  reads:    {}", paths(&def.read));
    say!("  caches:   {}", paths(&def.cache));
    say!("  sha256:   {}", server.hash);
    if let Some(files) = files_of(&server).map_err(bad_input)? {
        if files.pinned.is_empty() && files.unpinned.is_empty() {
            say!("  files:    (none in the project)");
        }
        for (word, pin) in &files.pinned {
            say!("  file:     {word} {pin}");
        }
        for (word, why) in &files.unpinned {
            say!("  unpinned: {word} ({why})");
        }
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Exit::new(
                REFUSED,
                "not trusted: nobody to ask (run it at a terminal, or pass --yes after reading the definition)",
            )
            .into());
        }
        crate::say::ask(format_args!(
            "Trust this exact definition and start it confined to list its tools? [y/N] "
        ));
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            return Err(Exit::new(REFUSED, "not trusted").into());
        }
    }
    start_and_show(project, &server, trust, true)
}
