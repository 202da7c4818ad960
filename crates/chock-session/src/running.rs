//! The session's confined calls that are running now, so that an interrupt can end them.
//!
//! Each confined call registers the [`Killer`] its confiner gave it (never a pid: the local
//! sandbox's kills its init, pid 1 of the call's pid namespace, through a pidfd, and the init's
//! death takes every process of the call with it). A host process that is not a confined call
//! (a child `chock` session) registers by a pidfd taken while it is alive: a signal through it
//! reaches exactly that process or nobody (no pid reuse).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use chock_sandbox::Killer;
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// Separates a call id from the part of it a process is (`register_interruptible_part`).
const PART: char = '\u{1f}';

/// The running calls of one session, by call id.
#[derive(Debug, Default, Clone)]
pub struct RunningCalls {
    calls: Arc<Mutex<HashMap<String, Entry>>>,
}

/// What is known of one call.
#[derive(Debug)]
enum Entry {
    /// It is running; what ends it.
    Running(Ender),
    /// It was killed before its init was registered (an interrupt during its decision or its
    /// spawn): it is killed the moment it registers, so no interrupt is lost to that window.
    Doomed,
}

/// How a running call is ended.
#[derive(Debug)]
enum Ender {
    /// A confined call: its confiner's killer.
    Confined(Killer),
    /// A host process: a pidfd of it, with the signal that ends it.
    Process(OwnedFd, Signal),
}

impl Ender {
    /// Ends it; whether it was running.
    fn end(&self) -> bool {
        match self {
            Ender::Confined(killer) => killer.kill(),
            Ender::Process(fd, signal) => pidfd_send_signal(fd, *signal).is_ok(),
        }
    }
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
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers the confined call `call_id`, ended by `killer` (its whole process tree).
    pub fn register(&self, call_id: &str, killer: Killer) -> Option<Registered> {
        Some(self.insert(call_id, call_id, Ender::Confined(killer)))
    }

    /// Registers a process that ends its own tree when interrupted (a child `chock` session,
    /// which interrupts its turn, its own children and commands, and writes its log's end): an
    /// interrupt sends it SIGINT instead of SIGKILL.
    pub fn register_interruptible(&self, call_id: &str, pid: u32) -> Option<Registered> {
        self.register_with(call_id, pid, Signal::INT)
    }

    /// As [`RunningCalls::register_interruptible`], for one of several processes of the call
    /// `call_id` (the children one `spawn_agents` call runs at once), told apart by `part`: an
    /// interrupt of the call reaches every part.
    pub fn register_interruptible_part(
        &self,
        call_id: &str,
        part: &str,
        pid: u32,
    ) -> Option<Registered> {
        self.register_keyed(call_id, &format!("{call_id}{PART}{part}"), pid, Signal::INT)
    }

    fn register_with(&self, call_id: &str, pid: u32, signal: Signal) -> Option<Registered> {
        self.register_keyed(call_id, call_id, pid, signal)
    }

    fn register_keyed(
        &self,
        call_id: &str,
        key: &str,
        pid: u32,
        signal: Signal,
    ) -> Option<Registered> {
        let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
        let fd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
        Some(self.insert(call_id, key, Ender::Process(fd, signal)))
    }

    /// Records `ender` under `key` (of the call `call_id`), ending it at once when the call was
    /// killed before it registered.
    fn insert(&self, call_id: &str, key: &str, ender: Ender) -> Registered {
        let mut calls = self.lock();
        if matches!(calls.get(call_id), Some(Entry::Doomed))
            || matches!(calls.get(key), Some(Entry::Doomed))
        {
            ender.end();
        }
        calls.insert(key.to_string(), Entry::Running(ender));
        drop(calls);
        Registered {
            calls: self.clone(),
            call_id: key.to_string(),
        }
    }

    /// Kills the call `call_id` (its whole process tree); whether it was running. A call that has
    /// not registered yet is killed when it does (see [`RunningCalls::forget`]).
    pub fn kill(&self, call_id: &str) -> bool {
        let mut calls = self.lock();
        let prefix = format!("{call_id}{PART}");
        let mut parts = false;
        for (key, entry) in calls.iter() {
            if let (true, Entry::Running(ender)) = (key.starts_with(&prefix), entry) {
                parts |= ender.end();
            }
        }
        if parts {
            // Parts registered later are interrupted as they register.
            calls.entry(call_id.to_string()).or_insert(Entry::Doomed);
            return true;
        }
        match calls.get(call_id) {
            Some(Entry::Running(ender)) => ender.end(),
            Some(Entry::Doomed) => false,
            None => {
                calls.insert(call_id.to_string(), Entry::Doomed);
                false
            }
        }
    }

    /// Forgets a call that ended without ever registering (refused, or failed before its init
    /// ran), so a kill that waited for it is not kept.
    pub fn forget(&self, call_id: &str) {
        let mut calls = self.lock();
        if matches!(calls.get(call_id), Some(Entry::Doomed)) {
            calls.remove(call_id);
        }
    }

    /// The ids of the calls running now.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .lock()
            .iter()
            .filter(|(id, e)| matches!(e, Entry::Running(..)) && !id.contains(PART))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    use std::os::fd::OwnedFd;

    use chock_sandbox::{Kill, Killer};
    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

    use super::RunningCalls;

    /// A killer of a plain host process, standing in for a confiner's.
    #[derive(Debug)]
    struct Pidfd(OwnedFd);

    impl Kill for Pidfd {
        fn kill(&self) -> bool {
            pidfd_send_signal(&self.0, Signal::KILL).is_ok()
        }
    }

    fn killer_of(child: &std::process::Child) -> Killer {
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        Killer::new(Pidfd(pidfd_open(pid, PidfdFlags::empty()).unwrap()))
    }

    /// An interrupt that lands while a call is still being decided or spawned is not lost: the
    /// call is killed as soon as its init registers.
    #[test]
    fn a_kill_before_the_call_registers_kills_it_when_it_does() {
        let calls = RunningCalls::default();
        assert!(!calls.kill("c1"), "nothing is running yet");
        assert!(calls.ids().is_empty(), "a doomed call is not a running one");
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let registered = calls.register("c1", killer_of(&child)).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc_sigkill()), "{status:?}");
        drop(registered);
        assert!(calls.ids().is_empty());
    }

    /// A doomed call that never ran is forgotten, and does not doom a later call.
    #[test]
    fn a_forgotten_kill_dooms_nothing_after_it() {
        let calls = RunningCalls::default();
        calls.kill("c1");
        calls.forget("c1");
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let registered = calls.register("c1", killer_of(&child)).unwrap();
        assert_eq!(calls.ids(), ["c1"]);
        assert!(child.try_wait().unwrap().is_none(), "not killed");
        assert!(calls.kill("c1"));
        assert_eq!(child.wait().unwrap().signal(), Some(libc_sigkill()));
        drop(registered);
    }

    fn libc_sigkill() -> i32 {
        rustix::process::Signal::KILL.as_raw()
    }
}
