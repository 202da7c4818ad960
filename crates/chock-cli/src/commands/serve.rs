//! `chock serve [--host ADDR] [--group NAME]`: the daemon (chock-daemon) in this process, until
//! SIGINT or SIGTERM. It prints one line saying where it listens (and, with --host, the one-time
//! login link for the browser).

use std::process::ExitCode;

use anyhow::Context;
use chock_daemon::{DaemonError, DaemonOptions, ServeOptions, serve};

use crate::exit::{self, Exit};
use crate::say::{say, say_err};

/// Arguments of `chock serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Also serve HTTP and the browser UI on this loopback address (`127.0.0.1:PORT` or
    /// `[::1]:PORT`); any other address is refused.
    #[arg(long, value_name = "ADDR")]
    pub host: Option<String>,
    /// Also let this group's members use the socket (a reverse proxy's user, say).
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
}

fn start_error(err: &DaemonError) -> anyhow::Error {
    let status = match err {
        DaemonError::NotLoopback { .. } | DaemonError::BadHost { .. } | DaemonError::NoGroup(_) => {
            exit::BAD_INPUT
        }
        _ => exit::FAILURE,
    };
    Exit::new(status, err.to_string()).into()
}

#[allow(
    clippy::disallowed_methods,
    reason = "the daemon's runtime, made and driven at the binary's edge"
)]
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(host) = &args.host {
        chock_daemon::loopback_addr(host).map_err(|e| start_error(&e))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let outcome = runtime.block_on(async {
        let opts = ServeOptions {
            daemon: DaemonOptions::from_env().map_err(|e| start_error(&e))?,
            runtime_dir: chock_dirs::runtime_dir()
                .map_err(|e| start_error(&DaemonError::NoRuntimeDir(e)))?,
            group: args.group.clone(),
            host: args.host.clone(),
        };
        use tokio::signal::unix::{SignalKind, signal};
        // Listening for the signals before the line is printed: whoever reads it may stop us.
        let mut term = signal(SignalKind::terminate()).context("waiting for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("waiting for SIGINT")?;
        let server = serve(opts).await.map_err(|e| start_error(&e))?;
        say!("{}", server.listening_line());
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        say_err!("chock: stopping; a question still open stays unanswered in its session's log");
        server.stop().await;
        anyhow::Ok(())
    });
    // A confined call still running in a blocking thread is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    outcome.map(|()| ExitCode::SUCCESS)
}
