//! `chock login --provider NAME`: stores a provider's API key, read from standard input (not echoed
//! on a terminal), in the OS keyring where one is running, else in a 0600 file under
//! `$XDG_DATA_HOME/chock/credentials/` (docs/config.md). The key is never printed, logged or handed to a
//! tool call.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::Context;
use chock_config::credentials::{self, ApiKey};

use crate::exit::{self, Exit};
use crate::say::{say, say_err};

/// Arguments of `chock login`.
#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The provider whose key to store (a name from config.toml, or anthropic, openai, aiand), or
    /// the ChatGPT account to sign in (`chatgpt`, or a table of kind "chatgpt").
    #[arg(long)]
    pub provider: String,
    /// ChatGPT: sign in with a code typed at the issuer's device page instead of a browser
    /// redirect to this machine.
    #[arg(long)]
    pub device_code: bool,
    /// ChatGPT: the loopback port the browser's redirect comes back to (the client is registered
    /// at 1455; another port is for a test's own issuer).
    #[arg(long, default_value_t = chock_oauth::chatgpt::CALLBACK_PORT, hide = true)]
    pub callback_port: u16,
}

/// Reads one line from standard input with echo off when it is a terminal (restored afterwards).
fn read_key() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    let saved = if terminal {
        crate::say::ask_err(format_args!("API key for the provider (input hidden): "));
        let saved = rustix::termios::tcgetattr(&stdin).ok();
        if let Some(mut quiet) = saved.clone() {
            quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
            let _ =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet);
        }
        saved
    } else {
        None
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(saved) = saved {
        let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &saved);
        say_err!();
    }
    read.context("reading the key from standard input")?;
    Ok(line)
}

pub fn run(args: &LoginArgs) -> anyhow::Result<ExitCode> {
    if matches!(args.provider.as_str(), "demo") || args.provider.starts_with("script:") {
        return Err(Exit::new(exit::BAD_INPUT, "the offline player needs no key").into());
    }
    let config = chock_config::config::Config::load()
        .map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    if let Some(table) = config
        .provider(&args.provider)
        .filter(|t| t.kind == chock_config::config::ProviderKind::ChatGpt)
    {
        return super::login_chatgpt::run(
            &args.provider,
            &table,
            args.device_code,
            args.callback_port,
        );
    }
    if args.device_code {
        return Err(Exit::new(
            exit::BAD_INPUT,
            format!(
                "--device-code signs a ChatGPT account in; `{}` takes an API key",
                args.provider
            ),
        )
        .into());
    }
    let text = read_key()?;
    let key = ApiKey::new(&text)
        .ok_or_else(|| Exit::new(exit::BAD_INPUT, "no key was given on standard input"))?;
    let stored = credentials::store(&args.provider, &key).map_err(|e| match e {
        credentials::CredentialError::BadName(_) => Exit::new(exit::BAD_INPUT, e.to_string()),
        other => Exit::new(exit::FAILURE, other.to_string()),
    })?;
    match &stored {
        credentials::KeySource::File(path) => say!(
            "stored the key for {} in {} (mode 0600; no OS keyring was available)",
            args.provider,
            path.display()
        ),
        other => say!("stored the key for {} in {other}", args.provider),
    }
    say!("an environment variable named by the provider's key_env still takes precedence");
    Ok(ExitCode::SUCCESS)
}
