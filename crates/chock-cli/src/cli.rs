//! Every command's tree, parsed by clap and dispatched: what `chock-full` runs (and `chock`, for
//! everything but `exec`, by handing over to it: front.rs).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::say::say_err;
use crate::{commands, exit, front};

/// Chock: a sandbox-first AI coding harness.
#[derive(Debug, Parser)]
#[command(name = "chock", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// A task, given after `--` (`chock -- fix the parser`). A first word that is not a command is
    /// refused, so a typo never becomes a task that spends money.
    #[arg(last = true)]
    task: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent on a task (from the arguments, or standard input).
    Run(commands::run::RunArgs),
    #[command(about = commands::exec::ABOUT)]
    Exec(commands::exec::ExecArgs),
    /// Write a first chock.toml for this project: the toolchains it uses that this host has,
    /// and the registry rules a first session may want. Never overwrites one.
    Init(commands::init::InitArgs),
    /// Try every sandbox layer for real and say which are on.
    Doctor(commands::doctor::DoctorArgs),
    /// Check an act against the policy table, or validate a table.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
    /// List, test and trust the MCP servers chock.toml and config.toml configure.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// List and test the WebAssembly plugin tools chock.toml pins.
    #[command(subcommand)]
    Plugin(commands::plugin::PluginCommand),
    /// List, show, verify and seal session logs.
    #[command(subcommand)]
    Sessions(commands::sessions::SessionsCommand),
    /// Show what a session changed in its workspace.
    Diff(commands::diff::DiffArgs),
    /// Write a session's selected changes into the real project (decided by `workspace.apply`).
    Apply(commands::apply::ApplyArgs),
    /// Revert exactly what one apply wrote.
    Undo(commands::apply::UndoArgs),
    /// Manage session workspaces.
    #[command(subcommand)]
    Workspace(commands::workspace::WorkspaceCommand),
    /// The microVM guest (`[sandbox] isolation = "microvm"`): fetch its kernel.
    #[command(subcommand)]
    Vm(commands::vm::VmCommand),
    /// Store a provider's API key in the OS keyring, or a 0600 file.
    Login(commands::login::LoginArgs),
    /// Run the daemon that owns sessions: a unix socket for this user, and with --host a loopback
    /// port for the browser UI (docs/daemon.md).
    Serve(commands::serve::ServeArgs),
    /// Attach this terminal to a session the daemon runs: its progress, and its questions to
    /// answer here. Ctrl-C detaches; the session goes on.
    Attach(commands::attach::AttachArgs),
    /// Move a session that runs in a `chock run` (in another terminal) into the daemon while it
    /// works: it goes on there at its next turn, and `chock attach`, the browser or an editor
    /// follow it (docs/handover.md).
    Detach(commands::detach::DetachArgs),
    /// Be an agent for an editor: the Agent Client Protocol on standard input and output
    /// (docs/editors.md). Commands run in Chock's sandbox; the project changes only through an
    /// apply the editor is asked about.
    Acp(commands::acp::AcpArgs),
    /// The full-screen terminal interface (what bare `chock` opens at a terminal): tasks and
    /// follow-ups, approvals in place, the diff to select and apply, sessions to resume.
    Tui(commands::tui::TuiArgs),
    /// The session protocol clients speak (its JSON Schema).
    #[command(subcommand)]
    Protocol(commands::protocol::ProtocolCommand),
    /// List, show, edit and remove the notes the agent keeps between sessions of a project.
    #[command(subcommand)]
    Memory(commands::memory::MemoryCommand),
    /// git's askpass inside a call: carries git's credential prompt over the call's channel to the
    /// person and prints their one answer; the host answers only for a push a person approved in
    /// the call (docs/git.md). Refused outside a call.
    Askpass(AskpassArgs),
    /// Read another harness's permission rules and MCP servers (Claude Code, Codex, OpenCode,
    /// Zed, oh-my-pi) into chock.toml rows: a foreign allow becomes ask. Never overwrites one.
    Migrate(commands::migrate::MigrateArgs),
}

/// `chock askpass PROMPT`.
#[derive(Debug, clap::Args)]
struct AskpassArgs {
    /// The prompt git wrote (`Password for 'https://alice@example.org': `).
    #[arg(allow_hyphen_values = true)]
    prompt: String,
}

/// A first word that is neither an option nor a command is refused with a hint, before clap sees it:
/// `chock fix the parser` must never become a task that spends money because of a typo.
fn refuse_unknown_first_word(args: &[String]) -> Option<String> {
    let first = args.get(1)?;
    if first.starts_with('-') || first == "help" {
        return None;
    }
    // Asked of the derived enum, not of a built `Cli::command()`: building clap's whole tree of
    // subcommands costs about half a millisecond, and `try_parse` builds it once more.
    if Command::has_subcommand(first) {
        return None;
    }
    let words = args[1..].join(" ");
    Some(format!(
        "chock: unknown command '{first}'; to give a task, write `chock -- {words}`"
    ))
}

/// The whole command line: every command, in this process.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(hint) = refuse_unknown_first_word(&args) {
        say_err!("{hint}");
        return ExitCode::from(exit::BAD_INPUT);
    }
    if args.get(1).is_some_and(|a| a == "exec") {
        return front::exec(&args[1..]);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return exit::clap_error(&err),
    };
    let outcome = match cli.command {
        Some(Command::Run(args)) => commands::run::run(&args),
        Some(Command::Exec(args)) => commands::exec::run(args),
        Some(Command::Init(args)) => commands::init::run(args),
        Some(Command::Doctor(args)) => commands::doctor::run(args),
        Some(Command::Policy(cmd)) => commands::policy::run(cmd),
        Some(Command::Mcp(cmd)) => commands::mcp::run(cmd),
        Some(Command::Plugin(cmd)) => commands::plugin::run(cmd),
        Some(Command::Sessions(cmd)) => commands::sessions::run(cmd),
        Some(Command::Diff(args)) => commands::diff::run(args),
        Some(Command::Apply(args)) => commands::apply::run_apply(args),
        Some(Command::Undo(args)) => commands::apply::run_undo(args),
        Some(Command::Workspace(cmd)) => commands::workspace::run(cmd),
        Some(Command::Vm(cmd)) => commands::vm::run(cmd),
        Some(Command::Login(args)) => commands::login::run(&args),
        Some(Command::Protocol(cmd)) => commands::protocol::run(&cmd),
        Some(Command::Memory(cmd)) => commands::memory::run(cmd),
        Some(Command::Migrate(args)) => commands::migrate::run(args),
        Some(Command::Serve(args)) => commands::serve::run(&args),
        Some(Command::Attach(args)) => commands::attach::run(&args),
        Some(Command::Detach(args)) => commands::detach::run(&args),
        Some(Command::Acp(args)) => commands::acp::run(&args),
        Some(Command::Tui(args)) => commands::tui::run(&args),
        // Reads the prompt from its own arguments, prints the answer and exits.
        Some(Command::Askpass(_)) => chock_session::channel::askpass_main(),
        None if commands::tui::wanted(&cli.task) => commands::tui::run(&commands::tui::TuiArgs {
            max_turns: 50,
            ..Default::default()
        }),
        None => commands::run::run_task_words(cli.task),
    };
    exit::finish(outcome)
}
