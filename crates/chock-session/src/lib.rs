//! One session on the host: its policy, log and workspace, and the confined call that ties decision,
//! log and sandbox together. There is one confined call, awaited ([`Session::confined_call_async`]):
//! `chock exec` and the agent's run_command both go through it, so the two cannot drift apart.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod approve;
mod call;
mod call_async;
mod call_doors;
mod call_end;
mod call_output;
pub mod channel;
mod classify;
mod egress;
mod error;
mod fork;
pub mod git_shim;
mod guest_snapshot;
mod nix;
mod running;
mod service;
mod shim_cache;
mod shim_layers;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chock_log::{Log, SessionHeader};
use chock_policy::Policy;
use chock_workspace::Workspace;

pub use approve::{Deciding, NoApprover};
pub use call::{CallOptions, CallOutcome, CallResult};
pub use call_output::{Keep, Keeping, KeptEnd, Output, OutputSink, Stream, StreamSink};
pub use classify::{Classified, ExecContext};
pub use egress::PROXY_PORT;
pub use error::SessionError;
pub use fork::{ForkRefusal, Forked, fork};
pub use nix::{DevShell, NixError, Provisioned, find_nix};
pub use running::RunningCalls;
pub use service::{Service, ServiceOptions};

/// How to open a session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Where session directories live (default: [`chock_log::sessions_root`]).
    pub sessions_root: Option<PathBuf>,
    /// What `session.start` says beyond what the session fills in itself (the command, the
    /// provider and model): the session adds the project and policy files.
    pub header: SessionHeader,
    /// Names of environment variables that hold keys (a provider's `key_env`, the search backend's):
    /// never passed into a call, even when the project's `[sandbox] env` names them, because the
    /// agent reads a call's environment.
    pub withheld_env: Vec<String>,
    /// The workspace is removed when the session closes, never reviewed or applied (`chock exec`
    /// without `--keep`): it gets the overlay and nothing else — no base commit, no checkpoints,
    /// no git process ([`Workspace::create_scratch`]). Its calls are confined exactly as any
    /// other session's; only the record a later review would need is not written.
    pub scratch: bool,
    /// How the session's calls follow one another ([`Calls`]): whether they share one overlay
    /// instance or each mounts its own.
    pub calls: Calls,
    /// The git shim program ([`git_shim::installed`], docs/git.md): when set, every call gets
    /// the host channel and the shim over every real git of its tree, and each git invocation
    /// is an act `git.<sub>` decided by the session. `None`: git runs as any program does
    /// (`exec.system.git`), and no `git.*` rule applies.
    pub git_shim: Option<PathBuf>,
}

/// How a session's confined calls follow one another, which decides how each gets the workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Calls {
    /// Calls may run at the same time (the agent's runtime): they share the session's one overlay
    /// instance, which a helper process makes (a fork, a user and a mount namespace: about 2 ms
    /// before the first call on this machine).
    #[default]
    Overlapping,
    /// One at a time: each call's own sandbox mounts the workspace overlay, inside its own
    /// namespaces; calls that would overlap wait for each other. A scratch workspace's instances
    /// are `volatile`, as the shared one is.
    InTurn,
    /// Exactly one call (`chock exec`), mounted as [`Calls::InTurn`]'s are; a second is refused
    /// ([`SessionError::OneCallMade`]). Nobody reads a scratch workspace after that call, so its
    /// upper layer is a tmpfs of the call's own (chock-sandbox's `OwnOverlay::InMemory`): the
    /// call's writes never reach a disk. On a kernel whose tmpfs keeps no `user.` extended
    /// attributes (before Linux 6.6) it is `volatile` on the disk instead.
    One,
}

/// An open session.
#[derive(Debug)]
pub struct Session {
    project: PathBuf,
    policy: Policy,
    /// The policy every decision reads, shared with the agent: its ratchet (restrict_self) changes
    /// during the session, and the confined call must see each narrowing at once.
    live_policy: Arc<RwLock<Policy>>,
    log: Log,
    workspace: Workspace,
    /// What confines the session's calls (chock-sandbox's execution seam), holding what they
    /// share: the one overlay instance the calls share (made when a call needs it and unmounted
    /// when no call holds it), for an overlay workspace; the host sockets under the policy's
    /// declared `[sandbox]` paths, walked at the first call and kept current by inotify, so a
    /// call does not walk a toolchain tree to find the sockets to mask, and a socket bound
    /// between two calls is masked in the next one; and the session init its calls fork from.
    confiner: chock_sandbox::LocalConfiner,
    /// With `[sandbox] isolation = "microvm"`: the guest each call runs in instead
    /// (docs/microvm.md). Its calls mount their own overlay instance in the guest, one at a time.
    guest: Option<chock_vm::GuestConfiner>,
    /// Whether the log already says the socket index walks every call (see
    /// [`chock_protocol::log::Note::SocketIndexDegraded`]).
    sockets_degraded_noted: std::sync::atomic::AtomicBool,
    next_call: AtomicU64,
    /// See [`SessionOptions::withheld_env`].
    withheld_env: Vec<String>,
    /// The confined calls running now (an interrupt ends them).
    running: RunningCalls,
    /// Held by each call of a session whose calls mount their own overlay instance
    /// ([`Calls::InTurn`], [`Calls::One`]) across the whole awaited call: two instances of one
    /// upper directory must never be mounted at once. An async mutex, so a call waiting its turn
    /// blocks no runtime thread. It holds whether a [`Calls::One`] session has made its call.
    in_turn: Option<tokio::sync::Mutex<bool>>,
    /// How the session's calls are made ([`SessionOptions::calls`]).
    calls: Calls,
    /// Where a call's own overlay instance keeps its writes.
    own_overlay: chock_sandbox::OwnOverlay,
    /// The project's dev shell and the programs provisioned since (docs/nix.md).
    nix: nix::NixState,
    /// The git shim and the host's real gits ([`SessionOptions::git_shim`]).
    git: Option<git_shim::Wiring>,
}

/// The guest confiner for `[sandbox] isolation = "microvm"`, from where Chock keeps the guest
/// kernel and its init (`chock_vm::GuestConfig::from_env`). One that cannot be made fails the
/// session's opening: there is no fallback to the in-process sandbox alone.
/// With `snapshots` (`[sandbox] snapshots = true`) its guests can be snapshotted (virtio-9p
/// shares, a kernel with the 9p modules).
fn guest_confiner(snapshots: bool) -> Result<chock_vm::GuestConfiner, SessionError> {
    let refused = |e: String| {
        SessionError::Sandbox(chock_sandbox::SandboxError::Plan(format!(
            "`[sandbox] isolation = \"microvm\"`: {e}"
        )))
    };
    let mut config = chock_vm::GuestConfig::from_env().map_err(|e| refused(e.to_string()))?;
    config.snapshots = snapshots;
    chock_vm::GuestConfiner::new(&config).map_err(|e| refused(e.to_string()))
}

/// The session's throwaway workspace. One small function so the backing can change without touching
/// the rest: today an overlay over the project (chock-workspace), its upper layer in the session;
/// a `scratch` one records nothing for a later review ([`SessionOptions::scratch`]), and the one
/// call's in-memory one has nothing on disk at all.
fn create_workspace(
    project: &Path,
    log: &Log,
    scratch: bool,
    own: chock_sandbox::OwnOverlay,
) -> Result<Workspace, SessionError> {
    let (dir, id) = (log.dir(), log.id().as_str());
    Ok(match own {
        chock_sandbox::OwnOverlay::InMemory => Workspace::in_memory(project, dir, id)?,
        _ if scratch => Workspace::create_scratch(project, dir, id)?,
        _ => Workspace::create(project, dir, id)?,
    })
}

/// Where a call's own overlay instance keeps its writes, by how the session's calls follow one
/// another and whether anybody reads the workspace after them.
fn own_overlay(calls: Calls, scratch: bool, guest: bool) -> chock_sandbox::OwnOverlay {
    use chock_sandbox::OwnOverlay;
    match calls {
        // The host's kernel answers for its own tmpfs, not the guest's (Debian's cloud kernel
        // 6.1 keeps no `user.` attributes on tmpfs): a guest's call keeps its layers on disk.
        Calls::One if scratch && !guest && chock_sandbox::in_memory_supported() => {
            OwnOverlay::InMemory
        }
        Calls::One | Calls::InTurn if scratch => OwnOverlay::Volatile,
        _ => OwnOverlay::Durable,
    }
}

/// How [`Session::assemble`] builds a session's overlay.
#[derive(Clone)]
struct Assembly {
    scratch: bool,
    calls: Calls,
    /// Chosen once, with the workspace it needs ([`own_overlay`]).
    own_overlay: chock_sandbox::OwnOverlay,
    /// [`SessionOptions::git_shim`].
    git_shim: Option<PathBuf>,
}

/// What the policy's `[sandbox] toolchains` expanded to, for `session.start`.
fn toolchains_of(policy: &Policy) -> Vec<chock_protocol::log::ToolchainExpansion> {
    let text = |p: &[PathBuf]| p.iter().map(|p| p.display().to_string()).collect();
    policy
        .sandbox()
        .toolchains
        .iter()
        .map(|t| chock_protocol::log::ToolchainExpansion {
            name: t.name.clone(),
            found: text(&t.found),
            read: text(&t.read),
            write: text(&t.write),
            env: t.env.clone(),
            from: text(&t.from),
        })
        .collect()
}

impl Session {
    /// Opens a session on `project_dir`: the policy is read first (before any sandbox exists,
    /// rule 2), then the log is created, then the workspace.
    pub fn open(project_dir: &Path, options: SessionOptions) -> Result<Session, SessionError> {
        let project = project_dir
            .canonicalize()
            .map_err(|source| SessionError::Project {
                path: project_dir.to_path_buf(),
                source,
            })?;
        if !project.is_dir() {
            return Err(SessionError::Project {
                path: project.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let policy = Policy::load(&project)?;
        let root = match options.sessions_root {
            Some(r) => r,
            None => chock_log::sessions_root()?,
        };
        let header = SessionHeader {
            project: Some(project.clone()),
            policy_file: policy.project_file().map(Path::to_path_buf),
            org_policy_file: policy.org_file().map(Path::to_path_buf),
            toolchains: toolchains_of(&policy),
            ..options.header
        };
        let guest = policy.sandbox().isolation == chock_policy::Isolation::Microvm;
        let own = own_overlay(options.calls, options.scratch, guest);
        // A workspace kept in memory touches nothing in the session directory, so the log's
        // directory and files are made while the session gets its first call ready (its sandbox
        // built beside them); its first record waits for them (chock-log's `create.rs`). Every
        // other workspace lives in that directory.
        let log = if own == chock_sandbox::OwnOverlay::InMemory {
            Log::create_in_background(&root, header)?
        } else {
            Log::create(&root, header)?
        };
        let workspace = create_workspace(&project, &log, options.scratch, own)?;
        Self::assemble(
            project,
            policy,
            log,
            workspace,
            1,
            options.withheld_env,
            Assembly {
                scratch: options.scratch,
                calls: options.calls,
                own_overlay: own,
                git_shim: options.git_shim,
            },
        )
    }

    /// The session over what was opened: the shared overlay of its workspace is made here
    /// (`volatile` for a scratch workspace: its upper directory is thrown away, so neither its
    /// calls' `fsync`s nor the instance's unmount need to sync the filesystem under it).
    fn assemble(
        project: PathBuf,
        policy: Policy,
        log: Log,
        workspace: Workspace,
        next_call: u64,
        withheld_env: Vec<String>,
        how: Assembly,
    ) -> Result<Session, SessionError> {
        let Assembly {
            scratch,
            calls,
            own_overlay,
            git_shim,
        } = how;
        let guest = match policy.sandbox().isolation {
            chock_policy::Isolation::Microvm => Some(guest_confiner(policy.sandbox().snapshots)?),
            chock_policy::Isolation::Process => None,
        };
        let overlay = match workspace.mount() {
            _ if guest.is_some() => None,
            chock_sandbox::WorkspaceMount::Overlay { .. } if calls != Calls::Overlapping => None,
            mount @ chock_sandbox::WorkspaceMount::Overlay { .. } if scratch => {
                Some(chock_sandbox::SharedOverlay::new_volatile(&mount)?)
            }
            mount @ chock_sandbox::WorkspaceMount::Overlay { .. } => {
                Some(chock_sandbox::SharedOverlay::new(&mount)?)
            }
            chock_sandbox::WorkspaceMount::Bind { .. }
            | chock_sandbox::WorkspaceMount::ReadOnly { .. } => None,
        };
        let push_project = project.clone();
        let guest_calls = guest.is_some();
        let push_dir = log.dir().join("git-host");
        let shim_layers = log.dir().join("git-shims");
        // The user's layers kept between sessions, beside the sessions root.
        let shim_cache = log
            .dir()
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join(shim_cache::CACHE_DIR));
        if git_shim.is_some() {
            // The push directory lives in the session's directory, which the log may still be
            // making on its own thread: made first by anyone else, the log's exclusive creation
            // of it would fail.
            log.made()?;
        }
        let session = Session {
            project,
            live_policy: Arc::new(RwLock::new(policy.clone())),
            policy,
            log,
            workspace,
            confiner: chock_sandbox::LocalConfiner::new(
                overlay,
                Arc::new(chock_sandbox::SocketIndex::new()),
            ),
            sockets_degraded_noted: std::sync::atomic::AtomicBool::new(false),
            next_call: AtomicU64::new(next_call),
            withheld_env,
            running: RunningCalls::default(),
            // A guest's calls each mount their own overlay instance: never two at once.
            in_turn: (calls != Calls::Overlapping || guest.is_some())
                .then(|| tokio::sync::Mutex::new(false)),
            guest,
            calls,
            own_overlay,
            nix: nix::NixState::default(),
            // In a guest the shim's channel is relayed over the guest's port (docs/microvm.md,
            // "The host channel"); an approved push from a guest is not built yet.
            git: git_shim.map(|shim| {
                let wiring = git_shim::Wiring::new(shim, shim_layers, shim_cache);
                match guest_calls {
                    true => wiring.for_guest(),
                    false => wiring.with_push(&push_project, push_dir),
                }
            }),
        };
        session.warm_socket_index();
        Ok(session)
    }

    /// Starts the one walk of the declared `[sandbox]` paths for sockets now, on a thread of its
    /// own, so the session's first call does not wait for it (a 120,000-entry toolchain is about
    /// 100 ms of readdir and inotify watches on ext4); that call takes the index when the walk is
    /// done. Nothing to walk: no thread.
    fn warm_socket_index(&self) {
        let plan = self.plan_for(&["true".to_string()], &CallOptions::default());
        if plan.extra_read.is_empty() && plan.extra_write.is_empty() {
            return;
        }
        let index = Arc::clone(self.confiner.sockets());
        // No thread: the first call walks, as before.
        let _ = std::thread::Builder::new()
            .name("chock-socket-index".into())
            .spawn(move || chock_sandbox::warm_socket_index(&plan, &index));
    }

    /// Opens an existing session again (resume): its log goes on (a torn last line is set aside,
    /// as [`Log::open`] does), its workspace is the one it had, and the policy is read again from
    /// the project before any sandbox exists (rule 2), with the agent's own narrowings (the
    /// `note {about: ratchet}` events) applied in the order they were made — a resumed session is
    /// never wider than the one that stopped.
    pub fn reopen(session_dir: &Path, options: SessionOptions) -> Result<Session, SessionError> {
        let workspace = Workspace::open(session_dir)?;
        let project = workspace.project().to_path_buf();
        let mut policy = Policy::load(&project)?;
        let log = Log::open(session_dir)?;
        // A fork's ratchet starts as its parent's was at the line it forked at.
        fork::apply_ratchet(&mut policy, &chock_log::read_lineage(session_dir)?)?;
        let events = chock_log::read_events(session_dir)?;
        let next = events
            .iter()
            .filter_map(|e| {
                e.call_id
                    .as_deref()?
                    .strip_prefix("call-")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0);
        let session = Self::assemble(
            project,
            policy,
            log,
            workspace,
            next + 1,
            options.withheld_env,
            Assembly {
                // A reopened workspace is one that was kept: its upper directory is the record.
                scratch: false,
                calls: options.calls,
                own_overlay: own_overlay(options.calls, false, false),
                git_shim: options.git_shim,
            },
        )?;
        // A fork at the turn its parent's guest was snapshotted at starts its guest from that
        // snapshot now, before its first call (docs/microvm.md).
        session.warm_up_from_snapshot()?;
        Ok(session)
    }

    /// The variables the person's configuration keeps keys in ([`SessionOptions::withheld_env`]):
    /// never passed to a confined process, whichever table names them.
    pub fn withheld_env(&self) -> &[String] {
        &self.withheld_env
    }

    /// The real project.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The policy the session runs under, as it was read at open (its `[sandbox]` and `[limits]` do
    /// not change; decisions read [`Session::shared_policy`], whose ratchet may have narrowed since).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The live policy every decision reads: the agent narrows its ratchet here (restrict_self).
    pub fn shared_policy(&self) -> Arc<RwLock<Policy>> {
        Arc::clone(&self.live_policy)
    }

    /// Decides one action by the live policy (ratchet included).
    pub fn decide(&self, action: &chock_policy::Action) -> chock_policy::Verdict {
        match self.live_policy.read() {
            Ok(policy) => policy.decide(action),
            Err(poisoned) => poisoned.into_inner().decide(action),
        }
    }

    /// What confines the session's calls, as the execution seam: a call prepared and started
    /// through it runs in this session's sandbox (its shared overlay, socket index and session
    /// init).
    pub fn confiner(&self) -> Arc<dyn chock_sandbox::Confiner> {
        match &self.guest {
            Some(guest) => Arc::new(guest.clone()),
            None => Arc::new(self.confiner.clone()),
        }
    }

    /// The microVM guest the session's calls run in, with `[sandbox] isolation = "microvm"`.
    pub fn guest(&self) -> Option<&chock_vm::GuestConfiner> {
        self.guest.as_ref()
    }

    /// The confined calls running now: [`RunningCalls::kill`] ends one with its whole process
    /// tree (an interrupt).
    pub fn running(&self) -> &RunningCalls {
        &self.running
    }

    /// The session log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The session's workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The project's dev shell, once the session's first call settled it (`None` before, and
    /// for a project with none, or one refused or failed: the log says which).
    pub fn devshell(&self) -> Option<&DevShell> {
        self.nix.devshell()
    }

    /// The programs provisioned so far ([`Session::provision`]), in order.
    pub fn provisioned(&self) -> Vec<Provisioned> {
        self.nix.provisioned()
    }

    fn next_call_id(&self) -> String {
        format!("call-{}", self.next_call.fetch_add(1, Ordering::Relaxed))
    }

    /// Ends the session: logs `session.end` and, unless `keep_workspace`, removes the workspace (the
    /// log stays: it is the record).
    pub fn close(self, keep_workspace: bool) -> Result<(), SessionError> {
        if let Some(git) = &self.git {
            git.remove_host_dir();
        }
        let end = || {
            self.log.record(
                None,
                chock_protocol::log::SessionEnd {
                    reason: chock_protocol::log::EndReason::Closed,
                    error: None,
                    summary: None,
                    workspace_kept: Some(
                        keep_workspace && self.own_overlay != chock_sandbox::OwnOverlay::InMemory,
                    ),
                },
            )
        };
        if keep_workspace || self.own_overlay == chock_sandbox::OwnOverlay::InMemory {
            // Kept, or never on disk: the one call's tmpfs went with its mount namespace.
            end()?;
            return Ok(());
        }
        // The base is not needed for a workspace that goes, and its git must not write into it
        // (or set its ref) while it is removed.
        self.workspace.abandon_base();
        // The workspace is removed while `session.end` is synced: neither waits on the other. A
        // crash in between leaves what a crash right after the record leaves: a workspace the log
        // says was not kept (`chock workspace list` shows it, `chock workspace rm` removes it).
        std::thread::scope(|scope| {
            let removing = scope.spawn(|| chock_workspace::remove(self.log.dir()));
            let ended = end();
            let removed = removing
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            ended?;
            removed?;
            Ok(())
        })
    }
}
