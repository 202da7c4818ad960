//! `chock doctor`'s probes: each layer tried for real, in a throwaway child, one row per layer.
//!
//! The probe child tries every layer in the order the driver applies them and reports each result
//! on a pipe; then a whole call (`/bin/true` with every layer) is run through [`crate::spawn`], which
//! is the row that matters: the driver applies the same calls, so a row that is on here is on there.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;

use serde::Serialize;

use crate::child::caps;
use crate::child::landlock_rules::{self, LandlockPlan};
use crate::child::namespaces;
use crate::child::seccomp_rules::{self, Arch};
use crate::child::sys::{self, errno, exit_now};
use crate::spawn;

/// One row of `chock doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    /// The layer ("user namespace", "landlock", ...).
    pub layer: String,
    /// Whether a call needs it (false: best effort or informational).
    pub required: bool,
    /// Whether it works on this machine (applied in a throwaway child, or found).
    pub on: bool,
    /// Why, in words (the ABI and its features, the errno, what KVM really is).
    pub detail: String,
}

fn row(layer: &str, required: bool, on: bool, detail: impl Into<String>) -> LayerReport {
    LayerReport {
        layer: layer.into(),
        required,
        on,
        detail: detail.into(),
    }
}

/// Probes in the child, in order. Each writes one (index, errno) record; 0 means on.
const PROBES: [&str; 12] = [
    "user namespace",
    "mount namespace",
    "pid namespace",
    "ipc namespace",
    "uts namespace",
    "network namespace",
    "cgroup namespace",
    "overlayfs in a user namespace",
    "capabilities dropped",
    "no_new_privs",
    "landlock",
    "seccomp",
];

fn probe_child(
    w: i32,
    uid_map: &[u8],
    gid_map: &[u8],
    landlock: &LandlockPlan,
    filters: &[seccompiler::BpfProgram],
) -> ! {
    let put = |i: u8, e: i32| {
        let mut rec = [0u8; 5];
        rec[0] = i;
        rec[1..].copy_from_slice(&e.to_ne_bytes());
        let _ = sys::write_all(w, &rec);
    };
    let user = namespaces::unshare(libc::CLONE_NEWUSER)
        .and_then(|()| namespaces::write_id_maps(uid_map, gid_map).map_err(|(_, e)| e));
    put(0, user.err().unwrap_or(0));
    for (i, (flag, _)) in namespaces::AFTER_USER.iter().enumerate() {
        put(
            u8::try_from(i + 1).unwrap_or(0),
            namespaces::unshare(*flag).err().unwrap_or(0),
        );
    }
    put(7, overlay_probe().err().unwrap_or(0));
    put(8, caps::drop_all().err().map_or(0, |(_, e)| e));
    put(9, caps::set_no_new_privs().err().unwrap_or(0));
    put(
        10,
        landlock_rules::apply(landlock).err().map_or(0, |(_, e)| e),
    );
    let seccomp = seccomp_rules::install(filters, false).and_then(|_| {
        // With the filter on, unshare(CLONE_NEWUSER) must fail with EPERM.
        match namespaces::unshare(libc::CLONE_NEWUSER) {
            Err(libc::EPERM) => Ok(()),
            Err(e) => Err(e),
            Ok(()) => Err(libc::EINVAL),
        }
    });
    put(11, seccomp.err().unwrap_or(0));
    exit_now(0)
}

/// Mounts an overlay inside the probe's user and mount namespaces (a tmpfs holds its layers).
fn overlay_probe() -> Result<(), i32> {
    use crate::child::mount_calls::apply;
    use crate::wire::mount_ops::Op;
    apply(&Op::MakePrivate)?;
    apply(&Op::Tmpfs {
        target: c"/tmp".into(),
        data: c"size=1048576".into(),
        flags: 0,
    })?;
    for d in [c"/tmp/l", c"/tmp/u", c"/tmp/w", c"/tmp/m"] {
        apply(&Op::Mkdir {
            path: d.into(),
            mode: 0o700,
        })?;
    }
    apply(&Op::Overlay {
        target: c"/tmp/m".into(),
        data: c"lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr".into(),
        readonly: false,
    })
}

fn errno_words(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Runs the probe child and reads its rows.
fn probe_layers(abi: i32) -> Vec<LayerReport> {
    // SAFETY: geteuid/getegid never fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();
    let landlock = LandlockPlan {
        abi,
        writable_dirs: Vec::new(),
        writable_files: Vec::new(),
        proxy_port: None,
    };
    let filters = Arch::current()
        .and_then(|a| seccomp_rules::compile(a).ok())
        .unwrap_or_default();
    let (r, w) = match crate::host::plumbing::pipe() {
        Ok(ends) => ends,
        Err(e) => return vec![row("probe", true, false, e.to_string())],
    };
    // SAFETY: the child only runs `probe_child` (prepared data, raw calls; Landlock allocates, as in
    // the driver: see prepare.rs) and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        drop(r);
        probe_child(w.as_raw_fd(), &uid_map, &gid_map, &landlock, &filters);
    }
    drop(w);
    let mut bytes = Vec::new();
    let _ = std::fs::File::from(r).read_to_end(&mut bytes);
    if pid > 0 {
        let mut status = 0;
        // SAFETY: reap our own child.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
    }
    let mut results = [None; PROBES.len()];
    for rec in bytes.chunks_exact(5) {
        let e = i32::from_ne_bytes([rec[1], rec[2], rec[3], rec[4]]);
        if let Some(slot) = results.get_mut(usize::from(rec[0])) {
            *slot = Some(e);
        }
    }
    PROBES
        .iter()
        .zip(results)
        .map(|(name, result)| {
            let (on, detail) = match (result, *name) {
                (Some(0), "landlock") => (
                    true,
                    format!("ABI {abi}: {}", landlock_rules::features(abi).join(", ")),
                ),
                (Some(0), "seccomp") => (
                    true,
                    format!(
                        "{}; filter verified",
                        Arch::current().map_or_else(
                            || format!("{} rules", seccomp_rules::RULES.len()),
                            seccomp_rules::summary
                        )
                    ),
                ),
                (Some(0), "overlayfs in a user namespace") => {
                    (true, "overlay mounted with userxattr".to_string())
                }
                (Some(0), _) => (true, "applied in a throwaway child".to_string()),
                (Some(e), "user namespace") => (
                    false,
                    format!(
                        "{}: {}",
                        errno_words(e),
                        crate::host::hints::user_namespace()
                    ),
                ),
                (Some(e), _) => (false, errno_words(e)),
                (None, _) => (false, "not reached: an earlier layer failed".to_string()),
            };
            row(name, true, on, detail)
        })
        .collect()
}

/// A whole call with every layer, and the cgroup row from its limits report.
fn probe_call() -> Vec<LayerReport> {
    let dir = std::env::temp_dir().join(format!("chock-doctor-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let plan = crate::Plan::builder(
        vec!["/bin/true".into()],
        crate::WorkspaceMount::Bind {
            source: dir.clone(),
        },
        dir.clone(),
    )
    .timeout(Some(std::time::Duration::from_secs(30)))
    .build();
    let result = spawn(&plan, crate::StdioMode::Null).and_then(|mut c| c.wait());
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(outcome) => {
            let l = &outcome.limits;
            let mut on = Vec::new();
            if let Some(m) = l.memory_max_bytes {
                on.push(format!("memory.max {} MiB", m >> 20));
            }
            if let Some(p) = l.pids_max {
                on.push(format!("pids.max {p}"));
            }
            if let Some(c) = l.cpu_max_percent {
                on.push(format!("cpu.max {c}%"));
            }
            let cg_detail = match (&l.cgroup, on.is_empty()) {
                (None, _) => format!("off (best effort): {}", l.cgroup_note),
                (Some(_), true) => format!(
                    "a cgroup per call (kills the call as a whole), no limits: {}",
                    l.cgroup_note
                ),
                (Some(_), false) if l.cgroup_note.is_empty() => on.join(", "),
                (Some(_), false) => format!("{}; {}", on.join(", "), l.cgroup_note),
            };
            vec![
                row(
                    "whole call",
                    true,
                    outcome.status == crate::ExitStatus::Exited(0),
                    format!(
                        "/bin/true with every layer: {:?} in {:?}",
                        outcome.status, outcome.duration
                    ),
                ),
                row("cgroup limits", false, !on.is_empty(), cg_detail),
            ]
        }
        Err(e) => vec![
            row("whole call", true, false, e.to_string()),
            row(
                "cgroup limits",
                false,
                false,
                "not measured: the call did not run",
            ),
        ],
    }
}

/// What /dev/kvm really is. Informational: Chock needs no KVM today.
pub fn kvm() -> LayerReport {
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    let modules: Vec<&str> = ["kvm_intel", "kvm_amd", "kvm_pvm"]
        .into_iter()
        .filter(|m| Path::new("/sys/module").join(m).exists())
        .collect();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| {
            l.split_whitespace()
                .filter(|f| matches!(*f, "vmx" | "svm" | "hypervisor"))
                .collect()
        })
        .unwrap_or_default();
    let api = match std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Err(e) => Err(e.to_string()),
        Ok(f) => match sys::ioctl_request(KVM_GET_API_VERSION) {
            Err(_) => Err(format!(
                "KVM_GET_API_VERSION ({KVM_GET_API_VERSION:#x}) is not an ioctl request of this target"
            )),
            Ok(request) => {
                // SAFETY: KVM_GET_API_VERSION takes no argument and returns an int.
                let v = unsafe { libc::ioctl(f.as_raw_fd(), request, 0) };
                if v < 0 {
                    Err(errno_words(errno()))
                } else {
                    Ok(v)
                }
            }
        },
    };
    let hw = flags.iter().any(|f| *f == "vmx" || *f == "svm");
    let facts = format!(
        "modules: {}; cpu flags: {}",
        if modules.is_empty() {
            "none".to_string()
        } else {
            modules.join(", ")
        },
        if flags.is_empty() {
            "no vmx/svm".to_string()
        } else {
            flags.join(", ")
        }
    );
    let api_words = match &api {
        Ok(v) => format!("/dev/kvm answers API {v}"),
        Err(e) => format!("/dev/kvm unusable here ({e})"),
    };
    let pvm = modules.contains(&"kvm_pvm") || (!hw && Path::new("/dev/kvm").exists());
    let (on, detail) = if pvm {
        (
            false,
            format!(
                "not hardware KVM (PVM): {api_words}, but PVM cannot boot a stock kernel; {facts}"
            ),
        )
    } else if api.is_ok() && hw {
        (true, format!("hardware KVM: {api_words}; {facts}"))
    } else {
        (false, format!("no usable KVM: {api_words}; {facts}"))
    };
    row("kvm", false, on, detail)
}

/// Every row: the namespaces, overlayfs, capabilities, no_new_privs, Landlock, seccomp, a whole
/// call, cgroup limits (best effort) and KVM (informational).
pub fn probe_all() -> Vec<LayerReport> {
    let abi = landlock_rules::kernel_abi();
    let mut rows = probe_layers(abi);
    if abi < landlock_rules::MINIMUM_ABI
        && let Some(r) = rows.iter_mut().find(|r| r.layer == "landlock")
    {
        r.on = false;
        r.detail = format!(
            "no Landlock ABI (answer {abi}): {}",
            crate::host::hints::landlock_missing()
        );
    }
    rows.extend(probe_call());
    rows.push(socket_index());
    rows.push(kvm());
    rows
}

/// Whether a session can keep its index of the sockets under declared `[sandbox]` paths current
/// by inotify. Informational: without it every call walks its declared paths (slower, and just as
/// strict), and the session's log says so at the first call that does.
pub fn socket_index() -> LayerReport {
    let watches = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    match crate::host::socket_tree::Watcher::new() {
        Ok(_) => row(
            "socket index",
            false,
            true,
            format!(
                "inotify: declared paths are walked once per session (max_user_watches {watches}: one watch per directory)"
            ),
        ),
        Err(e) => row(
            "socket index",
            false,
            false,
            format!(
                "no inotify instance ({e}): every call walks its declared [sandbox] paths to find the sockets to mask"
            ),
        ),
    }
}
