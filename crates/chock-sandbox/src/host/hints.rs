//! Turning a child's (layer, step, errno) into words: what failed, and what the user can do.

use crate::child::init::step;
use crate::child::landlock_rules;
use crate::child::prepared::Prepared;
use crate::wire::error::{Layer, SandboxError};

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Why user namespaces may be refused on this machine, and the switch that allows them.
pub(crate) fn user_namespace() -> String {
    if read_sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return "user namespaces are disabled: sysctl -w kernel.unprivileged_userns_clone=1".into();
    }
    if read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
    {
        return "AppArmor restricts unprivileged user namespaces: sysctl -w \
                kernel.apparmor_restrict_unprivileged_userns=0, or give chock an AppArmor profile with `userns,`"
            .into();
    }
    if read_sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return "user namespaces are disabled: sysctl -w user.max_user_namespaces=15000".into();
    }
    "the kernel refused a user namespace (inside a container? run chock on the host, or allow \
     nested user namespaces in the container runtime)"
        .into()
}

/// What to do when Landlock is missing.
pub(crate) fn landlock_missing() -> String {
    let lsm = read_sysctl("/sys/kernel/security/lsm").unwrap_or_default();
    if lsm.is_empty() || lsm.contains("landlock") {
        "Landlock needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y".into()
    } else {
        format!(
            "Landlock is built but not enabled: add `lsm=landlock,{lsm}` to the kernel command line"
        )
    }
}

/// What to do when the policy file cannot be bound safely (a symlink, not a regular file, outside
/// the project, or changed since it was checked).
pub(crate) const POLICY_FILE_HINT: &str = "the project's chock.toml must be a regular file inside the project, not a symlink: replace \
     the link by the file itself (`cp --remove-destination \"$(readlink -f chock.toml)\" chock.toml`)";

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

fn step_words(layer: Layer, s: u32, prepared: &Prepared) -> String {
    if s >= step::FRESH_BASE {
        let i = usize::try_from(s - step::FRESH_BASE).unwrap_or(usize::MAX);
        return prepared
            .fresh
            .get(i)
            .map_or_else(|| "a mount".to_string(), |st| st.label.clone());
    }
    if s >= step::MOUNT_BASE {
        let i = usize::try_from(s - step::MOUNT_BASE).unwrap_or(usize::MAX);
        return prepared
            .steps
            .get(i)
            .map_or_else(|| "a mount".to_string(), |st| st.label.clone());
    }
    match (layer, s) {
        (Layer::UserNamespace, step::SETGROUPS) => "writing /proc/self/setgroups".into(),
        (Layer::UserNamespace, step::UID_MAP) => "writing /proc/self/uid_map".into(),
        (Layer::UserNamespace, step::GID_MAP) => "writing /proc/self/gid_map".into(),
        (Layer::Landlock, s) => landlock_rules::describe_step(s).into(),
        (Layer::Capabilities, 1) => "locking securebits".into(),
        (Layer::Capabilities, 2) => "dropping the bounding set".into(),
        (Layer::Capabilities, 3) => "clearing the ambient set".into(),
        (Layer::Capabilities, 4) => "clearing effective, permitted and inheritable".into(),
        (Layer::Capabilities, 5) => "a capability is still held after dropping".into(),
        (Layer::Rlimits, 1) => "RLIMIT_CORE".into(),
        (Layer::Rlimits, 2) => "RLIMIT_FSIZE".into(),
        (Layer::Rlimits, 3) => "RLIMIT_NOFILE".into(),
        (_, step::UNSHARE) => "unshare".into(),
        (_, step::SETSID) => "setsid".into(),
        (_, step::FORK) => "fork".into(),
        (_, step::PIDFD) => "pidfd_open".into(),
        (_, step::STDIO) => "installing stdin/stdout/stderr".into(),
        (_, step::SIGNALS) => "resetting signal handlers".into(),
        (_, step::HOSTNAME) => "sethostname".into(),
        (_, step::LOOPBACK) => "bringing up loopback".into(),
        (_, step::PROXY) => "the proxy listener".into(),
        (_, step::DUMPABLE) => "PR_SET_DUMPABLE".into(),
        (_, step::PDEATHSIG) => "PR_SET_PDEATHSIG".into(),
        (_, step::CHDIR) => "entering the working directory".into(),
        (_, step::CLOSE) => "closing inherited descriptors".into(),
        (_, step::NNP) => "PR_SET_NO_NEW_PRIVS".into(),
        (_, step::SECCOMP) => "installing the filter".into(),
        (_, step::NET_OPEN) => "the network namespace's hand-off (a pipe and a pidfd)".into(),
        (_, step::NET_WAIT) => {
            "waiting for the network namespace (the setup process ended first)".into()
        }
        (_, step::NET_JOIN) => "setns into the call's network namespace".into(),
        (_, step::SETUP_GONE) => {
            "the setup process after PR_SET_PDEATHSIG (ended, or its pidfd did not poll)".into()
        }
        (_, step::GATE) => "waiting at the gate (the call's key was dropped unopened)".into(),
        _ => format!("step {s}"),
    }
}

fn hint(layer: Layer, errno: i32) -> String {
    match layer {
        Layer::UserNamespace => user_namespace(),
        Layer::MountNamespace
        | Layer::PidNamespace
        | Layer::IpcNamespace
        | Layer::UtsNamespace
        | Layer::NetNamespace
        | Layer::CgroupNamespace => format!(
            "the kernel refused this namespace inside a user namespace; check that it is built in \
             (CONFIG_{}_NS) and not limited by user.max_*_namespaces",
            match layer {
                Layer::MountNamespace => "MNT",
                Layer::PidNamespace => "PID",
                Layer::IpcNamespace => "IPC",
                Layer::UtsNamespace => "UTS",
                Layer::NetNamespace => "NET",
                _ => "CGROUP",
            }
        ),
        Layer::Filesystem if errno == libc::EINVAL => {
            "pivot_root needs a real root filesystem (not an initramfs or a chroot); run chock on the host".into()
        }
        Layer::Filesystem if errno == libc::EPERM => {
            "the kernel refused a mount inside the user namespace (a container that masks /proc, or a \
             locked mount); run chock on the host"
                .into()
        }
        Layer::Filesystem => "a path the sandbox binds is missing or unreadable; check the [sandbox] paths".into(),
        Layer::Workspace if errno == libc::ENOENT => {
            "the working directory does not exist inside the workspace".into()
        }
        Layer::Workspace if errno == libc::EOPNOTSUPP => {
            "an in-memory workspace (`chock exec` without `--keep`) needs tmpfs with user.* \
             extended attributes (Linux 6.6); `--keep` keeps the workspace on disk"
                .into()
        }
        Layer::Workspace => "overlayfs in a user namespace needs Linux 5.11 or later; or use a bind workspace".into(),
        Layer::PolicyFile => POLICY_FILE_HINT.into(),
        Layer::Landlock => landlock_missing(),
        Layer::Seccomp => "seccomp needs CONFIG_SECCOMP_FILTER=y".into(),
        Layer::Network => "the network namespace's loopback could not be configured".into(),
        _ => "run `chock doctor` to see which layers this machine supports".into(),
    }
}

/// The error for a layer a child could not apply.
pub(crate) fn layer_error(layer: Layer, s: u32, errno: i32, prepared: &Prepared) -> SandboxError {
    SandboxError::Layer {
        layer,
        reason: format!("{}: {}", step_words(layer, s, prepared), errno_text(errno)),
        hint: hint(layer, errno),
    }
}
