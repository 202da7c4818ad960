//! Errors of the sandbox, and the layers they name.

use serde::{Deserialize, Serialize};

/// One layer of the confinement. Every layer is required except [`Layer::CgroupLimits`] (best effort,
/// reported in the call's [`crate::LimitsReport`] instead of failing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Layer {
    /// A user namespace: the call's ids and capabilities count only inside it.
    UserNamespace = 1,
    /// A mount namespace: the call's mounts are its own.
    MountNamespace = 2,
    /// A pid namespace: the call sees and signals only its own processes.
    PidNamespace = 3,
    /// An IPC namespace: no System V IPC or POSIX queues shared with the host.
    IpcNamespace = 4,
    /// A UTS namespace: a host name of its own.
    UtsNamespace = 5,
    /// A network namespace: no host interface.
    NetNamespace = 6,
    /// A cgroup namespace: the call sees its own cgroup as the root.
    CgroupNamespace = 7,
    /// The fresh root: tmpfs, binds, /dev, /proc, pivot_root.
    Filesystem = 8,
    /// The workspace mount (bind or overlay).
    Workspace = 9,
    /// Loopback and the proxy listener inside the network namespace.
    Network = 10,
    /// A new session without the host's controlling terminal.
    Session = 11,
    /// Resource limits (core dumps, file size, open descriptors).
    Rlimits = 12,
    /// Dropping every capability, and locking the securebits so none comes back.
    Capabilities = 13,
    /// `no_new_privs`: no exec gains privileges (setuid, file capabilities).
    NoNewPrivs = 14,
    /// Landlock: where the call may write, the TCP it may make, its abstract sockets and signals.
    Landlock = 15,
    /// The system call filter ([`crate::seccomp_rules::RULES`]).
    Seccomp = 16,
    /// Closing every descriptor but 0, 1, 2.
    Descriptors = 17,
    /// Process lifetime: the init of the pid namespace, pidfds.
    Lifetime = 18,
    /// cgroup v2 limits: best effort.
    CgroupLimits = 19,
    /// The policy file bound read-only over itself: it must be a regular file inside the project,
    /// reached without a symlink, so the bind cannot be redirected to another host file.
    PolicyFile = 20,
}

impl Layer {
    /// Every layer, in the order the driver applies them.
    pub const ALL: [Layer; 20] = [
        Layer::Session,
        Layer::CgroupLimits,
        Layer::UserNamespace,
        Layer::MountNamespace,
        Layer::PidNamespace,
        Layer::IpcNamespace,
        Layer::UtsNamespace,
        Layer::NetNamespace,
        Layer::CgroupNamespace,
        Layer::Lifetime,
        Layer::Filesystem,
        Layer::Workspace,
        Layer::PolicyFile,
        Layer::Network,
        Layer::Rlimits,
        Layer::Capabilities,
        Layer::NoNewPrivs,
        Layer::Landlock,
        Layer::Seccomp,
        Layer::Descriptors,
    ];

    /// The layer with this wire id (the child reports layers as one byte).
    pub fn from_id(id: u8) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| *l as u8 == id)
    }

    /// A short name, as printed by `chock doctor` and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Layer::UserNamespace => "user namespace",
            Layer::MountNamespace => "mount namespace",
            Layer::PidNamespace => "pid namespace",
            Layer::IpcNamespace => "ipc namespace",
            Layer::UtsNamespace => "uts namespace",
            Layer::NetNamespace => "network namespace",
            Layer::CgroupNamespace => "cgroup namespace",
            Layer::Filesystem => "filesystem",
            Layer::Workspace => "workspace mount",
            Layer::PolicyFile => "policy file",
            Layer::Network => "loopback network",
            Layer::Session => "new session",
            Layer::Rlimits => "rlimits",
            Layer::Capabilities => "capabilities",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::Descriptors => "descriptors",
            Layer::Lifetime => "lifetime",
            Layer::CgroupLimits => "cgroup limits",
        }
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong with a confined call.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A layer could not be applied; the command never ran.
    #[error("sandbox layer `{layer}` could not be applied: {reason}\n  hint: {hint}")]
    Layer {
        /// The layer that failed.
        layer: Layer,
        /// Why it could not be applied (usually the step and what the kernel said).
        reason: String,
        /// What the person can do about it.
        hint: String,
    },
    /// The plan itself is unusable (caught before any process exists).
    #[error("invalid sandbox plan: {0}")]
    Plan(String),
    /// Every layer was on but the program could not be executed.
    #[error("cannot execute `{program}` inside the sandbox: {reason}")]
    Exec {
        /// The program (`argv[0]`).
        program: String,
        /// What `execve` said.
        reason: String,
        /// Whether it failed with ENOENT (no such program), so the caller can say so.
        not_found: bool,
    },
    /// The host side failed (a pipe, a wait, ...).
    #[error("sandbox host side: {what}: {source}")]
    Host {
        /// What the host was doing.
        what: String,
        /// What the system said.
        source: std::io::Error,
    },
}

impl SandboxError {
    pub(crate) fn host(what: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Host {
            what: what.into(),
            source,
        }
    }
}
