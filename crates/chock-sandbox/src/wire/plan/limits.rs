//! The resource limits of one call.

use serde::{Deserialize, Serialize};

/// Resource limits. rlimits are always applied; cgroup limits are best effort (the one best-effort
/// layer), and the call's [`crate::LimitsReport`] says which were on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// RLIMIT_NOFILE.
    pub nofile: u64,
    /// RLIMIT_FSIZE in bytes: the largest file the call can write.
    pub fsize_bytes: u64,
    /// cgroup v2 memory.max in bytes.
    pub memory_max_bytes: Option<u64>,
    /// cgroup v2 pids.max.
    pub pids_max: Option<u64>,
    /// cgroup v2 cpu.max as a share of one CPU in percent (100 = one whole CPU).
    pub cpu_max_percent: Option<u32>,
    /// Size of the call's /tmp (and of the sandbox home) tmpfs, in bytes.
    pub tmp_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            nofile: 4096,
            fsize_bytes: 8 << 30,
            memory_max_bytes: Some(4 << 30),
            pids_max: Some(1024),
            cpu_max_percent: None,
            tmp_size_bytes: 1 << 30,
        }
    }
}
