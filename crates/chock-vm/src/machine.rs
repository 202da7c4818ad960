//! One booted guest: QEMU's `microvm` machine, a virtiofs server per share, and the channel.
//!
//! Every process runs confined from the start: QEMU as `monitor.rs` says (its own namespaces and
//! root, Landlock, its own seccomp filter); each virtiofs server in new user and mount
//! namespaces where its one directory is bound over itself (read-only for a read-only share),
//! under Landlock (`confine.rs`: its share and nothing else of the project), chrooted into it.
//! Dropping a [`Machine`] kills them all.

use std::io::{self, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_guest::{Frame, Hello, Setup, Share, ShareFs, tag};

use crate::VmError;
use crate::accel::AccelChoice;
use crate::kernel::GuestKernel;

/// The guest kernel's command line: the console, the clock hints TCG needs (without them a TCG
/// boot may hang calibrating), Landlock first among the security modules, and a panic that
/// ends the machine rather than hanging it.
pub const KERNEL_CMDLINE: &str = "console=ttyS0 quiet tsc_early_khz=2000000 lpj=4000000 \
     lsm=landlock,lockdown,yama,integrity,bpf panic=-1 rdinit=/init";

/// How long a guest may take from its monitor's start to its init's hello and setup (TCG on a
/// loaded machine is slow).
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// What every guest of a confiner is booted from.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    /// The kernel and its modules.
    pub kernel: GuestKernel,
    /// The initramfs (`initramfs::build`), written to a file.
    pub initramfs: PathBuf,
    /// The accelerator and why.
    pub accel: AccelChoice,
    /// The guest's memory.
    pub memory_mib: u32,
    /// `qemu-system-x86_64`, under /usr (the monitor's root shows /usr alone).
    pub qemu: PathBuf,
    /// QEMU's virtiofs server.
    pub virtiofsd: PathBuf,
    /// Whether its guests can be snapshotted: their shares are virtio-9p, served by QEMU
    /// itself, and QEMU has a QMP socket to migrate the machine by (`snapshot.rs`).
    pub snapshots: bool,
    /// `chock-confine`, which applies the Landlock rules of `confine/rules.rs` last before the
    /// monitor's and each file server's exec.
    pub confine: PathBuf,
}

/// A host directory a guest shows at the same path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostShare {
    /// The directory.
    pub path: PathBuf,
    /// Whether the guest may only read it.
    pub read_only: bool,
    /// For a guest that can be snapshotted, whose shares QEMU serves by 9p: the overlay (its
    /// lower, upper and work directories) the monitor mounts at `path` in its own root before it
    /// becomes QEMU, so the guest is shown the merged directory as a plain share and the
    /// whiteouts of its deletions are made by the host kernel's overlayfs, not over 9p.
    pub overlay: Option<[PathBuf; 3]>,
}

/// The monitor process of a booted guest, killable from any thread.
#[derive(Debug)]
pub(crate) struct Monitor {
    child: Mutex<Child>,
    pid: u32,
    live: Arc<Mutex<Vec<u32>>>,
}

impl Monitor {
    /// Stops the machine (its init and every call in it with it).
    pub(crate) fn kill(&self) {
        let mut c = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = c.kill();
        let _ = c.wait();
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != self.pid);
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A booted guest, ready for calls.
#[derive(Debug)]
pub(crate) struct Machine {
    pub(crate) monitor: Arc<Monitor>,
    pub(crate) reader: UnixStream,
    pub(crate) writer: Arc<Mutex<UnixStream>>,
    pub(crate) shares: Vec<HostShare>,
    pub(crate) hello: Hello,
    /// Whether its shares are virtio-9p (it can be snapshotted).
    pub(crate) nine_p: bool,
    _servers: Servers,
    pub(crate) dir: tempfile::TempDir,
}

impl Drop for Machine {
    fn drop(&mut self) {
        // The monitor first, then its file servers (the field's own drop).
        self.monitor.kill();
    }
}

/// A guest's virtiofs servers, killed when dropped: a boot that fails half way leaves none.
#[derive(Debug, Default)]
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for s in &mut self.0 {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

fn guest_err(what: &str, e: impl std::fmt::Display) -> VmError {
    VmError::Guest(format!("{what}: {e}"))
}

/// A virtiofs server for `share`, listening on `socket` in the machine's directory `dir`: in new
/// user and mount namespaces, with a /run of its own and its share bound over itself (read-only
/// for a read-only share), and last the file server's Landlock rules (`confine.rs`).
fn serve_share(
    spec: &MachineSpec,
    share: &HostShare,
    dir: &Path,
    socket: &Path,
    log: &Path,
) -> Result<Child, VmError> {
    let mut args = vec![
        format!("--socket-path={}", socket.display()).into(),
        "-o".into(),
    ];
    let mut source = std::ffi::OsString::from("source=");
    source.push(&share.path);
    args.push(source);
    args.extend(["-o", "sandbox=chroot", "-o", "xattr"].map(std::ffi::OsString::from));
    let log = std::fs::File::create(log).map_err(|e| guest_err("a server's log", e))?;
    let mut server = server_command(spec, share, dir, &spec.virtiofsd, args)?;
    server
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    server.spawn()
}

/// A file server's command, and the ids its user namespace is given once it has started.
pub(crate) struct ServerCommand {
    pub(crate) command: Command,
    ids: crate::server_ids::ServerIds,
    fifo: PathBuf,
}

impl ServerCommand {
    /// Starts it and maps its namespace's ids (`server_ids.rs`).
    pub(crate) fn spawn(mut self) -> Result<Child, VmError> {
        let mut child = self
            .command
            .spawn()
            .map_err(|e| guest_err("start a virtiofs server (unshare)", e))?;
        self.ids.map(&mut child, &self.fifo)?;
        Ok(child)
    }
}

/// `program` with `args`, run as a file server of `share` is: in its namespaces, under its
/// Landlock rules (the tests run a probe in virtiofsd's place).
pub(crate) fn server_command(
    spec: &MachineSpec,
    share: &HostShare,
    dir: &Path,
    program: &Path,
    args: Vec<std::ffi::OsString>,
) -> Result<ServerCommand, VmError> {
    static SERVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // `$1` the share, `$2` whether it is read-only; the helper's command line follows.
    let script = r#"mount -t tmpfs chock-run /run && mount --bind "$1" "$1" && if [ "$2" = 1 ]; then mount -o remount,bind,ro "$1"; fi && shift 2 && exec "$@""#;
    let kvm = spec.accel.accel == crate::accel::Accel::Kvm;
    let rules = crate::confine::rules_for(
        crate::confine::rules::Process::FileServer,
        &crate::confine::Machine {
            kvm,
            dir,
            served: &[],
            snapshots: false,
        },
        Some(share),
    );
    let ids = crate::server_ids::ServerIds::of_this_process()?;
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fifo = ids.fifo(dir, &format!("server-{}-{n}.ids", std::process::id()))?;
    let mut c = ids.command(script, &fifo);
    c.arg(&share.path)
        .arg(if share.read_only { "1" } else { "0" })
        .args(crate::confine::wrap(
            &spec.confine,
            None,
            rules,
            program,
            args,
        ));
    Ok(ServerCommand {
        command: c,
        ids,
        fifo,
    })
}

fn wait_for(path: &Path, servers: &mut [Child], what: &str, log: &Path) -> Result<(), VmError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        for s in servers.iter_mut() {
            if let Ok(Some(status)) = s.try_wait() {
                let said = std::fs::read_to_string(log).unwrap_or_default();
                return Err(VmError::Guest(format!(
                    "{what} exited ({status}): {}",
                    said.trim()
                )));
            }
        }
        if Instant::now() > deadline {
            return Err(VmError::Guest(format!("{what} did not start")));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// The last lines of the guest's console, for an error.
fn console_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

impl Machine {
    /// Boots a guest showing `shares`; its monitor's pid is kept in `live` while it runs.
    pub(crate) fn boot(
        spec: &MachineSpec,
        shares: Vec<HostShare>,
        live: &Arc<Mutex<Vec<u32>>>,
    ) -> Result<Machine, VmError> {
        Machine::start(spec, shares, live, None)
    }

    /// Starts a monitor for `shares`: booting, or, with `incoming` (a snapshot's state and the
    /// hello its guest said when it booted), loading that state, which the host streams in.
    pub(crate) fn start(
        spec: &MachineSpec,
        shares: Vec<HostShare>,
        live: &Arc<Mutex<Vec<u32>>>,
        incoming: Option<(&Path, Hello)>,
    ) -> Result<Machine, VmError> {
        let dir = tempfile::Builder::new()
            .prefix("chock-vm-")
            .tempdir()
            .map_err(|e| guest_err("make the guest's directory", e))?;
        let mut servers = Servers::default();
        for (i, share) in shares.iter().enumerate().filter(|_| !spec.snapshots) {
            let socket = dir.path().join(format!("fs{i}.sock"));
            let log = dir.path().join(format!("fs{i}.log"));
            servers
                .0
                .push(serve_share(spec, share, dir.path(), &socket, &log)?);
            wait_for(
                &socket,
                &mut servers.0,
                &format!("the virtiofs server of {}", share.path.display()),
                &log,
            )?;
        }
        let listener = UnixListener::bind(dir.path().join("chan.sock"))
            .map_err(|e| guest_err("listen for the guest's channel", e))?;
        let console = std::fs::File::create(dir.path().join("monitor.log"))
            .map_err(|e| guest_err("the monitor's log", e))?;
        let child = crate::monitor::command(spec, dir.path(), &shares, incoming.is_some())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(console)
            .spawn()
            .map_err(|e| guest_err("start QEMU", e))?;
        let pid = child.id();
        live.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        let monitor = Arc::new(Monitor {
            child: Mutex::new(child),
            pid,
            live: live.clone(),
        });
        let dir_path = dir.path().to_path_buf();
        let failed = |what: &str| {
            let log = std::fs::read_to_string(dir_path.join("monitor.log")).unwrap_or_default();
            VmError::Guest(format!(
                "{what}\n  monitor: {}\n  console: {}",
                log.trim(),
                console_tail(&dir_path)
            ))
        };
        let reader = accept(&listener, &monitor).map_err(|e| failed(&e))?;
        reader
            .set_read_timeout(Some(BOOT_TIMEOUT))
            .map_err(|e| guest_err("the channel", e))?;
        let writer = reader
            .try_clone()
            .map_err(|e| guest_err("the channel", e))?;
        let mut machine = Machine {
            monitor,
            reader,
            writer: Arc::new(Mutex::new(writer)),
            shares,
            hello: Hello {
                kernel: String::new(),
                interfaces: Vec::new(),
                virtio_devices: Vec::new(),
            },
            nine_p: spec.snapshots,
            _servers: servers,
            dir,
        };
        match incoming {
            None => {
                let hello = machine
                    .expect(tag::HELLO)
                    .map_err(|e| failed(&format!("the guest did not say hello: {e}")))?;
                machine.hello = hello
                    .parse()
                    .map_err(|e| guest_err("the guest's hello", e))?;
            }
            Some((state, hello)) => {
                crate::snapshot::stream_in(&machine, state).map_err(|e| failed(e.words()))?;
                machine.hello = hello;
            }
        }
        machine.set_up().map_err(|e| failed(e.words()))?;
        machine
            .reader
            .set_read_timeout(None)
            .map_err(|e| guest_err("the channel", e))?;
        Ok(machine)
    }

    /// Tells the guest its shares (and the host's clock) and waits until it has mounted them.
    pub(crate) fn set_up(&mut self) -> Result<(), VmError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let fs = if self.nine_p {
            ShareFs::NineP
        } else {
            ShareFs::Virtiofs
        };
        let setup = Setup {
            shares: self
                .shares
                .iter()
                .enumerate()
                .map(|(i, s)| Share {
                    tag: format!("s{i}"),
                    path: s.path.clone(),
                    read_only: s.read_only,
                    fs,
                })
                .collect(),
            now: Some((
                i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
                now.subsec_nanos(),
            )),
        };
        self.send(&Frame::json(tag::SETUP, &setup))
            .map_err(|e| guest_err("send the setup", e))?;
        self.expect(tag::READY)
            .map_err(|e| guest_err("the guest's setup", e))?;
        Ok(())
    }

    /// Sends one frame.
    pub(crate) fn send(&self, frame: &Frame) -> io::Result<()> {
        send(&self.writer, frame)
    }

    /// Reads the next frame, which must be `want` (a guest's refusal is its words).
    pub(crate) fn expect(&mut self, want: u8) -> io::Result<Frame> {
        match Frame::read_from(&mut self.reader)? {
            Some(f) if f.tag == want => Ok(f),
            Some(f) if f.tag == tag::SETUP_FAILED || f.tag == tag::SUSPEND_FAILED => Err(
                io::Error::other(String::from_utf8_lossy(&f.body).into_owned()),
            ),
            Some(f) => Err(io::Error::other(format!("an unexpected frame {}", f.tag))),
            None => Err(io::Error::other("the channel ended (the guest stopped)")),
        }
    }

    /// Whether the monitor still runs.
    pub(crate) fn alive(&self) -> bool {
        let mut c = self.monitor.child.lock().unwrap_or_else(|e| e.into_inner());
        matches!(c.try_wait(), Ok(None))
    }
}

/// Sends one frame through a shared writer.
pub(crate) fn send(writer: &Mutex<UnixStream>, frame: &Frame) -> io::Result<()> {
    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
    frame.write_to(&mut *w)
}

/// The monitor's connection to the channel's socket, while the monitor runs.
fn accept(listener: &UnixListener, monitor: &Monitor) -> Result<UnixStream, String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("the channel's socket: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| format!("the channel: {e}"))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("the channel's socket: {e}")),
        }
        {
            let mut c = monitor.child.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(Some(status)) = c.try_wait() {
                let mut err = String::new();
                if let Some(e) = c.stderr.as_mut() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!("QEMU exited before the guest started ({status})"));
            }
        }
        if Instant::now() > deadline {
            return Err("QEMU never connected the guest's channel".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
