//! The ids a virtiofs server's user namespace maps (docs/microvm.md, "The file servers").
//!
//! As root, root is mapped to itself. An unprivileged user's server maps the user's uid as the
//! namespace's root and **two** groups: the user's own group as group 0, and the first of its
//! subordinate groups (/etc/subgid) as group 1. Both are needed:
//!
//! - QEMU's virtiofsd drops its supplementary groups with `setgroups`, which a namespace whose
//!   group map the user wrote alone forbids: a map written by `newgidmap` with a subordinate
//!   range in it leaves `setgroups` allowed;
//! - the project's files belong to the user's own group. Unmapped, they show the overflow group
//!   in the guest, and an overlay's copy-up there, which gives its copy the file's group, fails
//!   (`EOVERFLOW`): a call could not change an existing file of an overlay workspace.
//!
//! util-linux's `unshare` writes one group range, so the maps are written from here, with
//! `newuidmap` and `newgidmap` against the server's pid, while it waits on a FIFO before it does
//! anything in its namespaces. It waits in a shell that then executes the server's script: that
//! exec, by a process that is now root in its namespace, gives it the capabilities its mounts
//! need (the first one, made before its ids were mapped, kept none).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::VmError;

/// How a file server's user namespace gets its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerIds {
    /// Root: root mapped to itself (`unshare --map-root-user`).
    Root,
    /// An unprivileged user: its uid as root, its own group as 0 and a subordinate group as 1.
    User { uid: u32, gid: u32, subgid: u32 },
}

impl ServerIds {
    /// This process's, or why an unprivileged user cannot run a file server.
    pub(crate) fn of_this_process() -> Result<ServerIds, VmError> {
        let uid = rustix::process::geteuid().as_raw();
        if uid == 0 {
            return Ok(ServerIds::Root);
        }
        let gid = rustix::process::getegid().as_raw();
        let uid_text = uid.to_string();
        let name = std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.get(2) == Some(&uid_text.as_str())).then(|| f[0].to_string())
            })
            .unwrap_or_default();
        let subgid = std::fs::read_to_string("/etc/subgid")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                let owner = f.first().copied().unwrap_or_default();
                (owner == name || owner == uid_text)
                    .then(|| f.get(1).and_then(|s| s.parse::<u32>().ok()))
                    .flatten()
            });
        let tools = ["/usr/bin/newuidmap", "/usr/bin/newgidmap"];
        match subgid {
            Some(subgid) if tools.iter().all(|t| Path::new(t).is_file()) => {
                Ok(ServerIds::User { uid, gid, subgid })
            }
            _ => Err(VmError::Guest(format!(
                "the guest's file servers need, for an unprivileged user, a subordinate group \
                 range in /etc/subgid for {name} (uid {uid}) and newuidmap and newgidmap \
                 (Debian: uidmap)"
            ))),
        }
    }

    /// `unshare` running `script` (with `args`) in new user and mount namespaces with these ids.
    /// For a user, the shell first waits on `fifo` until [`ServerIds::map`] has written the maps.
    pub(crate) fn command(&self, script: &str, fifo: &Path) -> Command {
        let mut c = Command::new("unshare");
        match self {
            ServerIds::Root => {
                c.args([
                    "--user",
                    "--map-root-user",
                    "--mount",
                    "--",
                    "sh",
                    "-c",
                    script,
                    "sh",
                ]);
            }
            ServerIds::User { .. } => {
                // `$1` the FIFO, `$2` the server's script; its own arguments follow.
                let wait =
                    r#"read -r _ < "$1" || exit 1; s=$2; shift 2; exec /bin/sh -c "$s" sh "$@""#;
                c.args(["--user", "--mount", "--", "sh", "-c", wait, "sh"])
                    .arg(fifo)
                    .arg(script);
            }
        }
        c
    }

    /// The FIFO a user's server waits on, made in the machine's directory `dir` as `name`.
    pub(crate) fn fifo(&self, dir: &Path, name: &str) -> Result<PathBuf, VmError> {
        let path = dir.join(name);
        if *self != ServerIds::Root {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
                0,
            )
            .map_err(|e| VmError::Guest(format!("make {}: {e}", path.display())))?;
        }
        Ok(path)
    }

    /// Writes the maps of `child`'s user namespace (once it has one), then lets it go on through
    /// `fifo`. A map that cannot be written kills the child: a server with the wrong ids serves
    /// nothing.
    pub(crate) fn map(&self, child: &mut Child, fifo: &Path) -> Result<(), VmError> {
        let ServerIds::User { uid, gid, subgid } = *self else {
            return Ok(());
        };
        let result = write_maps(child, uid, gid, subgid).and_then(|()| release(child, fifo));
        let _ = std::fs::remove_file(fifo);
        if result.is_err() {
            let _ = child.kill();
            let _ = child.wait();
        }
        result
    }
}

fn write_maps(child: &mut Child, uid: u32, gid: u32, subgid: u32) -> Result<(), VmError> {
    let pid = child.id();
    let ours = std::fs::read_link("/proc/self/ns/user").ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    // `unshare` makes the namespace before it executes the shell: wait until it is there.
    while std::fs::read_link(format!("/proc/{pid}/ns/user")).ok() == ours {
        if Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))) {
            return Err(VmError::Guest(
                "a file server's user namespace was not made".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = pid.to_string();
    let maps = [
        (
            "/usr/bin/newuidmap",
            vec![pid.clone(), "0".into(), uid.to_string(), "1".into()],
        ),
        (
            "/usr/bin/newgidmap",
            vec![
                pid.clone(),
                "0".into(),
                gid.to_string(),
                "1".into(),
                "1".into(),
                subgid.to_string(),
                "1".into(),
            ],
        ),
    ];
    for (tool, args) in maps {
        let out = Command::new(tool)
            .args(&args)
            .output()
            .map_err(|e| VmError::Guest(format!("{tool}: {e}")))?;
        if !out.status.success() {
            return Err(VmError::Guest(format!(
                "{tool} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// Opens the FIFO's writing end (once the shell has its reading end open) and writes a line.
fn release(child: &mut Child, fifo: &Path) -> Result<(), VmError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(fifo)
        {
            Ok(mut f) => {
                return f
                    .write_all(b"go\n")
                    .map_err(|e| VmError::Guest(format!("release a file server: {e}")));
            }
            // No reader yet (ENXIO): the shell has not opened it.
            Err(_) if Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(VmError::Guest(format!("release a file server: {e}"))),
        }
    }
}
