//! The session's confined calls that are running now, so that an interrupt can end them.
//!
//! Each call registers its init (pid 1 of the call's pid namespace) by a pidfd taken while the
//! init is alive: a signal through it reaches exactly that process or nobody (no pid reuse), and
//! the init's death takes every process of the call with it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// The running calls of one session, by call id.
#[derive(Debug, Default, Clone)]
pub struct RunningCalls {
    calls: Arc<Mutex<HashMap<String, OwnedFd>>>,
}

/// A running call's registration; the call is forgotten when this is dropped.
#[derive(Debug)]
pub struct Registered {
    calls: RunningCalls,
    call_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.call_id);
    }
}

impl RunningCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnedFd>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers the call `call_id` whose init has host pid `init_pid`. A call whose init is
    /// already gone cannot be registered and needs no interrupt.
    pub fn register(&self, call_id: &str, init_pid: u32) -> Option<Registered> {
        let pid = Pid::from_raw(i32::try_from(init_pid).ok()?)?;
        let fd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
        self.lock().insert(call_id.to_string(), fd);
        Some(Registered {
            calls: self.clone(),
            call_id: call_id.to_string(),
        })
    }

    /// Kills the call `call_id` (its whole process tree); whether it was running.
    pub fn kill(&self, call_id: &str) -> bool {
        self.lock()
            .get(call_id)
            .is_some_and(|fd| pidfd_send_signal(fd, Signal::KILL).is_ok())
    }

    /// The ids of the calls running now.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().keys().cloned().collect();
        ids.sort();
        ids
    }
}
