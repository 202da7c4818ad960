//! Step codes of layers without their own table: what a call's processes report with a failed
//! layer (`wire/report.rs`) and the host turns into words (`host/hints.rs`).

pub const UNSHARE: u32 = 0;
pub const SETGROUPS: u32 = 1;
pub const UID_MAP: u32 = 2;
pub const GID_MAP: u32 = 3;
pub const SETSID: u32 = 10;
pub const FORK: u32 = 11;
pub const PIDFD: u32 = 12;
pub const STDIO: u32 = 13;
pub const SIGNALS: u32 = 14;
pub const HOSTNAME: u32 = 20;
pub const LOOPBACK: u32 = 21;
pub const PROXY: u32 = 22;
pub const DUMPABLE: u32 = 23;
pub const PDEATHSIG: u32 = 24;
pub const CHDIR: u32 = 25;
pub const CLOSE: u32 = 26;
pub const NNP: u32 = 27;
pub const SECCOMP: u32 = 28;
pub const GATE: u32 = 29;
/// The network namespace's hand-off (a pipe and a pidfd of the setup), before the fork.
pub const NET_OPEN: u32 = 30;
/// The init waited for the network namespace; the setup ended without making it.
pub const NET_WAIT: u32 = 31;
/// The init's `setns` into the network namespace.
pub const NET_JOIN: u32 = 32;
/// The init, once it asked to die with its setup process, found it gone already.
pub const SETUP_GONE: u32 = 33;
/// The command put the host channel at its descriptor number (`Plan::host_channel`).
pub const HOST_CHANNEL: u32 = 34;
/// Mount steps are reported as MOUNT_BASE + their index.
pub const MOUNT_BASE: u32 = 1000;
/// A call's own mounts in a session sandbox (`Prepared::fresh`), as FRESH_BASE + their index.
pub const FRESH_BASE: u32 = 2000;
