//! Steering the one git process of work nobody waits on yet (the base commit) from other threads:
//! paused while the session works (a tool call, the agent between its model's replies), running
//! while the session waits (for the model, for a person), resumed for good when someone needs its
//! result, killed when nobody will.
//!
//! Why pause rather than only lower its priority: a `git add -A` over a 100,000-file project is a
//! third of a second of lstat and readdir, and at nice 19 on a two-core machine it still slowed
//! every call running beside it by about 40% (the calls' namespaces, mounts and forks contend with
//! it in the kernel and in the caches, not only for a core). Stopped, it costs a call nothing; it
//! goes on in the gaps between calls (a model's turn is seconds long), and whoever needs the base
//! (a checkpoint of a changed workspace, a diff, an apply) resumes it at once, whatever calls are
//! still running.
//!
//! A paused git can outlive a host that is killed outright (`SIGKILL`; any other end of the
//! host drops the workspace, which kills the job). It is in the host's process group: when that
//! death orphans the group (a job of an interactive shell, a daemon's own group), the kernel sends
//! a group with a stopped member `SIGHUP` then `SIGCONT`, which ends git; when the group lives on
//! (the host was one process of a script's group), the stopped git stays until someone kills it.
//! A parent-death signal would end it in every case, but must be set between fork and exec, which
//! this crate (`forbid(unsafe_code)`) cannot do: docs/status.md lists it.

use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::process::{Signal, pidfd_send_signal};

/// The control shared by the job's thread and the workspace.
#[derive(Debug, Default)]
pub(crate) struct Background {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Nobody will read the result: the running process is killed, none is started after.
    cancelled: bool,
    /// Someone waits for the result: holds no longer pause it.
    needed: bool,
    /// Calls running now.
    holds: usize,
    /// Waits for a person now (a question open): the work runs meanwhile, whatever holds.
    lends: usize,
    /// The running process, by pidfd: it cannot be replaced by another process with its pid.
    running: Option<OwnedFd>,
}

impl State {
    fn paused(&self) -> bool {
        self.holds > 0 && self.lends == 0 && !self.needed
    }

    fn signal(&self, signal: Signal) {
        if let Some(pidfd) = &self.running {
            // A process that has just exited is not an error: there is nothing left to steer.
            let _ = pidfd_send_signal(pidfd, signal);
        }
    }
}

impl Background {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the work to stop: the running process is killed (a stopped one too), later ones are
    /// refused.
    pub(crate) fn cancel(&self) {
        let mut state = self.state();
        state.cancelled = true;
        state.signal(Signal::KILL);
    }

    /// Whether [`Background::cancel`] was called.
    pub(crate) fn cancelled(&self) -> bool {
        self.state().cancelled
    }

    /// Someone is about to wait for the result: it runs from now on, whatever holds remain.
    pub(crate) fn need(&self) {
        self.change(|state| state.needed = true);
    }

    /// A call starts: the work is paused until every hold is released.
    pub(crate) fn hold(&self) {
        self.change(|state| state.holds += 1);
    }

    /// A call ended.
    pub(crate) fn release(&self) {
        self.change(|state| state.holds = state.holds.saturating_sub(1));
    }

    /// A person is asked: the work runs while they think, whatever calls hold it.
    pub(crate) fn lend(&self) {
        self.change(|state| state.lends += 1);
    }

    /// The person answered.
    pub(crate) fn unlend(&self) {
        self.change(|state| state.lends = state.lends.saturating_sub(1));
    }

    /// Applies `f` and stops or continues the running process when that changes whether it is
    /// paused.
    fn change(&self, f: impl FnOnce(&mut State)) {
        let mut state = self.state();
        let before = state.paused();
        f(&mut state);
        match (before, state.paused()) {
            (false, true) => state.signal(Signal::STOP),
            (true, false) => state.signal(Signal::CONT),
            _ => {}
        }
    }

    /// Runs `start` (which spawns the process and returns it with its pidfd) unless the work was
    /// cancelled, and records the process so it can be paused, resumed and killed; it is paused
    /// at once if a call is running. `Err(None)` when cancelled before it started.
    pub(crate) fn started<T, E>(
        &self,
        start: impl FnOnce() -> Result<(T, Option<OwnedFd>), E>,
    ) -> Result<T, Option<E>> {
        let mut state = self.state();
        if state.cancelled {
            return Err(None);
        }
        let (process, pidfd) = start().map_err(Some)?;
        state.running = pidfd;
        if state.paused() {
            state.signal(Signal::STOP);
        }
        Ok(process)
    }

    /// The process ended: nothing is left to signal.
    pub(crate) fn finished(&self) {
        self.state().running = None;
    }
}

/// While it lives, the workspace's background work (its git base) is paused, or, for a
/// `BackgroundPause::lend` guard, runs whatever pauses are held. A tool call holds a pause while
/// it is worked on, and lends the time a person takes to answer its question. Several may live at
/// once; the work is paused while any pause and no lend lives, and never again once someone
/// needs its result.
#[derive(Debug)]
#[must_use = "the background work's state changes back when this is dropped"]
pub struct BackgroundPause {
    control: Option<std::sync::Arc<Background>>,
    lend: bool,
}

impl BackgroundPause {
    pub(crate) fn hold(control: Option<std::sync::Arc<Background>>) -> BackgroundPause {
        if let Some(control) = &control {
            control.hold();
        }
        BackgroundPause {
            control,
            lend: false,
        }
    }

    pub(crate) fn lend(control: Option<std::sync::Arc<Background>>) -> BackgroundPause {
        if let Some(control) = &control {
            control.lend();
        }
        BackgroundPause {
            control,
            lend: true,
        }
    }
}

impl Drop for BackgroundPause {
    fn drop(&mut self) {
        match (&self.control, self.lend) {
            (Some(control), false) => control.release(),
            (Some(control), true) => control.unlend(),
            (None, _) => {}
        }
    }
}
