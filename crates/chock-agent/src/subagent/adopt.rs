//! Children adopted with their parent: a session taken over from a process that died
//! ([`crate::runtime::handover`]) may have a child still running — `spawn_agent`'s child is a
//! process of its own, and outlives a parent killed outright. The new owner waits for it by its
//! pid file descriptor (readable once the process has ended) and its log's lock (free once
//! nothing writes the child's log), then records its end as a resume would
//! ([`super::complete_orphans`]: `agent.complete`, what it spent booked, and the `spawn_agent`
//! call's result), so every `session.spawn` is followed by an `agent.complete`.

use std::path::Path;
use std::time::Duration;

use chock_log::{Liveness, Log, LogError};

use crate::budget::Budget;

/// Waits until each of `children` (session ids beside `log`'s session) has ended, then records
/// the end of every child of the session that has.
pub(crate) async fn await_children(
    log: &Log,
    budget: &Budget,
    children: &[String],
) -> Result<(), LogError> {
    let root = log.dir().parent().unwrap_or(log.dir()).to_path_buf();
    for child in children {
        ended(&root.join(child)).await;
    }
    let events = chock_log::read_events(log.dir())?;
    super::complete_orphans(log, &events, budget)?;
    log.sync()
}

/// Returns once nobody writes the session in `dir`: its writer's pid file descriptor has become
/// readable (the process ended) and the lock it held is free.
async fn ended(dir: &Path) {
    loop {
        let pid = match chock_log::is_live(dir) {
            Ok(Liveness::Live { pid }) => pid,
            _ => return,
        };
        let fd = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            })
            .and_then(watch);
        match fd {
            Some(fd) => {
                let _ = fd.readable().await;
                // The lock goes with the process's last descriptor: look again at once.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The process is gone already, or the lock names no process: the lock decides.
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The pid file descriptor `fd`, registered with the runtime to be waited on.
// tokio deprecates `AsyncFd::new` for a descriptor someone else may close while it is
// registered; this one is an `OwnedFd` moved in, closed only when the `AsyncFd` is dropped, and
// `register`, the replacement, is `unsafe`, which this crate forbids.
#[allow(deprecated)]
fn watch(fd: std::os::fd::OwnedFd) -> Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    tokio::io::unix::AsyncFd::new(fd).ok()
}
