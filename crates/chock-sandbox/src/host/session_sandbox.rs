//! The host side of a session sandbox: a sandbox built once per session, each call forked from an
//! init that lives inside it (docs/sandbox.md, "A sandbox per session").
//!
//! A session's first call is built the per-call way, so a session of one call (`chock exec`)
//! pays nothing for a sandbox it would not reuse; at its second call the host starts a
//! **session init** (`zygote.rs`): a user namespace
//! with the caller's ids, a mount namespace holding the whole tree (fresh root, `/usr`, `/etc`,
//! devices, declared paths with their socket masks, the workspace or its placeholder, the policy
//! file, read-only root) and a uts namespace, with the session init as pid 1 of a pid namespace.
//! It waits on a `SOCK_SEQPACKET` control socket. Each call sends it the command (argv,
//! environment, working directory) and its descriptors; the session init forks the call's setup
//! process, which makes the call's own mount (a copy of the tree), pid, ipc, network and cgroup
//! namespaces, and from there on the call is made as the per-call way makes it (`init.rs`): its
//! fresh mounts (`fresh.rs`), rlimits, capabilities, no_new_privs, Landlock, seccomp.
//!
//! A call runs in the session sandbox only when the sandbox was built for exactly what the call
//! would build: [`SessionKey`] is that comparison, in one place. A call whose key differs (another
//! declared path, another network, a socket bound since under a declared path, the policy file
//! replaced) gets a new session sandbox; the old one lives on until its last running call ends.
//! A session init that died is noticed before the call is sent (its pidfd) or when sending fails,
//! and a new one is built; every layer is still applied in the call and still fails it.

use std::sync::Arc;

use crate::child::init::ChildFds;
use crate::child::prepared::Prepared;
use crate::host::mounts::{self};
use crate::host::prepare;
use crate::host::session_init::{SessionKey, Slot, Zygote, message};
use crate::host::socket_index::SocketIndex;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::plan::{Plan, WorkspaceMount};

/// The largest command message (argv, environment, paths) sent to a session init; a larger one
/// is built the per-call way.
pub(crate) use crate::wire::MAX_MESSAGE;

/// A call to be made in its session's sandbox.
pub(crate) struct SessionCall<'a> {
    prepared: Prepared,
    key: SessionKey,
    slot: &'a Slot,
}

/// What a session call needs prepared. `None`: this call is built the per-call way (the session's
/// first call, or a plan the session sandbox does not cover: a call-owned overlay, too many mounts
/// below a fresh one, a command too large for one message). A cost path only: every layer is
/// applied either way.
pub(crate) fn prepare<'a>(
    plan: &Plan,
    abi: i32,
    seccomp: &[seccompiler::BpfProgram],
    index: &'a SocketIndex,
) -> Result<Option<SessionCall<'a>>, SandboxError> {
    if plan.kept || index.session_slot().first_call() {
        return Ok(None);
    }
    if matches!(plan.workspace, WorkspaceMount::Overlay { .. }) && !plan.shared_overlay {
        return Ok(None);
    }
    let (tree, roots) = mounts::build_session(plan, index)?;
    let Some(fresh) = crate::host::fresh_steps::steps(&tree, &roots)? else {
        return Ok(None);
    };
    let mut prepared = prepare::prepare_with(plan, abi, seccomp.to_vec(), None, tree)?;
    prepared.fresh = fresh;
    if message(&prepared.cmd, 0).len() > MAX_MESSAGE {
        return Ok(None);
    }
    let key = SessionKey::new(plan, &prepared);
    Ok(Some(SessionCall {
        prepared,
        key,
        slot: index.session_slot(),
    }))
}

impl SessionCall<'_> {
    /// Sends the call to the session init (made or remade first when needed); returns the
    /// session init the call runs in (held while it runs) and the prepared data its report is read
    /// against. The call's setup process then reports on `fds.chan` as a per-call setup does.
    pub(crate) fn start_call(
        self,
        plan: &Plan,
        fds: ChildFds,
    ) -> Result<(Arc<Zygote>, Prepared), SandboxError> {
        let mut slot = self.slot.lock();
        let mut failed = None;
        for _ in 0..2 {
            let current = match slot.as_ref() {
                Some(z) if z.key == self.key && z.alive() => Arc::clone(z),
                _ => {
                    // A new sandbox for this key; the old one (if any) ends with its last call.
                    *slot = None;
                    let z = Arc::new(Zygote::start(&self.prepared, plan, self.key.clone())?);
                    *slot = Some(Arc::clone(&z));
                    z
                }
            };
            match current.send(&self.prepared.cmd, &fds) {
                Ok(()) => return Ok((current, self.prepared)),
                // The session init went away since it was checked: once more, on a new one.
                Err(e) => {
                    *slot = None;
                    failed = Some(e);
                }
            }
        }
        Err(SandboxError::Layer {
            layer: Layer::Lifetime,
            reason: format!(
                "the session's sandbox did not take the call: {}",
                failed.map_or_else(String::new, |e| e.to_string())
            ),
            hint: "run `chock doctor`; the next call builds a new session sandbox".into(),
        })
    }
}
