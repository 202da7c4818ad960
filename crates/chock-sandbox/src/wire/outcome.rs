//! What a finished call reports: its status and which limits were on.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ExitStatus {
    /// The command exited with this status.
    Exited(i32),
    /// The command was killed by this signal.
    Signaled(i32),
    /// The timeout passed; every process of the call was killed.
    TimedOut,
}

impl ExitStatus {
    /// The status a shell would show: the exit code, or 128 + signal; `None` for a timeout.
    pub fn code(self) -> Option<i32> {
        match self {
            ExitStatus::Exited(c) => Some(c),
            ExitStatus::Signaled(s) => Some(128 + s),
            ExitStatus::TimedOut => None,
        }
    }
}

/// The end of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// How the call ended (exit code, signal or timeout).
    pub status: ExitStatus,
    /// Which resource limits were on.
    pub limits: LimitsReport,
    /// Wall time from spawn to the end of the last process.
    pub duration: Duration,
    /// The system call for which the sandbox's seccomp filter killed a process of the call (the
    /// first, by the kill row's name), when it did: a SIGKILL alone would not say why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden_call: Option<String>,
}

impl Outcome {
    /// Words on the filter's part in the call's end, for the tool result and `chock exec`: which
    /// forbidden call killed a process, or, for a death by SIGSYS (the kernel's own kill, for a
    /// call through another architecture's system call table), that the filter most likely did.
    pub fn filter_note(&self) -> Option<String> {
        match (&self.forbidden_call, self.status) {
            (Some(call), _) => Some(format!(
                "the sandbox's seccomp filter killed a process of the call: it made the system \
                 call `{call}`, which no call may make (docs/sandbox.md lists them)"
            )),
            (None, ExitStatus::Signaled(s)) if s == libc::SIGSYS => Some(
                "killed by SIGSYS: most likely the sandbox's seccomp filter, for a system call \
                 through another architecture's table (x32 or i386), which no call may make"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// Which limits were on for a call. rlimits are always on; the cgroup ones are best effort, and
/// `cgroup_note` says why one is off.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LimitsReport {
    /// RLIMIT_CORE (always 0).
    pub core_bytes: u64,
    /// RLIMIT_FSIZE.
    pub fsize_bytes: u64,
    /// RLIMIT_NOFILE.
    pub nofile: u64,
    /// Size of the call's /tmp.
    pub tmp_size_bytes: u64,
    /// The cgroup the call ran in, when Chock could make one (it is also used to kill the call).
    pub cgroup: Option<String>,
    /// memory.max, when it was set.
    pub memory_max_bytes: Option<u64>,
    /// pids.max, when it was set.
    pub pids_max: Option<u64>,
    /// cpu.max as percent of one CPU, when it was set.
    pub cpu_max_percent: Option<u32>,
    /// Why a requested cgroup limit is off (empty when all requested limits are on).
    pub cgroup_note: String,
}
