//! The WASI a plugin gets: what Rust's standard library links for `wasm32-wasip2`, implemented
//! here by Chock rather than by wasmtime-wasi. This module holds the stdio surface (streams,
//! stdin/stdout/stderr, the terminal queries, the environment, `exit`); `crate::wasi_clock` the
//! pollables, clocks and random numbers. Standard input is empty and closed; standard output and
//! error become lines of the call's log (capped); the environment and the arguments are empty;
//! there is no working directory; `exit` ends the call as a trap.
//!
//! Not linked, so a component importing them does not start: `wasi:filesystem` (a plugin reads
//! and writes only through `chock:plugin/workspace-*`, decided per call), `wasi:sockets` and
//! `wasi:http` (it fetches only through `chock:plugin/fetch`, the broker).

use std::time::Instant;

use wasmtime::component::{ComponentType, Linker, Lower, Resource, ResourceType};

pub use crate::wasi_clock::{Pollable, Timers, TooManyBytes};

/// The WASI interfaces linked (names without versions; any `0.2.x` import matches).
pub const INTERFACES: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
];

/// The version the definitions are made under; wasmtime's linker matches any `0.2.x` import.
const VERSION: &str = "0.2.6";

/// What a store's data gives the WASI surface.
pub trait WasiHost {
    /// `bytes` written to standard output (`stderr: false`) or error (`stderr: true`).
    fn stdio(&mut self, stderr: bool, bytes: &[u8]);
    /// The call's wall-clock deadline: no wait in a host call outlasts it.
    fn deadline(&self) -> Instant;
    /// The timers behind this store's pollables.
    fn timers(&mut self) -> &mut Timers;
    /// The same, to read.
    fn timers_ref(&self) -> &Timers;
    /// The most random bytes one request may ask for (the call's memory cap).
    fn byte_cap(&self) -> u64;
    /// The state of this store's insecure random generator.
    fn insecure(&mut self) -> &mut u64;
}

/// `wasi:io/error.error` (never made: no operation fails with one).
#[derive(Debug)]
pub struct IoError;
/// `wasi:io/streams.input-stream`: standard input, empty and closed.
#[derive(Debug)]
pub struct InputStream;
/// `wasi:io/streams.output-stream`: rep 1 is standard output, rep 2 standard error.
#[derive(Debug)]
pub struct OutputStream;
/// `wasi:cli/terminal-input.terminal-input` (never made: stdin is no terminal).
#[derive(Debug)]
pub struct TerminalInput;
/// `wasi:cli/terminal-output.terminal-output` (never made).
#[derive(Debug)]
pub struct TerminalOutput;

/// `wasi:io/streams.stream-error`.
#[derive(ComponentType, Lower)]
#[component(variant)]
enum StreamError {
    // Never made (no write fails), but the variant must match the WIT's to link.
    #[allow(dead_code)]
    #[component(name = "last-operation-failed")]
    LastOperationFailed(Resource<IoError>),
    #[component(name = "closed")]
    Closed,
}

/// How much an output stream takes per write (what `check-write` promises).
const WRITE_BUDGET: u64 = 64 * 1024;

/// The plugin called `wasi:cli/exit.exit`: the call ends as a trap carrying this.
#[derive(Debug, thiserror::Error)]
#[error("the plugin called exit ({})", if *.ok { "success" } else { "failure" })]
pub struct Exited {
    /// Whether it exited with success.
    pub ok: bool,
}

pub(crate) fn name(interface: &str) -> String {
    format!("{interface}@{VERSION}")
}

/// Adds the whole WASI surface (stdio, pollables, clocks, random) to `linker`.
pub fn add_to_linker<T: WasiHost + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    crate::wasi_clock::add_to_linker(linker)?;
    let drop_ok = |_: wasmtime::StoreContextMut<'_, T>, _: u32| Ok(());
    {
        let mut error = linker.instance(&name("wasi:io/error"))?;
        error.resource("error", ResourceType::host::<IoError>(), drop_ok)?;
        error.func_wrap(
            "[method]error.to-debug-string",
            |_, (_e,): (Resource<IoError>,)| Ok((String::from("error"),)),
        )?;
    }
    {
        let mut streams = linker.instance(&name("wasi:io/streams"))?;
        streams.resource("error", ResourceType::host::<IoError>(), drop_ok)?;
        crate::wasi_clock::define_pollable(&mut streams)?;
        streams.resource("input-stream", ResourceType::host::<InputStream>(), drop_ok)?;
        streams.resource(
            "output-stream",
            ResourceType::host::<OutputStream>(),
            drop_ok,
        )?;
        for read in [
            "[method]input-stream.read",
            "[method]input-stream.blocking-read",
        ] {
            streams.func_wrap(read, |_, (_s, _n): (Resource<InputStream>, u64)| {
                Ok((Err::<Vec<u8>, _>(StreamError::Closed),))
            })?;
        }
        for skip in [
            "[method]input-stream.skip",
            "[method]input-stream.blocking-skip",
        ] {
            streams.func_wrap(skip, |_, (_s, _n): (Resource<InputStream>, u64)| {
                Ok((Err::<u64, _>(StreamError::Closed),))
            })?;
        }
        streams.func_wrap(
            "[method]input-stream.subscribe",
            |_, (_s,): (Resource<InputStream>,)| Ok((Resource::<Pollable>::new_own(0),)),
        )?;
        streams.func_wrap(
            "[method]output-stream.check-write",
            |_, (_s,): (Resource<OutputStream>,)| Ok((Ok::<u64, StreamError>(WRITE_BUDGET),)),
        )?;
        for write in [
            "[method]output-stream.write",
            "[method]output-stream.blocking-write-and-flush",
        ] {
            streams.func_wrap(
                write,
                |mut store: wasmtime::StoreContextMut<'_, T>,
                 (s, bytes): (Resource<OutputStream>, Vec<u8>)| {
                    store.data_mut().stdio(s.rep() == 2, &bytes);
                    Ok((Ok::<(), StreamError>(()),))
                },
            )?;
        }
        for flush in [
            "[method]output-stream.flush",
            "[method]output-stream.blocking-flush",
        ] {
            streams.func_wrap(flush, |_, (_s,): (Resource<OutputStream>,)| {
                Ok((Ok::<(), StreamError>(()),))
            })?;
        }
        streams.func_wrap(
            "[method]output-stream.write-zeroes",
            |_, (_s, _n): (Resource<OutputStream>, u64)| Ok((Ok::<(), StreamError>(()),)),
        )?;
        streams.func_wrap(
            "[method]output-stream.blocking-write-zeroes-and-flush",
            |_, (_s, _n): (Resource<OutputStream>, u64)| Ok((Ok::<(), StreamError>(()),)),
        )?;
        streams.func_wrap(
            "[method]output-stream.subscribe",
            |_, (_s,): (Resource<OutputStream>,)| Ok((Resource::<Pollable>::new_own(0),)),
        )?;
    }
    {
        let mut env = linker.instance(&name("wasi:cli/environment"))?;
        env.func_wrap("get-environment", |_, (): ()| {
            Ok((Vec::<(String, String)>::new(),))
        })?;
        env.func_wrap("get-arguments", |_, (): ()| Ok((Vec::<String>::new(),)))?;
        env.func_wrap("initial-cwd", |_, (): ()| Ok((None::<String>,)))?;
    }
    {
        let mut exit = linker.instance(&name("wasi:cli/exit"))?;
        exit.func_wrap(
            "exit",
            |_, (status,): (Result<(), ()>,)| -> wasmtime::Result<()> {
                Err(wasmtime::Error::new(Exited { ok: status.is_ok() }))
            },
        )?;
    }
    {
        let mut stdin = linker.instance(&name("wasi:cli/stdin"))?;
        stdin.resource("input-stream", ResourceType::host::<InputStream>(), drop_ok)?;
        stdin.func_wrap("get-stdin", |_, (): ()| {
            Ok((Resource::<InputStream>::new_own(0),))
        })?;
    }
    for (interface, func, rep) in [
        ("wasi:cli/stdout", "get-stdout", 1),
        ("wasi:cli/stderr", "get-stderr", 2),
    ] {
        let mut out = linker.instance(&name(interface))?;
        out.resource(
            "output-stream",
            ResourceType::host::<OutputStream>(),
            drop_ok,
        )?;
        out.func_wrap(func, move |_, (): ()| {
            Ok((Resource::<OutputStream>::new_own(rep),))
        })?;
    }
    linker
        .instance(&name("wasi:cli/terminal-input"))?
        .resource(
            "terminal-input",
            ResourceType::host::<TerminalInput>(),
            drop_ok,
        )?;
    linker
        .instance(&name("wasi:cli/terminal-output"))?
        .resource(
            "terminal-output",
            ResourceType::host::<TerminalOutput>(),
            drop_ok,
        )?;
    {
        let mut t = linker.instance(&name("wasi:cli/terminal-stdin"))?;
        t.resource(
            "terminal-input",
            ResourceType::host::<TerminalInput>(),
            drop_ok,
        )?;
        t.func_wrap("get-terminal-stdin", |_, (): ()| {
            Ok((None::<Resource<TerminalInput>>,))
        })?;
    }
    for (interface, func) in [
        ("wasi:cli/terminal-stdout", "get-terminal-stdout"),
        ("wasi:cli/terminal-stderr", "get-terminal-stderr"),
    ] {
        let mut t = linker.instance(&name(interface))?;
        t.resource(
            "terminal-output",
            ResourceType::host::<TerminalOutput>(),
            drop_ok,
        )?;
        t.func_wrap(func, |_, (): ()| Ok((None::<Resource<TerminalOutput>>,)))?;
    }
    Ok(())
}
