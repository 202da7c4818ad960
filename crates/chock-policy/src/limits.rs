//! `[limits]` and `[subagents]`: numbers the sandbox and the agent loop enforce, with defaults.
//!
//! Every field is optional; a missing one takes the default below. The org bundle's values are
//! ceilings: a project may ask for less, never more, and a default above the org's ceiling is lowered to it.

use serde::Serialize;

/// Resource limits for one confined call. Memory and sizes are in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LimitsConfig {
    /// Wall-clock seconds before the whole process tree is killed. Default 600.
    pub timeout_secs: u64,
    /// Memory for the call's cgroup, MiB. Default 4096.
    pub memory_mb: u64,
    /// Processes and threads. Default 512.
    pub pids: u64,
    /// CPU share in percent of one core (200 = two cores). Default 200.
    pub cpu_percent: u64,
    /// Largest file a call may write, MiB (RLIMIT_FSIZE). Default 1024.
    pub file_size_mb: u64,
    /// Open file descriptors (RLIMIT_NOFILE). Default 1024.
    pub open_files: u64,
    /// Size of the call's private /tmp, MiB. Default 512.
    pub tmp_size_mb: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            timeout_secs: 600,
            memory_mb: 4096,
            pids: 512,
            cpu_percent: 200,
            file_size_mb: 1024,
            open_files: 1024,
            tmp_size_mb: 512,
        }
    }
}

impl LimitsConfig {
    /// The fields by name, for applying a table generically.
    pub(crate) fn fields_mut(&mut self) -> [(&'static str, &mut u64); 7] {
        [
            ("timeout_secs", &mut self.timeout_secs),
            ("memory_mb", &mut self.memory_mb),
            ("pids", &mut self.pids),
            ("cpu_percent", &mut self.cpu_percent),
            ("file_size_mb", &mut self.file_size_mb),
            ("open_files", &mut self.open_files),
            ("tmp_size_mb", &mut self.tmp_size_mb),
        ]
    }
}

/// How far an agent may delegate: read now, enforced by the subagent spawner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SubagentsConfig {
    /// How many generations below the top agent may exist (0: no subagents). Default 2.
    pub max_depth: u64,
    /// How many children one agent may have running at once. Default 4.
    pub max_width: u64,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        SubagentsConfig {
            max_depth: 2,
            max_width: 4,
        }
    }
}

impl SubagentsConfig {
    pub(crate) fn fields_mut(&mut self) -> [(&'static str, &mut u64); 2] {
        [
            ("max_depth", &mut self.max_depth),
            ("max_width", &mut self.max_width),
        ]
    }
}

/// `[budget]`: what a session may spend on its model calls (each field optional; neither: no
/// budget). The org bundle's values are ceilings: the stricter of the two applies, and a project
/// with no `[budget]` under an org that has one gets the org's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BudgetConfig {
    /// US dollars, priced by the provider's price table.
    pub usd: Option<f64>,
    /// Tokens, input and output together.
    pub tokens: Option<u64>,
}

impl BudgetConfig {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.usd.is_some() || self.tokens.is_some()
    }

    /// The stricter of the two, field by field.
    pub fn stricter(self, other: BudgetConfig) -> BudgetConfig {
        fn min<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        BudgetConfig {
            usd: min(self.usd, other.usd),
            tokens: min(self.tokens, other.tokens),
        }
    }
}
