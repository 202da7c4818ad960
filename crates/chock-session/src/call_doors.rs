//! A call's doors to the host: its egress proxy (each connection settled by the pipeline under
//! the call's id) and its host channel (the git shim, `chock askpass`), served by the process
//! that owns the session for as long as the call runs. One place for both ways a call comes to
//! be served: one this process started ([`Session::confined_call_async`]) and a kept background
//! call it took over from the session's previous owner ([`Session::serve_moved_call`],
//! docs/handover.md). A call taken over is served exactly as one started here: the same
//! pipeline, the same proxy, the same channel handler, and the same watch over its seccomp
//! filter.

use std::future::Future;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use chock_broker::CallProxy;
use chock_decide::Pipeline;
use chock_sandbox::{CallDoors, Killer, SandboxError, SeccompWatch};

use crate::approve::Deciding;
use crate::channel::{CallChannel, Credentials, GuestView};
use crate::{CallOptions, Session, SessionError};

/// What serving one call's doors needs: the call, the pipeline its acts are settled by, and
/// the credentials a person approves within it.
pub(crate) struct Doors<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) pipeline: &'a Pipeline,
    /// The push a person approves in this call, shared by the channel (askpass) and the egress
    /// proxy (the push's one connection).
    pub(crate) credentials: Arc<Credentials>,
    /// For a call in a microVM guest: the host's view of its workspace.
    pub(crate) guest: Option<&'a GuestView>,
}

impl Session {
    /// Starts serving the call's egress proxy on `listener`, on the caller's runtime, until the
    /// proxy is shut down.
    pub(crate) fn open_egress(
        &self,
        doors: &Doors<'_>,
        listener: TcpListener,
    ) -> Result<CallProxy, SessionError> {
        crate::egress::serve(
            &tokio::runtime::Handle::current(),
            doors.pipeline,
            &self.log,
            doors.call_id,
            listener,
            Arc::clone(&doors.credentials),
        )
    }

    /// Awaits `until` (the call's end) while serving the call's host `channel` beside it, when
    /// it has one and this session wires its gits; the channel is dropped (closed) with this
    /// future.
    pub(crate) async fn serve_channel_until<T>(
        &self,
        doors: &Doors<'_>,
        channel: Option<OwnedFd>,
        until: impl Future<Output = T>,
    ) -> T {
        let wiring = self.git.as_ref();
        let gits = wiring.and_then(crate::git_shim::Wiring::found);
        match (channel, gits, wiring) {
            (Some(channel), Some(gits), Some(wiring)) => {
                let handler = CallChannel {
                    pipeline: doors.pipeline,
                    call_id: doors.call_id,
                    gits,
                    wiring,
                    credentials: &doors.credentials,
                    guest: doors.guest,
                };
                let serving = async {
                    let _ = crate::channel::serve(channel, &handler).await;
                    // Served to its end (every process closed it): the call ends on its own.
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    out = until => out,
                    () = serving => unreachable!("serving never ends on its own"),
                }
            }
            _ => until.await,
        }
    }

    /// Serves the doors of a kept background call that another process started and this one
    /// took over with the session (docs/handover.md, "Background commands move"): its
    /// connections are settled by `deciding`'s pipeline under `call_id`, its git requests
    /// answered, its forbidden system calls killed, until the call's init (`pidfd`) is gone.
    /// Returns the forbidden call that killed a process of it, if one did.
    ///
    /// A door that cannot be served fails the call: it is killed (through `pidfd`) and the
    /// error says which door, rather than the call running on with a door nobody answers.
    pub async fn serve_moved_call(
        &self,
        call_id: &str,
        doors: CallDoors,
        pidfd: OwnedFd,
        deciding: &dyn Deciding,
    ) -> Result<Option<String>, SessionError> {
        // Copied before the doors take the pidfd: the kill if one of them fails.
        let killer = pidfd.try_clone().ok().map(Killer::from_pidfd);
        let served = self
            .serve_moved_doors(call_id, doors, pidfd, deciding)
            .await;
        if served.is_err()
            && let Some(killer) = &killer
        {
            killer.kill();
        }
        served
    }

    async fn serve_moved_doors(
        &self,
        call_id: &str,
        doors: CallDoors,
        pidfd: OwnedFd,
        deciding: &dyn Deciding,
    ) -> Result<Option<String>, SessionError> {
        let door = |what: &str, source: std::io::Error| {
            SessionError::Sandbox(SandboxError::Host {
                what: format!("serve the call's {what}"),
                source,
            })
        };
        let CallDoors {
            egress,
            channel,
            seccomp,
        } = doors;
        let watch = seccomp
            .map(|l| SeccompWatch::start(l, &pidfd))
            .transpose()
            .map_err(|e| door("seccomp watch", e))?;
        // The gits a channel's request is answered with are found at a session's first plan;
        // an owner that took the session over may not have made one yet.
        if channel.is_some() && self.git.as_ref().is_some_and(|g| g.found().is_none()) {
            crate::nix::off_the_runtime(|| {
                self.plan_asking(&["true".to_string()], &CallOptions::default(), false)
            });
        }
        let pipeline = deciding.pipeline_for(self);
        let served = Doors {
            call_id,
            pipeline: &pipeline,
            credentials: Arc::new(Credentials::new()),
            guest: None,
        };
        let proxy = egress
            .map(|fd| {
                let listener = TcpListener::from(fd);
                listener
                    .set_nonblocking(true)
                    .map_err(|e| door("egress listener", e))?;
                self.open_egress(&served, listener)
            })
            .transpose()?;
        // Readable once every process of the call is gone.
        let gone = chock_sandbox::wait_gone(pidfd);
        let ended = self.serve_channel_until(&served, channel, gone).await;
        if let Some(proxy) = proxy {
            proxy.shutdown().await;
        }
        ended.map_err(|e| door("init's pidfd", e))?;
        Ok(watch.and_then(|w| w.killed()))
    }
}
