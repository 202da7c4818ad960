//! cgroup v2 limits: the one best-effort layer. Where the machine lets Chock make a cgroup (as root
//! under `<cgroup2>/chock/`, as a user under its own delegated cgroup when that is writable), each
//! call gets one, with memory.max, pids.max and cpu.max when those controllers are available, and it
//! is also how the call is killed as a whole. Where it cannot, the call runs without, and its
//! [`LimitsReport`] says so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::wire::outcome::LimitsReport;
use crate::wire::plan::Limits;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The mount point of the cgroup v2 hierarchy, if any.
pub(crate) fn v2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        Some(PathBuf::from(pre.split_whitespace().nth(4)?))
    })
}

/// This process's cgroup v2 path (relative to the hierarchy's root).
fn own_path() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_start_matches('/').to_string())
}

fn writable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Where this process may make call cgroups, and whether controllers can be enabled there.
pub(crate) fn base_dir() -> Result<(PathBuf, bool), String> {
    let mount = v2_mount().ok_or("no cgroup v2 hierarchy is mounted")?;
    // SAFETY: geteuid never fails.
    if unsafe { libc::geteuid() } == 0 {
        let base = mount.join("chock");
        std::fs::create_dir_all(&base)
            .map_err(|e| format!("cannot create {}: {e}", base.display()))?;
        return Ok((base, true));
    }
    let own = mount.join(own_path().ok_or("this process has no cgroup v2 path")?);
    if writable(&own) {
        Ok((own, false))
    } else {
        Err(format!(
            "{} is not delegated to this user (not writable)",
            own.display()
        ))
    }
}

/// Removes empty call cgroups left by a Chock process that died before cleaning up (`call-<pid>-<n>`
/// whose pid no longer exists). A cgroup that still has processes refuses rmdir and stays.
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("call-"))
            .and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// A call's cgroup.
#[derive(Debug, Clone)]
pub(crate) struct Cgroup {
    pub dir: PathBuf,
}

/// Makes a cgroup for one call and sets the requested limits; fills `report`.
pub(crate) fn create(limits: &Limits, report: &mut LimitsReport) -> Option<Cgroup> {
    let wanted = limits.memory_max_bytes.is_some()
        || limits.pids_max.is_some()
        || limits.cpu_max_percent.is_some();
    let (base, can_enable) = match base_dir() {
        Ok(b) => b,
        Err(why) => {
            if wanted {
                report.cgroup_note = format!("no cgroup: {why}");
            }
            return None;
        }
    };
    let mut available =
        std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    if can_enable {
        for ctl in ["memory", "pids", "cpu"] {
            if available.split_whitespace().any(|c| c == ctl) {
                if let Some(parent) = base.parent() {
                    let _ =
                        std::fs::write(parent.join("cgroup.subtree_control"), format!("+{ctl}"));
                }
                let _ = std::fs::write(base.join("cgroup.subtree_control"), format!("+{ctl}"));
            }
        }
    }
    sweep_stale(&base);
    // Without a controller to limit with, a cgroup would only kill the call as a whole, which its
    // pid namespace already does; joining one costs an RCU grace period (10-15 ms on a loaded
    // machine), so make none.
    // What a child of `base` gets is what `base` hands down.
    available = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    if !["memory", "pids", "cpu"]
        .iter()
        .any(|c| available.split_whitespace().any(|a| a == *c))
    {
        if wanted {
            report.cgroup_note = format!(
                "no memory, pids or cpu controller is enabled for {} (cgroup v2 here has: {})",
                base.display(),
                if available.trim().is_empty() {
                    "none"
                } else {
                    available.trim()
                }
            );
        }
        return None;
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("call-{}-{n}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        if wanted {
            report.cgroup_note = format!("cannot create {}: {e}", dir.display());
        }
        return None;
    }
    let mut off = Vec::new();
    let mut set = |file: &str, value: String, what: &str| -> bool {
        let path = dir.join(file);
        if !path.exists() {
            off.push(format!(
                "{what}: the `{}` controller is not enabled here",
                file.split('.').next().unwrap_or(file)
            ));
            return false;
        }
        match std::fs::write(&path, &value) {
            Ok(()) => true,
            Err(e) => {
                off.push(format!("{what}: writing {}: {e}", path.display()));
                false
            }
        }
    };
    if let Some(m) = limits.memory_max_bytes
        && set("memory.max", m.to_string(), "memory")
    {
        report.memory_max_bytes = Some(m);
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
    }
    if let Some(p) = limits.pids_max
        && set("pids.max", p.to_string(), "pids")
    {
        report.pids_max = Some(p);
    }
    if let Some(c) = limits.cpu_max_percent {
        let period = 100_000u64;
        if set(
            "cpu.max",
            format!("{} {period}", u64::from(c) * period / 100),
            "cpu",
        ) {
            report.cpu_max_percent = Some(c);
        }
    }
    report.cgroup = Some(dir.display().to_string());
    report.cgroup_note = off.join("; ");
    Some(Cgroup { dir })
}

impl Cgroup {
    /// The cgroup.procs file a process writes "0" into to join.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills every process in the cgroup (cgroup.kill, Linux 5.14+; else one by one).
    pub(crate) fn kill(&self) {
        if std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        if let Ok(procs) = std::fs::read_to_string(self.procs_file()) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: kill with a pid read from our own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    /// Removes the cgroup once it is empty (retrying briefly while the kernel finishes exits).
    pub(crate) fn remove(&self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}
