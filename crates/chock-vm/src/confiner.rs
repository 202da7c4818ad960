//! [`GuestConfiner`]: the execution seam's second implementation (docs/architecture.md, "The
//! execution seam"). A call's plan is checked as on the host, sent to a guest as its serialised
//! bytes (`PreparedCall::to_wire`), and run there by the same driver; its streams come back as
//! frames and are handed to the session as pipes, exactly as a local call's are.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chock_guest::{CallStdio, Frame, GuestError, tag};
use chock_sandbox::{
    BoxFuture, CallHandle, Confiner, Gate, NetworkPlan, OwnOverlay, Plan, PreparedCall,
    SandboxError, StdioMode, WorkspaceMount,
};

use crate::VmError;
use crate::accel::AccelChoice;
use crate::call::GuestCall;
use crate::kernel::GuestKernel;
use crate::machine::{HostShare, Machine, MachineSpec};

/// What a [`GuestConfiner`] boots its guests from.
#[derive(Debug, Clone)]
pub struct GuestConfig {
    /// The kernel directory (`chock_vm::kernel::fetch`).
    pub kernel_dir: PathBuf,
    /// The guest's init: chock-guest built for x86_64-unknown-linux-musl.
    pub guest_init: PathBuf,
    /// The guest's memory in MiB.
    pub memory_mib: u32,
    /// Whether its guests can be snapshotted ([`GuestConfiner::snapshot`]) and started from a
    /// snapshot ([`GuestConfiner::warm_up_from`]): their shares are then virtio-9p, served by
    /// QEMU itself, rather than virtiofs (docs/microvm.md, "Snapshots and forks").
    pub snapshots: bool,
}

/// The guest's init: `CHOCK_GUEST_INIT` when set; else `chock-guest` beside the running program
/// (installed with `chock`), or, in a build tree, the musl build of it beside the target's
/// profile directories.
pub fn default_guest_init() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHOCK_GUEST_INIT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let beside = dir.join("chock-guest");
    if beside.is_file() {
        return Some(beside);
    }
    dir.ancestors()
        .take(3)
        .flat_map(|d| {
            ["release", "debug"].map(|p| {
                d.join("x86_64-unknown-linux-musl")
                    .join(p)
                    .join("chock-guest")
            })
        })
        .find(|p| p.is_file())
        .or(Some(beside))
}

impl GuestConfig {
    /// The configuration Chock uses: the kernel in `chock_vm::kernel::default_dir`, the init
    /// from [`default_guest_init`], 1 GiB of memory.
    pub fn from_env() -> Result<GuestConfig, VmError> {
        let kernel_dir = crate::kernel::default_dir().ok_or_else(|| {
            VmError::Kernel("no directory for the guest kernel (set CHOCK_VM_DIR or HOME)".into())
        })?;
        let guest_init = default_guest_init()
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                VmError::Guest(
                    "the guest's init `chock-guest` is not installed beside chock (or set \
                     CHOCK_GUEST_INIT)"
                        .into(),
                )
            })?;
        Ok(GuestConfig {
            kernel_dir,
            guest_init,
            memory_mib: 1024,
            snapshots: false,
        })
    }
}

fn first_of(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Runs a session's calls in microVM guests (see the module). Cheap to clone.
#[derive(Debug, Clone)]
pub struct GuestConfiner(Arc<Inner>);

#[derive(Debug)]
pub(crate) struct Inner {
    spec: MachineSpec,
    warm: Mutex<Option<Machine>>,
    last_hello: Mutex<Option<chock_guest::Hello>>,
    live: Arc<Mutex<Vec<u32>>>,
    _files: tempfile::TempDir,
}

fn boot_failed(e: &VmError) -> SandboxError {
    SandboxError::Host {
        what: "start the microVM guest (there is no fallback to the host's sandbox)".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

pub(crate) fn lost(what: &str) -> SandboxError {
    SandboxError::Host {
        what: "the microVM guest".into(),
        source: std::io::Error::other(what.to_string()),
    }
}

impl GuestConfiner {
    /// A confiner booting guests from `config`: the kernel is read and the initramfs built
    /// now, so a missing piece is an error here, before any call.
    pub fn new(config: &GuestConfig) -> Result<GuestConfiner, VmError> {
        let kernel = GuestKernel::open(&config.kernel_dir)?;
        if config.snapshots && !kernel.nine_p {
            return Err(VmError::Kernel(format!(
                "the guest kernel in {} has no 9p modules, which a guest that can be                  snapshotted shares by (fetch it again with `chock vm kernel`)",
                config.kernel_dir.display()
            )));
        }
        let qemu = first_of(&["/usr/bin/qemu-system-x86_64"]).ok_or_else(|| {
            VmError::Guest("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)".into())
        })?;
        let virtiofsd = first_of(&["/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd"])
            .ok_or_else(|| VmError::Guest("QEMU's virtiofsd is not installed".into()))?;
        let confine = crate::confine::default_helper(&config.guest_init)?;
        let image = crate::initramfs::build(&config.guest_init, &kernel)?;
        let files = tempfile::Builder::new()
            .prefix("chock-vm-boot-")
            .tempdir()
            .map_err(|e| VmError::Guest(format!("a directory for the initramfs: {e}")))?;
        let initramfs = files.path().join("initramfs.cpio");
        std::fs::write(&initramfs, image)
            .map_err(|e| VmError::Guest(format!("write the initramfs: {e}")))?;
        let spec = MachineSpec {
            kernel,
            initramfs,
            accel: crate::accel::choose(),
            memory_mib: config.memory_mib,
            qemu,
            virtiofsd,
            snapshots: config.snapshots,
            confine,
        };
        Ok(GuestConfiner(Arc::new(Inner {
            spec,
            warm: Mutex::new(None),
            last_hello: Mutex::new(None),
            live: Arc::new(Mutex::new(Vec::new())),
            _files: files,
        })))
    }

    /// The accelerator its guests run with, and why.
    pub fn accel(&self) -> &AccelChoice {
        &self.0.spec.accel
    }

    /// The guest kernel's release.
    pub fn kernel_release(&self) -> &str {
        &self.0.spec.kernel.release
    }

    /// The pids of the monitor processes running now (for tests and `chock doctor`'s checks
    /// from outside: a monitor's namespaces and seccomp mode).
    pub fn monitors(&self) -> Vec<u32> {
        self.0
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the last guest booted said of itself: its kernel, interfaces and virtio devices.
    pub fn last_hello(&self) -> Option<chock_guest::Hello> {
        self.0
            .last_hello
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Boots a guest for `plan`'s shares now and keeps it warm, so the next call starts at once.
    pub fn warm_up(&self, plan: &Plan) -> Result<(), SandboxError> {
        let shares = self.0.shares(plan)?;
        let machine = self.0.take_or_boot(shares)?;
        self.0.give_back(machine);
        Ok(())
    }

    /// Whether a guest is warm now (booted, or restored, and still running).
    pub fn is_warm(&self) -> bool {
        self.0
            .warm
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(Machine::alive)
    }

    /// Snapshots the warm guest into the directory `to` (the guest's memory: keep it private;
    /// the directory is made 0700 and its files 0600, replacing an earlier snapshot there once
    /// this one is whole). The guest stays warm. Calls wait while it is taken. An error when no
    /// guest is warm, or when this confiner was made without `snapshots`.
    pub fn snapshot(&self, to: &Path) -> Result<(), VmError> {
        let mut warm = self.0.warm.lock().unwrap_or_else(|e| e.into_inner());
        match warm.as_mut() {
            Some(m) if m.alive() => m.snapshot(&self.0.spec, to),
            _ => Err(VmError::Guest("no warm guest to snapshot".into())),
        }
    }

    /// Starts a guest from the snapshot in `from`, showing `plan`'s shares (a fork's own
    /// workspace), and keeps it warm in place of any other: the next call runs in it. A
    /// snapshot that cannot be restored is an error, and nothing boots cold in its place.
    pub fn warm_up_from(&self, from: &Path, plan: &Plan) -> Result<(), SandboxError> {
        let shares = self.0.shares(plan)?;
        let machine = Machine::restore(&self.0.spec, shares, &self.0.live, from).map_err(|e| {
            SandboxError::Host {
                what: "start the microVM guest from its snapshot (no cold boot takes its place)"
                    .into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        *self.0.last_hello.lock().unwrap_or_else(|e| e.into_inner()) = Some(machine.hello.clone());
        let old = self
            .0
            .warm
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(machine);
        drop(old);
        Ok(())
    }
}

impl Inner {
    /// The plan's shares, as [`shares_for`] says; for a guest that can be snapshotted, an overlay
    /// workspace is one share of its merged directory, mounted by the monitor ([`overlay_share`]).
    fn shares(&self, plan: &Plan) -> Result<Vec<HostShare>, SandboxError> {
        if self.spec.snapshots && matches!(plan.workspace, WorkspaceMount::Overlay { .. }) {
            let (bound, overlay) = guest_plan(plan)?;
            let mut shares = shares_for(&bound)?;
            for s in shares.iter_mut().filter(|s| s.path == overlay.path) {
                s.overlay.clone_from(&overlay.overlay);
            }
            return Ok(shares);
        }
        shares_for(plan)
    }

    /// The call's bytes as the guest runs them: for a guest that can be snapshotted, the plan
    /// of [`guest_plan`] (its workspace a bind of the overlay's merged directory).
    fn wire(&self, call: &PreparedCall) -> Result<Vec<u8>, SandboxError> {
        if self.spec.snapshots && matches!(call.plan().workspace, WorkspaceMount::Overlay { .. }) {
            return PreparedCall::new(guest_plan(call.plan())?.0)?.to_wire();
        }
        call.to_wire()
    }

    fn take_or_boot(&self, shares: Vec<HostShare>) -> Result<Machine, SandboxError> {
        let warm = self.warm.lock().unwrap_or_else(|e| e.into_inner()).take();
        match warm {
            Some(m) if m.shares == shares && m.alive() => Ok(m),
            _ => {
                let m =
                    Machine::boot(&self.spec, shares, &self.live).map_err(|e| boot_failed(&e))?;
                *self.last_hello.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.hello.clone());
                Ok(m)
            }
        }
    }

    /// Keeps `machine` warm for the next call, unless one is kept already or it stopped.
    pub(crate) fn give_back(&self, machine: Machine) {
        let mut warm = self.warm.lock().unwrap_or_else(|e| e.into_inner());
        if warm.is_none() && machine.alive() {
            *warm = Some(machine);
        }
    }

    fn start_blocking(
        self: Arc<Self>,
        wire: &[u8],
        shares: Vec<HostShare>,
        mode: CallStdio,
        gate: Option<Gate>,
        egress: bool,
        host_channel: bool,
    ) -> Result<GuestCall, SandboxError> {
        // The guest boots while the call's decision is made; the call is sent only once the
        // decision is durable (rule 3).
        let mut machine = self.take_or_boot(shares)?;
        if let Some(gate) = gate
            && !gate.wait_opened()
        {
            self.give_back(machine);
            return Err(SandboxError::Host {
                what: "wait at the call's gate".into(),
                source: std::io::Error::other("the call's key was dropped unopened"),
            });
        }
        let mut body = vec![mode as u8];
        body.extend_from_slice(wire);
        if machine.send(&Frame::new(tag::CALL, body)).is_err() {
            return Err(lost("its channel is gone: the guest stopped"));
        }
        match Frame::read_from(&mut machine.reader) {
            Ok(Some(f)) if f.tag == tag::STARTED => {}
            Ok(Some(f)) if f.tag == tag::START_FAILED => {
                let e: GuestError = f
                    .parse()
                    .map_err(|e| lost(&format!("its start's error: {e}")))?;
                self.give_back(machine);
                return Err(e.into());
            }
            _ => return Err(lost("the guest stopped before the call started")),
        }
        GuestCall::run(self, machine, mode, egress, host_channel)
    }
}

/// The name of the overlay's merged directory, beside its upper and work directories.
const MERGED: &str = "guest-merged";

/// For a guest whose shares are 9p, whose overlayfs cannot make a whiteout on a 9p upper layer:
/// `plan` with its overlay workspace replaced by a bind of the overlay's merged directory (made
/// empty beside the upper directory, the mount point), and the share that mounts that overlay
/// there in the monitor's root. Layers whose paths overlayfs's options cannot carry are refused
/// by name.
fn guest_plan(plan: &Plan) -> Result<(Plan, HostShare), SandboxError> {
    let WorkspaceMount::Overlay { lower, upper, work } = &plan.workspace else {
        return Err(SandboxError::Plan("not an overlay workspace".into()));
    };
    let Some(dir) = upper.parent().filter(|p| work.starts_with(p)) else {
        return Err(SandboxError::Plan(
            "a microVM guest cannot run a call with an overlay whose upper and work directories \
             are not siblings (docs/microvm.md)"
                .into(),
        ));
    };
    for p in [lower, upper, work] {
        if p.to_string_lossy().contains([',', ':', '\\', '\n']) {
            return Err(SandboxError::Plan(format!(
                "the overlay layer {} has a `,`, `:`, `\\` or newline in its path, which \
                 overlayfs's options cannot carry (docs/microvm.md)",
                p.display()
            )));
        }
    }
    let merged = dir.join(MERGED);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&merged)
        .or_else(|e| if merged.is_dir() { Ok(()) } else { Err(e) })
        .map_err(|e| SandboxError::Host {
            what: format!("make the overlay's mount point {}", merged.display()),
            source: e,
        })?;
    let mut bound = plan.clone();
    bound.workspace = WorkspaceMount::Bind {
        source: merged.clone(),
    };
    bound.own_overlay = OwnOverlay::Durable;
    bound.shared_overlay = false;
    let share = HostShare {
        path: merged,
        read_only: false,
        overlay: Some([lower.clone(), upper.clone(), work.clone()]),
    };
    Ok((bound, share))
}

/// The host directories a plan's call needs in its guest, each shown at its own path: the
/// system's /usr (read-only, as every call sees it), the workspace, the declared read and write
/// paths, the shims' directories (read-only), and the policy file's directory (read-only) when
/// the workspace does not hold it.
/// What a guest cannot show yet is refused by name rather than run without (rule 1).
pub fn shares_for(plan: &Plan) -> Result<Vec<HostShare>, SandboxError> {
    let refuse = |what: &str| {
        Err(SandboxError::Plan(format!(
            "a microVM guest (`[sandbox] isolation = \"microvm\"`) cannot run a call with {what} \
             yet (docs/microvm.md)"
        )))
    };
    if !plan.store_paths.is_empty() {
        return refuse("nix store paths");
    }
    let share = |path: &Path, read_only| HostShare {
        path: path.to_path_buf(),
        read_only,
        overlay: None,
    };
    let mut shares = vec![share(Path::new("/usr"), true)];
    match &plan.workspace {
        WorkspaceMount::Bind { source } => shares.push(share(source, false)),
        WorkspaceMount::ReadOnly { source } => shares.push(share(source, true)),
        WorkspaceMount::Overlay { lower, upper, work } => {
            // overlayfs wants its upper and work directories on one filesystem: one share of
            // the directory holding both.
            let Some(both) = upper.parent().filter(|p| work.starts_with(p)) else {
                return refuse("an overlay whose upper and work directories are not siblings");
            };
            shares.push(share(lower, true));
            // A call whose upper layer is a tmpfs of its own names directories it never uses.
            if plan.own_overlay != OwnOverlay::InMemory || plan.shared_overlay {
                shares.push(share(both, false));
            }
        }
    }
    shares.extend(plan.extra_read.iter().map(|p| share(p, true)));
    shares.extend(plan.extra_write.iter().map(|p| share(p, false)));
    for s in &shares {
        // As the host's driver: a declared path is never bound through a link (one swapped in
        // since the policy was read would share its target).
        if std::fs::symlink_metadata(&s.path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(SandboxError::Plan(format!(
                "{} is a symlink: a declared path is never shared into a microVM guest through \
                 a link",
                s.path.display()
            )));
        }
        if !s.path.is_dir() {
            return refuse(&format!(
                "{} (only directories can be shared)",
                s.path.display()
            ));
        }
    }
    // The shims (the git shim over each git): each program's directory and each layer over a
    // directory of several, read-only, unless a share already shows it (the session keeps the
    // shim and its layers in one directory of its own).
    let shim_dirs = plan.shims.iter().filter_map(|s| s.source.parent());
    for dir in shim_dirs.chain(plan.shim_dirs.iter().map(|d| d.layer.as_path())) {
        if !shares.iter().any(|s| dir.starts_with(&s.path)) {
            shares.push(share(dir, true));
        }
    }
    if let Some(policy) = &plan.policy_file
        && !shares.iter().any(|s| policy.starts_with(&s.path))
        && let Some(dir) = policy.parent()
    {
        shares.push(share(dir, true));
    }
    shares.sort();
    shares.dedup();
    Ok(shares)
}

impl Confiner for GuestConfiner {
    fn prepare(&self, plan: Plan) -> BoxFuture<'_, Result<PreparedCall, SandboxError>> {
        Box::pin(async move {
            self.0.shares(&plan)?;
            PreparedCall::new(plan)
        })
    }

    fn start(
        &self,
        call: PreparedCall,
        stdio: StdioMode,
        gate: Option<Gate>,
    ) -> BoxFuture<'_, Result<Box<dyn CallHandle>, SandboxError>> {
        let inner = self.0.clone();
        Box::pin(async move {
            let mode = match stdio {
                StdioMode::Piped => CallStdio::Piped,
                StdioMode::Duplex => CallStdio::Duplex,
                StdioMode::Null => CallStdio::Null,
                StdioMode::Inherit => {
                    return Err(SandboxError::Plan(
                        "a call in a microVM guest cannot share the host's terminal".into(),
                    ));
                }
            };
            let shares = inner.shares(call.plan())?;
            let wire = inner.wire(&call)?;
            let timeout = call.plan().timeout;
            let egress = matches!(call.plan().network, NetworkPlan::Proxy { .. });
            let host_channel = call.plan().host_channel;
            let mut started = tokio::task::spawn_blocking(move || {
                inner.start_blocking(&wire, shares, mode, gate, egress, host_channel)
            })
            .await
            .map_err(|e| SandboxError::Host {
                what: "start the call".into(),
                source: std::io::Error::other(e),
            })??;
            started.timeout = timeout;
            Ok(Box::new(started) as Box<dyn CallHandle>)
        })
    }
}
