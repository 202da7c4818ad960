//! Exit statuses, in one place so docs/cli.md can list them and every command agrees.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success (for `exec`: the command's own status is passed through; for `run` and `tui`: also a session handed to the daemon, which goes on there) |
//! | 1 | the command ran and failed (a verify that found a break, a replay whose decisions differ, a doctor with a layer off, …) |
//! | 2 | bad input: usage, a malformed chock.toml or config, an unknown session; nothing ran |
//! | 123 | the act was refused by the policy table or by a person |
//! | 124 | the command timed out, and everything it started was killed |
//! | 125 | a sandbox layer could not be applied; the command did not run |
//! | 126 | `exec`: the program was found inside the sandbox but could not be executed |
//! | 127 | `exec`: the program was not found inside the sandbox |
//! | 130 | `run`: interrupted by Ctrl-C; `attach` and `run --daemon`: detached by Ctrl-C (the session goes on in the daemon) |
//!
//! `serve`: 1 when another daemon runs, 2 for a `--host` that is not loopback or an unknown `--group`.
//! `attach`: 1 when the session does not run in the daemon or no daemon listens, 2 for an unknown session.

use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// The command ran and reported failure.
pub const FAILURE: u8 = 1;
/// Bad input: nothing ran.
pub const BAD_INPUT: u8 = 2;
/// The act was refused (policy deny, a person said no, or nobody was there to ask).
pub const REFUSED: u8 = 123;
/// The command timed out.
pub const TIMED_OUT: u8 = 124;
/// A sandbox layer could not be applied.
pub const LAYER_MISSING: u8 = 125;
/// `exec`: the program could not be executed inside the sandbox (as a shell says it).
pub const NOT_EXECUTABLE: u8 = 126;
/// `exec`: the program was not found inside the sandbox (as a shell says it).
pub const NOT_FOUND: u8 = 127;

/// The status of `run` and `attach` for a session that ended `ended` (the one mapping; a Ctrl-C
/// of `run` is 130 before it): 0 when it ended `done` (or, with no agent loop, `closed`), 1 for
/// every other ending — `out_of_budget`, `max_turns`, `max_tokens`, `refusal`, `interrupted` by a
/// client, `error: …`.
pub fn of_session(ended: &chock_protocol::live::Ended) -> u8 {
    if ended.is_success() { OK } else { FAILURE }
}

/// An error that already knows its exit status, for errors raised deliberately by a command.
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub message: String,
}

impl Exit {
    pub fn new(status: u8, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// Turns a command's outcome into the process's exit status, printing any error on stderr.
pub fn finish(outcome: anyhow::Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): nothing is wrong, nothing to say.
        Err(err) if crate::say::is_broken_pipe(&err) => ExitCode::from(OK),
        Err(err) => {
            let status = err.downcast_ref::<Exit>().map_or(FAILURE, |e| e.status);
            crate::say::err_block(format_args!("chock: {err:#}"));
            ExitCode::from(status)
        }
    }
}

/// Usage errors exit 2; `--help` and `--version` exit 0.
pub fn clap_error(err: &clap::Error) -> ExitCode {
    let _ = err.print();
    if err.use_stderr() {
        ExitCode::from(BAD_INPUT)
    } else {
        ExitCode::from(OK)
    }
}
