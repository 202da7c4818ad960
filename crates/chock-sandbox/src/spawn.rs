//! The host side of a call: fork, read the child's setup report, wait with a timeout, kill the tree.

use std::fs::File;
use std::net::TcpListener;

use crate::error::SandboxError;
use crate::outcome::Outcome;
use crate::plan::Plan;

/// Where the command's standard streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioMode {
    /// stdin from /dev/null; stdout and stderr are pipes the caller reads
    /// ([`SandboxChild::take_stdout`], [`SandboxChild::take_stderr`]).
    Piped,
    /// The command shares the caller's stdin, stdout and stderr (it is still in a new session,
    /// without the host's controlling terminal).
    Inherit,
    /// stdin, stdout and stderr are /dev/null.
    Null,
}

/// A running confined call.
#[derive(Debug)]
pub struct SandboxChild {
    pid: u32,
    stdout: Option<File>,
    stderr: Option<File>,
    proxy: Option<TcpListener>,
}

impl SandboxChild {
    /// The host pid of the call's init (pid 1 of its pid namespace).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The command's stdout, in [`StdioMode::Piped`] (once).
    pub fn take_stdout(&mut self) -> Option<File> {
        self.stdout.take()
    }

    /// The command's stderr, in [`StdioMode::Piped`] (once).
    pub fn take_stderr(&mut self) -> Option<File> {
        self.stderr.take()
    }

    /// The listener made inside the call's network namespace for [`crate::NetworkPlan::Proxy`]
    /// (once): the host broker accepts on it.
    pub fn proxy_listener(&mut self) -> Option<TcpListener> {
        self.proxy.take()
    }

    /// Waits for the call to end (or its timeout), then makes sure every process it started is gone.
    pub fn wait(&mut self) -> Result<Outcome, SandboxError> {
        Err(SandboxError::Plan("the driver is being built".into()))
    }

    /// Kills every process of the call now.
    pub fn kill(&mut self) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// Forks, builds every layer in the child and executes the plan's command. Returns once the command
/// is executing (every layer on), or with the error of the first layer that could not be applied.
pub fn spawn(plan: &Plan, stdio: StdioMode) -> Result<SandboxChild, SandboxError> {
    plan.validate()?;
    let _ = stdio;
    Err(SandboxError::Plan("the driver is being built".into()))
}
