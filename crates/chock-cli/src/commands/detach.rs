//! `chock detach SESSION`: the session a `chock run` runs moves into the daemon (`chock serve`),
//! which asks that process to let go (at the next turn boundary, or at once while a question
//! waits), takes the session up and goes on with its task (`sessions.adopt`, docs/handover.md).

use std::process::ExitCode;

use chock_protocol::rpc::{AdoptParams, Call, Started};

use super::attach::{client_error, connect};
use crate::say::say;

/// Arguments of `chock detach`.
#[derive(Debug, clap::Args)]
pub struct DetachArgs {
    /// The session (its id, or a unique prefix of it).
    pub session: String,
    /// How long to wait for the session's process to let go, in seconds (it does at the end of
    /// the turn it is in).
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    pub wait: u64,
}

pub fn run(args: &DetachArgs) -> anyhow::Result<ExitCode> {
    super::block_on(async {
        let mut client = connect().await?;
        let started: Started = client
            .call(&Call::SessionsAdopt(AdoptParams {
                session: args.session.clone(),
                wait_secs: Some(args.wait),
                subscribe: false,
            }))
            .await
            .map_err(|e| client_error(&e))?;
        client.close().await;
        say!(
            "chock: session {} now runs in the daemon; follow it: chock attach {}",
            started.session,
            started.session
        );
        Ok(ExitCode::SUCCESS)
    })?
}
