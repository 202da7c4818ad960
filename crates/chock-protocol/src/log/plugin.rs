//! A WebAssembly plugin's call: the limits it ran under, what it used, how it ended.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a plugin call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PluginEnd {
    /// The tool returned text for the model.
    Returned,
    /// The tool returned an error for the model.
    ToolError,
    /// The call was refused before the plugin started (an import the table now denies).
    Refused {
        /// Why, naming the import and the rule.
        reason: String,
    },
    /// The fuel budget ran out (a loop that does not end).
    OutOfFuel,
    /// The wall-clock timeout passed.
    TimedOut,
    /// The plugin asked for more memory than its cap.
    MemoryCap,
    /// The output was larger than its cap; none of it reached the model.
    OutputTooLarge {
        /// The output's size in bytes.
        bytes: u64,
    },
    /// The plugin trapped (a panic, an abort, `exit`, a bad instruction).
    Trapped {
        /// The trap, in words.
        reason: String,
    },
}

/// One line a plugin logged (its `log` import, or its stdout and stderr).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginLogLine {
    /// `debug`, `info`, `warn`, `error`, or `stdout`/`stderr`.
    pub level: String,
    /// The text, cut at 1 KiB.
    pub message: String,
}

/// A plugin tool's call ended: the pinned component, the limits of its fresh store, what it used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginCall {
    /// The plugin's name in chock.toml.
    pub plugin: String,
    /// The tool inside the plugin.
    pub tool: String,
    /// The SHA-256 of the component's bytes (its pin).
    pub sha256: String,
    /// How it ended.
    pub end: PluginEnd,
    /// Fuel the call was given.
    pub fuel_limit: u64,
    /// Fuel it used.
    pub fuel_used: u64,
    /// The wall-clock timeout, in milliseconds.
    pub timeout_ms: u64,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
    /// The memory cap, in bytes.
    pub memory_limit: u64,
    /// The most memory it held, in bytes.
    pub memory_peak: u64,
    /// The output cap, in bytes.
    pub output_limit: u64,
    /// The output's size, in bytes.
    pub output_bytes: u64,
    /// What it logged (at most 100 lines; `log_dropped` says how many more there were).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<PluginLogLine>,
    /// Lines it logged beyond the 100 kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub log_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
