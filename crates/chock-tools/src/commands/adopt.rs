//! A new owner's part in moving background commands (docs/handover.md): the commands the old
//! owner's keeper still keeps are followed from where their record in the session's directory
//! stands, and their end is recorded here, as the old owner would have recorded it.

use std::sync::Arc;
use std::time::Instant;

use chock_protocol::log::{CommandResult, CommandStatus, Note};
use chock_sandbox::keeper;
use chock_sandbox::{ExitStatus, Killer, LimitsReport, Outcome};

use super::live_output::OutputItem;
use super::{Commands, Job, describe_ran};
use crate::events::AgentEvent;

impl Commands {
    /// Takes up the keeper the session's old owner left (this owner holds it from now on) and
    /// says which background commands it keeps: they run on, and [`Commands::follow_kept`]
    /// records the rest of each. None when no keeper runs (the old owner had none, or it ended
    /// because nobody took the session up in time).
    pub fn take_up_kept(&self) -> Vec<String> {
        self.keeper.take_up()
    }

    /// Follows the kept background command `handle` (running `command`) from where its record
    /// stands: its output is recorded and sent to clients as it comes; at its end, its
    /// `command.result` (unless `has_result`: the old owner wrote it before it let go), then
    /// `note {about: background_ended}`, and the model hears of it as of any. An interrupt kills
    /// it through the copy of its init's pidfd the keeper gives.
    pub fn follow_kept(&self, handle: &str, command: &str, has_result: bool) {
        let Ok(Some(link)) = self.keeper.link() else {
            return;
        };
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.insert(
                handle.to_string(),
                Job::Running {
                    started: Instant::now(),
                    command: command.to_string(),
                },
            );
        }
        let call_id = handle.strip_prefix("bg-").unwrap_or(handle).to_string();
        let log = self.decider.log.clone();
        let live = Arc::new(OutputItem::new(
            format!("{call_id}.output"),
            self.decider.turn.load(std::sync::atomic::Ordering::Relaxed),
            &call_id,
            log.clone(),
            Arc::clone(&self.sink),
        ));
        let keeper = Arc::clone(&self.keeper);
        let session = Arc::clone(self.host.session());
        let jobs = Arc::clone(&self.jobs);
        let sink = Arc::clone(&self.sink);
        let (handle, command) = (handle.to_string(), command.to_string());
        let limit = chock_session::CallOptions::default().capture_limit;
        let pipeline = self.decider.pipeline();
        let waiter = tokio::spawn(async move {
            let began = Instant::now();
            let (k, h, c, l) = (
                Arc::clone(&keeper),
                handle.clone(),
                call_id.clone(),
                Arc::clone(&live),
            );
            // The log is held while the output is recorded (its lock says who owns the session).
            let held = log.clone();
            let runtime = tokio::runtime::Handle::current();
            let serving = Arc::clone(&session);
            let followed = tokio::task::spawn_blocking(move || {
                let _held = held;
                let mut registered = None;
                let mut doors = None;
                let r = k.follow_blocking(&link, &h, None, &*l, &mut |followed| {
                    let keeper::Followed {
                        pidfd,
                        doors: given,
                    } = followed;
                    if let Ok(copy) = pidfd.try_clone() {
                        registered = session.running().register(&c, Killer::from_pidfd(copy));
                    }
                    // The call's doors are this owner's to serve from now on, as the old owner
                    // served them: a connection or git request that waited meanwhile is
                    // answered now, by this owner's pipeline.
                    let (session, call, pipeline) =
                        (Arc::clone(&serving), c.clone(), pipeline.clone());
                    doors = Some(runtime.spawn(async move {
                        session
                            .serve_moved_call(&call, given, pidfd, &pipeline)
                            .await
                    }));
                });
                drop(registered);
                let r = r.map(|(status, mut record, follow)| {
                    let lens = record.lens;
                    (status, record.read_back(limit), lens, follow)
                });
                (r, doors)
            })
            .await
            .map_err(std::io::Error::other);
            let (followed, doors) = match followed {
                Ok((r, doors)) => (r, doors),
                Err(e) => (Err(e), None),
            };
            // The doors were served until the call's processes were all gone, which comes
            // before its end does.
            let served = match doors {
                Some(doors) => doors
                    .await
                    .map_err(|e| chock_session::SessionError::Output(std::io::Error::other(e)))
                    .and_then(|r| r),
                None => Ok(None),
            };
            if keeper.released() {
                return;
            }
            let (text, status, is_error, follow) = match (followed, served) {
                (Ok((_, _, _, follow)), Err(e)) => {
                    // A door nobody could serve: the call was killed rather than left running
                    // with requests nobody answers.
                    let message = format!(
                        "its doors to the host could not be served after the handover, so it \
                         was killed: {e}"
                    );
                    if !has_result {
                        let _ = log.record(
                            Some(&call_id),
                            CommandResult::Failed {
                                error: "doors".to_string(),
                                layer: None,
                                message: message.clone(),
                            },
                        );
                    }
                    (message, None, true, Some(follow))
                }
                (Ok((status, (stdout, stderr, truncated), lens, follow)), Ok(forbidden_call)) => {
                    if !has_result {
                        let _ = log.record(
                            Some(&call_id),
                            CommandResult::Ran {
                                status: match status {
                                    ExitStatus::Exited(c) => CommandStatus::Exited(c),
                                    ExitStatus::Signaled(s) => CommandStatus::Signaled(s),
                                    ExitStatus::TimedOut => CommandStatus::TimedOut,
                                },
                                exit_code: status.code(),
                                limits: serde_json::Value::Null,
                                duration_ms: u64::try_from(began.elapsed().as_millis())
                                    .unwrap_or(u64::MAX),
                                stdout_bytes: usize::try_from(lens[0]).unwrap_or(usize::MAX),
                                stderr_bytes: usize::try_from(lens[1]).unwrap_or(usize::MAX),
                                truncated,
                                checkpoint: None,
                            },
                        );
                    }
                    let outcome = Outcome {
                        status,
                        limits: LimitsReport::default(),
                        duration: began.elapsed(),
                        forbidden_call,
                    };
                    let (told, code) =
                        describe_ran(&outcome, &stdout, &stderr, truncated, &command);
                    (told.text, code, told.is_error, Some(follow))
                }
                (Err(e), _) => (format!("its end is unknown: {e}"), None, true, None),
            };
            live.complete(!is_error);
            let _ = log.record(
                Some(&handle),
                Note::BackgroundEnded {
                    background: handle.clone(),
                    status,
                    is_error,
                },
            );
            sink.emit(&AgentEvent::BackgroundEnded {
                handle: handle.clone(),
                status,
            });
            if let Ok(mut jobs) = jobs.lock() {
                jobs.insert(
                    handle,
                    Job::Ended {
                        command,
                        text,
                        status,
                        told: false,
                    },
                );
            }
            if let Some(follow) = follow {
                let _ = follow.recorded();
            }
        });
        if let Ok(mut handles) = self.handles.lock() {
            handles.push((true, waiter));
        }
    }
}
