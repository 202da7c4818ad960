//! `chock acp`: Chock as an agent for an editor, speaking the Agent Client Protocol on standard
//! input and output (chock-acp) until the editor closes standard input. Standard output carries
//! only the protocol's frames; notes go to standard error (docs/editors.md).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use chock_config::config::Config;

use crate::exit::{self, Exit};

/// Arguments of `chock acp`.
#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// The provider for every session (a `session/new` may name another in
    /// `_meta.chock.provider`); default: config.toml's `default_provider`.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The model (a `session/new` may name another in `_meta.chock.model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Stop a prompt's work after this many turns.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_turns: u32,
    /// Refuse an act whose question the editor has not answered within this many seconds (0:
    /// wait for ever).
    #[arg(long, default_value_t = 900, value_name = "SECS")]
    pub answer_timeout: u64,
}

#[allow(
    clippy::disallowed_methods,
    reason = "the ACP agent's runtime, made and driven at the binary's edge"
)]
pub fn run(args: &AcpArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load().map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
    let options = chock_acp::Options {
        config,
        provider: args.provider.clone(),
        model: args.model.clone(),
        sessions_root: None,
        max_turns: args.max_turns,
        answer_timeout: (args.answer_timeout > 0).then(|| Duration::from_secs(args.answer_timeout)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let served = runtime.block_on(async {
        let kept = keep_sessions_when_asked()?;
        let served = chock_acp::serve(
            tokio::io::BufReader::new(tokio::io::stdin()),
            tokio::io::stdout(),
            options,
        )
        .await;
        kept.abort();
        anyhow::Ok(served)
    })?;
    // A confined call still running in a blocking thread is not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served.map_err(|e| Exit::new(exit::FAILURE, e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// The daemon's adopt (`chock detach` of one of this process's sessions) asks the session's
/// owner to let go with SIGUSR1. An editor's agent holds several sessions and the signal does
/// not say which is meant, so none is handed over: the signal is taken (its default would end
/// the process and every session the editor has open) and said no to on standard error; the
/// adopt gives up at its `--wait`.
fn keep_sessions_when_asked() -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut asked = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        .context("listening for SIGUSR1")?;
    Ok(tokio::spawn(async move {
        while asked.recv().await.is_some() {
            crate::say::say_err!(
                "chock acp: asked to hand a session to the daemon (chock detach): an editor's \
                 sessions are not handed over; they stay here"
            );
        }
    }))
}
