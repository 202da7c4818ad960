//! Snapshots of a warm guest, and guests that start from one (docs/microvm.md, "Snapshots and
//! forks").
//!
//! A guest that can be snapshotted shares by virtio-9p, served by QEMU itself: QEMU 7.2 cannot
//! migrate a vhost-user-fs device at all, and blocks the migration of a 9p device only while
//! the guest has it mounted. So a snapshot is: the guest's init unmounts every share (nothing
//! runs in the guest between calls), the machine is stopped and migrated over QMP to a socket
//! whose bytes the host writes to the snapshot's `state` (0600, in a directory the caller
//! keeps private), the machine runs on and the init mounts its shares again. A guest started
//! from a snapshot is a new QEMU with the same devices and `-incoming`, its shares the fork's
//! own: the host streams the state in and sends the setup, and the restored init mounts them.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_guest::{Frame, Hello, tag};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::VmError;
use crate::machine::{Machine, MachineSpec};

/// The migration stream, in the snapshot's directory.
const STATE: &str = "state";
/// What the snapshot was taken of ([`About`]), in the snapshot's directory.
const ABOUT: &str = "machine.json";
/// How long a snapshot's steps may take (TCG on a loaded machine is slow).
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// What a snapshot was taken of: a machine started from it must have the same devices and
/// memory, the same accelerator and the same kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct About {
    /// How many shares (virtio-9p devices) the machine has.
    shares: usize,
    memory_mib: u32,
    accel: String,
    kernel: String,
    /// What the guest said when it booted.
    hello: Hello,
}

fn err(what: &str, e: impl std::fmt::Display) -> VmError {
    VmError::Guest(format!("{what}: {e}"))
}

/// A QMP connection to a monitor.
struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    fn connect(path: &Path) -> io::Result<Qmp> {
        let writer = UnixStream::connect(path)?;
        writer.set_read_timeout(Some(STEP_TIMEOUT))?;
        let mut qmp = Qmp {
            reader: BufReader::new(writer.try_clone()?),
            writer,
        };
        let mut greeting = String::new();
        qmp.reader.read_line(&mut greeting)?;
        qmp.execute("qmp_capabilities", &json!({}))?;
        Ok(qmp)
    }

    /// Runs `command` and returns its `return`; its `error` is an error; events are skipped.
    fn execute(&mut self, command: &str, arguments: &Value) -> io::Result<Value> {
        let mut line = serde_json::to_vec(&json!({"execute": command, "arguments": arguments}))?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        loop {
            let mut reply = String::new();
            if self.reader.read_line(&mut reply)? == 0 {
                return Err(io::Error::other("the monitor closed its QMP socket"));
            }
            let reply: Value = serde_json::from_str(&reply)?;
            if let Some(r) = reply.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = reply.get("error") {
                let desc = e.get("desc").and_then(Value::as_str).unwrap_or_default();
                return Err(io::Error::other(format!("QMP {command}: {desc}")));
            }
        }
    }
}

/// Accepts one connection on `listener` before `deadline`.
fn accept_before(listener: &UnixListener, deadline: Instant) -> io::Result<UnixStream> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::other("the monitor never connected"));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A new file only its owner can read (a snapshot holds the guest's memory).
fn private_file(path: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

impl Machine {
    /// Snapshots this warm guest into the directory `to` (made with mode 0700, replacing an
    /// earlier snapshot there only once this one is whole). The guest keeps running, its
    /// shares mounted again, whether or not the snapshot was made.
    pub(crate) fn snapshot(&mut self, spec: &MachineSpec, to: &Path) -> Result<(), VmError> {
        if !self.nine_p {
            return Err(VmError::Guest(
                "this guest shares by virtiofs, which QEMU cannot migrate: only a guest confiner \
                 made with `snapshots` can snapshot its guest"
                    .into(),
            ));
        }
        let partial = PathBuf::from(format!("{}.partial", to.display()));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&partial)
            .map_err(|e| err(&format!("make {}", partial.display()), e))?;
        let made = self.snapshot_into(spec, &partial);
        // Calls read the channel without a timeout (a call may take its whole limit).
        let _ = self.reader.set_read_timeout(None);
        if made.is_err() {
            // Nothing half-made is left: it would hold guest memory.
            let _ = std::fs::remove_dir_all(&partial);
            return made;
        }
        let _ = std::fs::remove_dir_all(to);
        std::fs::rename(&partial, to).map_err(|e| {
            let _ = std::fs::remove_dir_all(&partial);
            err(&format!("keep {}", to.display()), e)
        })
    }

    /// The snapshot's files, in the directory `dir`.
    fn snapshot_into(&mut self, spec: &MachineSpec, dir: &Path) -> Result<(), VmError> {
        self.reader
            .set_read_timeout(Some(STEP_TIMEOUT))
            .map_err(|e| err("the channel", e))?;
        // A guest that could not unmount (it said why) kept its shares and waits for calls.
        self.send(&Frame::new(tag::SUSPEND, Vec::new()))
            .and_then(|()| self.expect(tag::SUSPENDED).map(drop))
            .map_err(|e| err("unmount the guest's shares", e))?;
        let migrated = self.migrate(&dir.join(STATE));
        // Unmounted, the guest mounts its shares again whatever happened: it stays warm for the
        // next call (or, if it cannot, it powers off and the next call boots a new one).
        let remounted = self.set_up();
        migrated?;
        remounted?;
        let about = About {
            shares: self.shares.len(),
            memory_mib: spec.memory_mib,
            accel: spec.accel.accel.name().to_string(),
            kernel: spec.kernel.release.clone(),
            hello: self.hello.clone(),
        };
        private_file(&dir.join(ABOUT))
            .and_then(|mut f| f.write_all(&serde_json::to_vec(&about).unwrap_or_default()))
            .map_err(|e| err("write the snapshot's description", e))
    }

    /// Stops the machine, migrates it into the file `state` and lets it run on.
    fn migrate(&mut self, state: &Path) -> Result<(), VmError> {
        let dir = self.dir.path();
        let out = dir.join("out.sock");
        let _ = std::fs::remove_file(&out);
        let listener = UnixListener::bind(&out).map_err(|e| err("listen for the snapshot", e))?;
        let mut file = private_file(state).map_err(|e| err("make the snapshot's file", e))?;
        let writer = std::thread::spawn(move || -> io::Result<u64> {
            let mut stream = accept_before(&listener, Instant::now() + STEP_TIMEOUT)?;
            let n = io::copy(&mut stream, &mut file)?;
            file.sync_all()?;
            Ok(n)
        });
        let mut qmp = Qmp::connect(&dir.join("qmp.sock")).map_err(|e| err("QMP", e))?;
        let ran = (|| -> io::Result<()> {
            qmp.execute("stop", &json!({}))?;
            // QEMU's default limit (32 MiB/s) is for a live migration; the machine is stopped.
            qmp.execute(
                "migrate-set-parameters",
                &json!({"max-bandwidth": 1u64 << 40}),
            )?;
            qmp.execute("migrate", &json!({"uri": "unix:/vm/out.sock"}))?;
            let deadline = Instant::now() + STEP_TIMEOUT;
            loop {
                let status = qmp.execute("query-migrate", &json!({}))?;
                match status.get("status").and_then(Value::as_str) {
                    Some("completed") => return Ok(()),
                    Some("failed" | "cancelled") => {
                        let why = status.get("error-desc").and_then(Value::as_str);
                        return Err(io::Error::other(why.unwrap_or("failed").to_string()));
                    }
                    _ if Instant::now() > deadline => {
                        return Err(io::Error::other("it did not complete"));
                    }
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })();
        // Stopped, migrated or not: the machine runs on.
        let resumed = qmp.execute("cont", &json!({}));
        let written = writer.join();
        let _ = std::fs::remove_file(&out);
        ran.map_err(|e| err("migrate the machine", e))?;
        resumed.map_err(|e| err("resume the machine", e))?;
        match written {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(err("write the snapshot", e)),
            Err(_) => Err(err("write the snapshot", "its thread panicked")),
        }
    }

    /// Starts a guest from the snapshot in `from` with `shares` (the same number of them as
    /// the snapshotted guest had; their directories may differ: a fork's workspace). A
    /// snapshot that is missing, unreadable, or of another machine is an error: nothing boots
    /// cold in its place.
    pub(crate) fn restore(
        spec: &MachineSpec,
        shares: Vec<crate::machine::HostShare>,
        live: &std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
        from: &Path,
    ) -> Result<Machine, VmError> {
        let bad = |why: String| {
            VmError::Guest(format!(
                "the snapshot in {} cannot be restored: {why}",
                from.display()
            ))
        };
        if !spec.snapshots {
            return Err(bad(
                "this guest confiner shares by virtiofs (made without `snapshots`)".into(),
            ));
        }
        let about: About = std::fs::read(from.join(ABOUT))
            .map_err(|e| bad(format!("{ABOUT}: {e}")))
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| bad(format!("{ABOUT}: {e}"))))?;
        let state = from.join(STATE);
        if !state.is_file() {
            return Err(bad(format!("{STATE} is missing")));
        }
        let want = (
            shares.len(),
            spec.memory_mib,
            spec.accel.accel.name(),
            spec.kernel.release.as_str(),
        );
        let have = (
            about.shares,
            about.memory_mib,
            about.accel.as_str(),
            about.kernel.as_str(),
        );
        if want != have {
            return Err(bad(format!(
                "it is of a machine with {} shares, {} MiB, {} and kernel {}; this one would \
                 have {} shares, {} MiB, {} and kernel {}",
                have.0, have.1, have.2, have.3, want.0, want.1, want.2, want.3
            )));
        }
        Machine::start(spec, shares, live, Some((&state, about.hello)))
    }
}

/// Streams the snapshot's `state` into a monitor started with `-incoming` (its socket `in.sock`
/// in the machine's directory), waits until it has loaded it, and runs the machine (stopped
/// when it was snapshotted, it stays stopped on arrival).
pub(crate) fn stream_in(machine: &Machine, state: &Path) -> Result<(), VmError> {
    let dir = machine.dir.path();
    let socket = dir.join("in.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stream = loop {
        match UnixStream::connect(&socket) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline && machine.alive() => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(err("reach the monitor's incoming socket", e)),
        }
    };
    let mut file = std::fs::File::open(state).map_err(|e| err("open the snapshot", e))?;
    io::copy(&mut file, &mut stream).map_err(|e| err("stream the snapshot in", e))?;
    stream
        .shutdown(std::net::Shutdown::Write)
        .map_err(|e| err("stream the snapshot in", e))?;
    let mut qmp = Qmp::connect(&dir.join("qmp.sock")).map_err(|e| err("QMP", e))?;
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let status = qmp
            .execute("query-status", &json!({}))
            .map_err(|e| err("load the snapshot", e))?;
        match status.get("status").and_then(Value::as_str) {
            Some("inmigrate") if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Some("running") => return Ok(()),
            Some("paused" | "postmigrate" | "prelaunch") => {
                qmp.execute("cont", &json!({}))
                    .map_err(|e| err("run the restored machine", e))?;
                return Ok(());
            }
            other => {
                return Err(err(
                    "load the snapshot",
                    format!("the machine is {}", other.unwrap_or("in no known state")),
                ));
            }
        }
    }
}
