//! `sessions.adopt` (`chock detach`): a session that runs in another process (`chock run`) moves
//! into this daemon while it works.
//!
//! The owner is the pid its log's lock names. The daemon asks it to let go (SIGUSR1, which
//! `chock run` takes as "hand over": it stops at the next turn boundary, or at once while a
//! question waits, and lets the lock go without writing an end), waits until the lock is free,
//! then opens the session itself ([`chock_runtime::Opening::Adopt`]): `session.handover` names
//! both processes, and the task goes on at its next turn. An owner found dead (its lock free) is
//! not asked: what it left running is logged as outcome unknown.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chock_log::{EventData, Liveness};
use chock_protocol::log::{HandoverHow, Owner};
use chock_protocol::rpc::{AdoptParams, ErrorKind, RpcError, Started};
use chock_runtime::{Handover, Opening};

use super::{Caller, Daemon, internal, start_error};

/// How long the owner has to let go by default: it does at the end of the turn it is in.
const DEFAULT_WAIT: Duration = Duration::from_secs(600);

impl Daemon {
    /// `sessions.adopt`.
    pub(crate) async fn adopt(
        self: &Arc<Self>,
        p: AdoptParams,
        caller: &Caller,
    ) -> Result<Started, RpcError> {
        let (id, dir) = self.resolve(&p.session)?;
        if self.owned_session(&id).is_some() {
            return Err(RpcError::new(
                ErrorKind::Busy,
                format!("session {id} runs in this daemon already"),
            ));
        }
        not_ended(&id, &dir)?;
        let wait = p.wait_secs.map_or(DEFAULT_WAIT, Duration::from_secs);
        let (from, how) = match chock_log::is_live(&dir).map_err(internal)? {
            Liveness::Live { pid } => {
                let from = Owner {
                    pid,
                    process: process_of(pid),
                };
                ask_to_let_go(&id, pid)?;
                wait_until_free(&id, &dir, wait, self.stopping.subscribe()).await?;
                (from, HandoverHow::Released)
            }
            Liveness::Stale { pid } => (
                Owner {
                    pid: pid.unwrap_or(0),
                    process: "gone".into(),
                },
                HandoverHow::FoundDead,
            ),
            Liveness::NoLock => (
                Owner {
                    pid: 0,
                    process: "gone".into(),
                },
                HandoverHow::FoundDead,
            ),
        };
        // The owner may have ended the session instead (its task ended before a turn
        // boundary came): then there is nothing to take over.
        let events = not_ended(&id, &dir)?;
        let view = chock_log::view_of(&events);
        let start = view.start.as_ref();
        let task = events
            .iter()
            .find_map(|e| match e.payload() {
                Ok(EventData::TurnStart(t)) => t.input,
                _ => None,
            })
            .unwrap_or_default();
        let builder = self.builder(
            start.and_then(|s| s.provider.clone()),
            start.and_then(|s| s.model.clone()),
            &task,
        )?;
        let handover = Handover {
            from,
            to: Owner {
                pid: std::process::id(),
                process: "chock serve".into(),
            },
            how,
        };
        let handle = chock_runtime::start(builder, Opening::Adopt(dir, handover), None)
            .await
            .map_err(|e| {
                if e.is_busy() {
                    RpcError::new(
                        ErrorKind::Busy,
                        format!("session {id} is written by another process again: {e}"),
                    )
                } else {
                    start_error(&e)
                }
            })?;
        self.take_up(handle, None, p.subscribe, caller).await
    }
}

/// The session's events, unless it has ended (`sessions.resume` takes that up).
fn not_ended(id: &str, dir: &Path) -> Result<Vec<chock_log::Event>, RpcError> {
    let events = chock_log::read_events(dir).map_err(internal)?;
    if chock_log::view_of(&events).ended() {
        return Err(RpcError::new(
            ErrorKind::NotRunning,
            format!(
                "session {id} has ended, so there is nothing to take over: `sessions.resume` \
                 (or `chock run --resume {id}`) goes on with it"
            ),
        ));
    }
    Ok(events)
}

/// What process `pid` is, in two words (`chock run`), from its command line; never more of it
/// (the rest may hold the task's text).
fn process_of(pid: u32) -> String {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return "unknown".into();
    };
    let mut words = cmdline.split(|b| *b == 0).filter(|w| !w.is_empty());
    let program = words
        .next()
        .map(|w| {
            String::from_utf8_lossy(w)
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    match words.next() {
        Some(sub) if !sub.starts_with(b"-") => {
            format!("{program} {}", String::from_utf8_lossy(sub))
        }
        _ => program,
    }
}

/// Asks the owner `pid` of session `id` to let go of it.
fn ask_to_let_go(id: &str, pid: u32) -> Result<(), RpcError> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| {
            RpcError::new(
                ErrorKind::Internal,
                format!("session {id}: its lock names no process ({pid})"),
            )
        })?;
    rustix::process::kill_process(target, rustix::process::Signal::USR1).map_err(|e| {
        RpcError::new(
            ErrorKind::Internal,
            format!("asking process {pid}, which runs session {id}, to let go: {e}"),
        )
    })
}

/// Waits until nobody holds the log's lock of session `id` in `dir`, for at most `wait`, or until
/// the daemon stops (`stopping`). The wait is on the lock itself (a shared `flock` taken on a
/// thread of its own: [`chock_log::wait_until_free`]), so the adopt goes on the moment the owner
/// lets go. Giving up (the time is out, the daemon stops, the request is dropped) does not wait
/// for that thread: it stays blocked on the lock until the owner lets go or the daemon exits, and
/// then ends without doing anything.
async fn wait_until_free(
    id: &str,
    dir: &Path,
    wait: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<(), RpcError> {
    let (free_tx, free) = tokio::sync::oneshot::channel();
    let lock_dir = dir.to_path_buf();
    std::thread::Builder::new()
        .name("chock-adopt-wait".into())
        .spawn(move || {
            let _ = free_tx.send(chock_log::wait_until_free(&lock_dir));
        })
        .map_err(|e| internal(format!("waiting for the lock of session {id}: {e}")))?;
    tokio::select! {
        freed = free => match freed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(internal(e)),
            Err(_) => Err(internal(format!("waiting for the lock of session {id}: the waiting thread ended"))),
        },
        () = tokio::time::sleep(wait) => {
            let pid = match chock_log::is_live(dir).map_err(internal)? {
                Liveness::Live { pid } => pid,
                // Let go just now: take it up.
                _ => return Ok(()),
            };
            Err(RpcError::new(
                ErrorKind::Busy,
                format!(
                    "session {id}: process {pid} was asked to let go and still runs it after \
                     {} s (it lets go at the end of the turn it is in); ask again later",
                    wait.as_secs()
                ),
            ))
        }
        _ = stopping.wait_for(|stopping| *stopping) => Err(RpcError::new(
            ErrorKind::Busy,
            format!("session {id} was not taken over: the daemon is stopping"),
        )),
    }
}
