//! `chock protocol`: the session protocol a client speaks, for people who write clients.

use std::process::ExitCode;

/// `chock protocol …`.
#[derive(Debug, clap::Subcommand)]
pub enum ProtocolCommand {
    /// Print the JSON Schema of the live events and the operations (chock_protocol's types).
    Schema,
}

pub fn run(command: &ProtocolCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProtocolCommand::Schema => {
            let schema = chock_protocol::schema::client_schema();
            crate::say::json_pretty(&schema)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
