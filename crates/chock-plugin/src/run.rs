//! One call of a plugin's tool: a fresh store with its fuel, its epoch deadline (the wall-clock
//! timeout), its memory cap, and the caller's [`Doors`] behind Chock's imports; then the output
//! checked against its cap. Every way a call can end is a [`CallEnd`], never a string to parse.

use std::time::{Duration, Instant};

use chock_protocol::log::PluginLogLine;
use wasmtime::{ResourceLimiter, Store, Trap};

use crate::bindings::{self, Level, WitPage};
use crate::engine::TICK;
use crate::wasi::{Exited, Timers, TooManyBytes, WasiHost};

/// Lines of log kept per call.
pub(crate) const MAX_LOG_LINES: usize = 100;
/// Bytes kept of one log line.
const MAX_LOG_LINE: usize = 1024;

/// A page the broker fetched for a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The URL after redirects.
    pub final_url: String,
    /// The HTTP status.
    pub status: u16,
    /// The page as readable text, redacted.
    pub text: String,
}

/// The doors behind Chock's imports, for one call. The implementation (chock-tools') settles
/// each act through the one decision pipeline — `fs.read`, `fs.write`, `net.fetch.<host>` — and
/// only then acts; an `Err` is what the plugin reads (a refusal, a missing file). Each method is
/// given the call's wall-clock deadline, which a door that waits (a fetch, a question) keeps.
pub trait Doors: Send {
    /// Reads a file of the workspace copy (`path` relative to its root).
    fn read_file(&mut self, path: &str, deadline: Instant) -> Result<Vec<u8>, String>;
    /// Writes a file of the workspace copy.
    fn write_file(&mut self, path: &str, contents: &[u8], deadline: Instant) -> Result<(), String>;
    /// Fetches a URL through the broker.
    fn fetch(&mut self, url: &str, deadline: Instant) -> Result<Page, String>;
}

/// Doors that open nothing: a plugin listing its tools reaches no capability.
pub(crate) struct NoDoors;

impl Doors for NoDoors {
    fn read_file(&mut self, _: &str, _: Instant) -> Result<Vec<u8>, String> {
        Err("no capability while listing tools".into())
    }
    fn write_file(&mut self, _: &str, _: &[u8], _: Instant) -> Result<(), String> {
        Err("no capability while listing tools".into())
    }
    fn fetch(&mut self, _: &str, _: Instant) -> Result<Page, String> {
        Err("no capability while listing tools".into())
    }
}

/// The limits of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub fuel: u64,
    pub timeout: Duration,
    pub memory: u64,
    pub output: u64,
}

/// Bytes one table element is counted as against the memory cap. Wasmtime holds a `funcref` or
/// `externref` element as one host pointer (8 bytes on a 64-bit host) and a continuation element as
/// two; 16 counts every kind at its largest, so a plugin can never hold more table memory than its
/// cap says.
pub(crate) const TABLE_ELEMENT_BYTES: usize = 16;

/// Core instances one store may make. A component built by the Rust toolchain for `wasm32-wasip2`
/// needs a handful (its module, the shims that lower imports, the fix-ups that fill their tables);
/// every core instance brings its own tables and memories, so this bounds what they add up to.
pub(crate) const MAX_INSTANCES: usize = 8;
/// Tables one store may make (all instances together); each still counts against the cap.
pub(crate) const MAX_TABLES: usize = 16;
/// Linear memories one store may make (all instances together).
pub(crate) const MAX_MEMORIES: usize = 4;

/// The memory cap: every linear memory and table of the store, together (a table's elements at
/// [`TABLE_ELEMENT_BYTES`] each), with the per-store counts of instances, tables and memories.
#[derive(Debug)]
struct MemoryCap {
    cap: usize,
    used: usize,
    peak: usize,
}

/// What grew past the cap.
#[derive(Debug, Clone, Copy, thiserror::Error)]
enum Grown {
    #[error("a linear memory grew")]
    Memory,
    #[error("a table grew, each element counted as {TABLE_ELEMENT_BYTES} bytes")]
    Table,
}

/// A memory or table grow past the cap: the call ends as a trap carrying this.
#[derive(Debug, thiserror::Error)]
#[error(
    "the plugin asked for {desired} bytes of linear memory and tables together ({grown}); its cap is {cap} (memory_mb)"
)]
pub(crate) struct MemoryCapHit {
    desired: usize,
    cap: usize,
    grown: Grown,
}

impl MemoryCap {
    /// Books a memory or table going from `current` to `desired` bytes, or refuses it.
    fn grow(&mut self, current: usize, desired: usize, grown: Grown) -> wasmtime::Result<bool> {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.cap {
            return Err(wasmtime::Error::new(MemoryCapHit {
                desired: total,
                cap: self.cap,
                grown,
            }));
        }
        self.used = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(current, desired, Grown::Memory)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
            Grown::Table,
        )
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// A store's data: the doors, the deadline, the cap, and what the plugin logged.
pub(crate) struct State {
    doors: Box<dyn Doors>,
    deadline: Instant,
    memory: MemoryCap,
    log: Vec<PluginLogLine>,
    log_dropped: u64,
    timers: Timers,
    insecure: u64,
}

impl State {
    fn line(&mut self, level: &str, message: &str) {
        if self.log.len() >= MAX_LOG_LINES {
            self.log_dropped += 1;
            return;
        }
        let mut end = message.len().min(MAX_LOG_LINE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        self.log.push(PluginLogLine {
            level: level.to_string(),
            message: message[..end].to_string(),
        });
    }
}

impl WasiHost for State {
    fn stdio(&mut self, stderr: bool, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for line in text.lines().filter(|l| !l.is_empty()) {
            self.line(if stderr { "stderr" } else { "stdout" }, line);
        }
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn timers(&mut self) -> &mut Timers {
        &mut self.timers
    }

    fn timers_ref(&self) -> &Timers {
        &self.timers
    }

    fn byte_cap(&self) -> u64 {
        self.memory.cap as u64
    }

    fn insecure(&mut self) -> &mut u64 {
        &mut self.insecure
    }
}

impl bindings::chock::plugin::types::Host for State {}

impl bindings::chock::plugin::workspace_read::Host for State {
    fn read_file(&mut self, path: String) -> Result<Vec<u8>, String> {
        self.doors.read_file(&path, self.deadline)
    }
}

impl bindings::chock::plugin::workspace_write::Host for State {
    fn write_file(&mut self, path: String, contents: Vec<u8>) -> Result<(), String> {
        self.doors.write_file(&path, &contents, self.deadline)
    }
}

impl bindings::chock::plugin::fetch::Host for State {
    fn fetch(&mut self, url: String) -> Result<WitPage, String> {
        self.doors.fetch(&url, self.deadline).map(|page| WitPage {
            final_url: page.final_url,
            status: page.status,
            text: page.text,
        })
    }
}

impl bindings::chock::plugin::log::Host for State {
    fn log(&mut self, level: Level, message: String) {
        let level = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.line(level, &message);
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallEnd {
    /// The tool returned this text.
    Returned(String),
    /// The tool returned this error.
    ToolError(String),
    /// Refused before the plugin started (an import the table denies, an engine failure).
    Refused(String),
    /// The fuel ran out.
    OutOfFuel,
    /// The wall-clock timeout passed.
    TimedOut,
    /// A memory grow past the cap.
    MemoryCap(String),
    /// The output was larger than its cap (none of it is kept).
    OutputTooLarge {
        /// Its size in bytes.
        bytes: u64,
    },
    /// Any other trap (a panic, an abort, `exit`).
    Trapped(String),
}

/// A call's end, its limits and what it used: everything `plugin.call` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReport {
    /// How it ended.
    pub end: CallEnd,
    /// Fuel given.
    pub fuel_limit: u64,
    /// Fuel used.
    pub fuel_used: u64,
    /// The wall-clock timeout.
    pub timeout: Duration,
    /// Wall time.
    pub duration: Duration,
    /// The memory cap in bytes.
    pub memory_limit: u64,
    /// The most memory held, in bytes.
    pub memory_peak: u64,
    /// The output cap in bytes.
    pub output_limit: u64,
    /// The output's size in bytes.
    pub output_bytes: u64,
    /// What the plugin logged.
    pub log: Vec<PluginLogLine>,
    /// Lines beyond those kept.
    pub log_dropped: u64,
}

impl CallReport {
    pub(crate) fn refused(limits: Limits, reason: String) -> CallReport {
        CallReport {
            end: CallEnd::Refused(reason),
            fuel_limit: limits.fuel,
            fuel_used: 0,
            timeout: limits.timeout,
            duration: Duration::ZERO,
            memory_limit: limits.memory,
            memory_peak: 0,
            output_limit: limits.output,
            output_bytes: 0,
            log: Vec::new(),
            log_dropped: 0,
        }
    }

    /// The `plugin.call` payload for this report.
    pub fn to_event(
        &self,
        plugin: &str,
        tool: &str,
        sha256: &str,
    ) -> chock_protocol::log::PluginCall {
        use chock_protocol::log::PluginEnd;
        let end = match &self.end {
            CallEnd::Returned(_) => PluginEnd::Returned,
            CallEnd::ToolError(_) => PluginEnd::ToolError,
            CallEnd::Refused(reason) => PluginEnd::Refused {
                reason: reason.clone(),
            },
            CallEnd::OutOfFuel => PluginEnd::OutOfFuel,
            CallEnd::TimedOut => PluginEnd::TimedOut,
            CallEnd::MemoryCap(_) => PluginEnd::MemoryCap,
            CallEnd::OutputTooLarge { bytes } => PluginEnd::OutputTooLarge { bytes: *bytes },
            CallEnd::Trapped(reason) => PluginEnd::Trapped {
                reason: reason.clone(),
            },
        };
        chock_protocol::log::PluginCall {
            plugin: plugin.to_string(),
            tool: tool.to_string(),
            sha256: sha256.to_string(),
            end,
            fuel_limit: self.fuel_limit,
            fuel_used: self.fuel_used,
            timeout_ms: millis(self.timeout),
            duration_ms: millis(self.duration),
            memory_limit: self.memory_limit,
            memory_peak: self.memory_peak,
            output_limit: self.output_limit,
            output_bytes: self.output_bytes,
            log: self.log.clone(),
            log_dropped: self.log_dropped,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh store for one call (or for listing the tools).
pub(crate) fn store(
    engine: &wasmtime::Engine,
    limits: Limits,
    doors: Box<dyn Doors>,
) -> wasmtime::Result<Store<State>> {
    let deadline = Instant::now() + limits.timeout;
    let mut store = Store::new(
        engine,
        State {
            doors,
            deadline,
            memory: MemoryCap {
                cap: usize::try_from(limits.memory).unwrap_or(usize::MAX),
                used: 0,
                peak: 0,
            },
            log: Vec::new(),
            log_dropped: 0,
            timers: Timers::default(),
            insecure: getrandom::u64().map_err(|e| wasmtime::format_err!("getrandom: {e}"))?,
        },
    );
    store.limiter(|state| &mut state.memory);
    // What the host copies out of the plugin in one go (a result it returns, the arguments of one
    // import it calls) counts against the same cap: the canonical ABI lets every entry of a list
    // point at the same bytes, so a list within the cap could otherwise make the host copy it
    // many times over (wasmtime's own default is 128 MiB whatever the cap).
    store.set_hostcall_fuel(usize::try_from(limits.memory).unwrap_or(usize::MAX));
    store.set_fuel(limits.fuel)?;
    // One tick more than the timeout holds: the ticker's first tick may come at once, so the
    // deadline is never reached before the timeout has passed (and at most one tick after).
    let ticks = limits.timeout.as_millis().div_ceil(TICK.as_millis()).max(1) + 1;
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    store.epoch_deadline_trap();
    Ok(store)
}

/// Why a run of the plugin's code stopped, from wasmtime's error.
pub(crate) fn stopped(err: &wasmtime::Error) -> CallEnd {
    if let Some(hit) = err.downcast_ref::<MemoryCapHit>() {
        return CallEnd::MemoryCap(hit.to_string());
    }
    if let Some(hit) = err.downcast_ref::<TooManyBytes>() {
        return CallEnd::MemoryCap(hit.to_string());
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => return CallEnd::OutOfFuel,
        Some(Trap::Interrupt) => return CallEnd::TimedOut,
        _ => {}
    }
    if let Some(exited) = err.downcast_ref::<Exited>() {
        return CallEnd::Trapped(exited.to_string());
    }
    CallEnd::Trapped(format!("{err:#}"))
}

/// Why instantiating the component stopped: a limit's own end (the memory cap, fuel, the timeout)
/// as it is, anything else said with the per-store limits it may have hit.
pub(crate) fn not_instantiated(err: &wasmtime::Error) -> CallEnd {
    match stopped(err) {
        CallEnd::Trapped(why) => CallEnd::Trapped(format!(
            "it cannot be instantiated (a store holds at most {MAX_INSTANCES} core instances, \
             {MAX_TABLES} tables and {MAX_MEMORIES} linear memories): {why}"
        )),
        end => end,
    }
}

/// Fills in the report from the store once the call is over.
pub(crate) fn report(
    store: &mut Store<State>,
    limits: Limits,
    started: Instant,
    end: CallEnd,
    output_bytes: u64,
) -> CallReport {
    let left = store.get_fuel().unwrap_or(0);
    let state = store.data_mut();
    CallReport {
        end,
        fuel_limit: limits.fuel,
        fuel_used: limits.fuel.saturating_sub(left),
        timeout: limits.timeout,
        duration: started.elapsed(),
        memory_limit: limits.memory,
        memory_peak: state.memory.peak as u64,
        output_limit: limits.output,
        output_bytes,
        log: std::mem::take(&mut state.log),
        log_dropped: state.log_dropped,
    }
}
