//! Snapshots of a warm guest and forks that start from one, for real: QEMU's microvm machine
//! under TCG or KVM, its shares served by QEMU over virtio-9p (docs/microvm.md, "Snapshots and
//! forks"). Each test boots guests of its own.
//!
//! Needs what tests/guest.rs needs (built without the `microvm` feature the tests are ignored),
//! and a kernel directory with the 9p modules (`chock vm kernel` fetches them).

mod support;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_sandbox::{Confiner, ExitStatus, Plan, StdioMode, WorkspaceMount};
use chock_vm::GuestConfiner;

/// A directory under the home (the sandbox gives a call its own /tmp), removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(prefix: &str) -> Dir {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(home)
            .unwrap()
            .keep();
        Dir(dir)
    }

    fn plan(&self, script: &str) -> Plan {
        Plan::builder(
            vec!["sh".into(), "-c".into(), script.into()],
            WorkspaceMount::Bind {
                source: self.0.clone(),
            },
            self.0.clone(),
        )
        .timeout(Some(Duration::from_secs(120)))
        .build()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `script` in `c` in the workspace `ws`: its stdout, after checking it exited 0.
fn run(c: &GuestConfiner, ws: &Dir, script: &str) -> String {
    run_plan(c, ws.plan(script))
}

/// Runs `plan` in `c`: its stdout, after checking it exited 0.
fn run_plan(c: &GuestConfiner, plan: Plan) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let call = c.prepare(plan).await.unwrap();
        let mut h = c.start(call, StdioMode::Piped, None).await.unwrap();
        let read = |f: Option<std::fs::File>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(mut f) = f {
                    let _ = f.read_to_string(&mut s);
                }
                s
            })
        };
        let (out, err) = (read(h.take_stdout()), read(h.take_stderr()));
        let outcome = h.wait().await.unwrap();
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        assert_eq!(outcome.status, ExitStatus::Exited(0), "{out}\n{err}");
        out
    })
}

/// What a call prints of its guest: the boot's id (made by the guest's kernel at each boot,
/// kept in its memory), and the workspace's `who`.
const WHO: &str = "cat /proc/sys/kernel/random/boot_id; cat who";

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_fork_starts_from_the_parents_snapshot_and_its_guest_sees_the_forks_workspace() {
    let Some(parent) = support::confiner(true) else {
        return;
    };
    let (parent_ws, fork_ws) = (Dir::new(".chock-vm-parent-"), Dir::new(".chock-vm-fork-"));
    std::fs::write(parent_ws.0.join("who"), "parent\n").unwrap();
    std::fs::write(fork_ws.0.join("who"), "fork\n").unwrap();
    let first = run(&parent, &parent_ws, WHO);
    let boot_id = first.lines().next().unwrap().to_string();
    assert_eq!(first.lines().nth(1), Some("parent"));
    let monitor = parent.monitors();

    // The session's private state: the snapshot holds the guest's memory.
    let state = Dir::new(".chock-vm-state-");
    let snap = state.0.join("guest");
    parent
        .snapshot(&snap)
        .expect("a snapshot of the warm guest");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&snap), 0o700);
    for f in std::fs::read_dir(&snap).unwrap().flatten() {
        assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
    }

    // The parent's guest runs on, warm, with its own workspace mounted again.
    let again = run(&parent, &parent_ws, &format!("{WHO}; echo p > by-parent"));
    assert_eq!(again, first);
    assert_eq!(
        parent.monitors(),
        monitor,
        "the parent's guest was not kept"
    );

    // The fork: a guest of its own started from the snapshot, showing the fork's workspace.
    let fork = support::confiner(true).unwrap();
    let started = Instant::now();
    fork.warm_up_from(&snap, &fork_ws.plan("true"))
        .expect("a guest started from the snapshot");
    let restore = started.elapsed();
    let out = run(
        &fork,
        &fork_ws,
        &format!("{WHO}; date +%s; echo f > by-fork"),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], boot_id,
        "the fork's guest booted a kernel of its own instead of starting from the snapshot"
    );
    assert_eq!(
        lines[1], "fork",
        "the fork's guest sees the parent's workspace"
    );
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let guest_now: u64 = lines[2].parse().unwrap();
    assert!(
        host_now.abs_diff(guest_now) < 60,
        "the fork's guest's clock is {guest_now}, the host's {host_now}"
    );
    assert!(fork_ws.0.join("by-fork").is_file());
    assert!(!parent_ws.0.join("by-fork").exists());
    assert_eq!(fork.monitors().len(), 1);
    assert_ne!(fork.monitors(), parent.monitors());

    // And the parent's guest still sees the parent's workspace, not the fork's.
    let parent_now = run(&parent, &parent_ws, "cat who; ls");
    assert!(parent_now.starts_with("parent\n"), "{parent_now}");
    assert!(!parent_now.contains("by-fork"), "{parent_now}");
    eprintln!("the fork's guest started from the snapshot in {restore:?}");
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_snapshot_that_cannot_be_restored_fails_and_nothing_boots_cold() {
    let Some(parent) = support::confiner(true) else {
        return;
    };
    let ws = Dir::new(".chock-vm-parent-");
    std::fs::write(ws.0.join("who"), "parent\n").unwrap();
    run(&parent, &ws, WHO);
    let state = Dir::new(".chock-vm-state-");
    let snap = state.0.join("guest");
    parent
        .snapshot(&snap)
        .expect("a snapshot of the warm guest");
    drop(parent);

    let fork = support::confiner(true).unwrap();
    let fails = |from: &Path, plan: Plan, says: &str| {
        let e = fork
            .warm_up_from(from, &plan)
            .expect_err("a snapshot that cannot be restored started a guest");
        assert!(e.to_string().contains(says), "{e}");
        assert!(fork.monitors().is_empty(), "a monitor was left running");
        assert!(fork.last_hello().is_none(), "a guest booted cold");
    };
    // No snapshot at all.
    fails(&state.0.join("none"), ws.plan("true"), "machine.json");
    // Another machine's: a workspace shared as two directories, not one.
    let extra = Dir::new(".chock-vm-extra-");
    let two = Plan::builder(
        vec!["true".into()],
        WorkspaceMount::Bind {
            source: ws.0.clone(),
        },
        ws.0.clone(),
    )
    .extra_read(vec![extra.0.clone()])
    .build();
    fails(&snap, two, "shares");
    // A state QEMU cannot load: the guest never comes up, and the error says so.
    let state_file = snap.join("state");
    let len = std::fs::metadata(&state_file).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&state_file)
        .unwrap();
    f.set_len(len / 2).unwrap();
    fails(&snap, ws.plan("true"), "snapshot");
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn the_monitor_that_serves_the_shares_holds_those_directories_and_nothing_else() {
    let Some(c) = support::confiner(true) else {
        return;
    };
    let ws = Dir::new(".chock-vm-ws-");
    let sibling = Dir::new(".chock-vm-sibling-");
    std::fs::write(sibling.0.join("secret"), "x").unwrap();
    run(&c, &ws, "echo in > made");
    let pid = c.monitors()[0];
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap());
    assert!(
        inside(&ws.0).join("made").is_file(),
        "the workspace is not in its root"
    );
    assert!(
        !inside(&sibling.0).exists(),
        "the monitor's root shows {} too",
        sibling.0.display()
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.lines().any(|l| l == "Seccomp:\t2"), "{status}");
    // /usr is served read-only: its bind in the monitor's root is read-only.
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let usr: Vec<&str> = mounts
        .lines()
        .filter(|l| l.split(' ').nth(4) == Some("/usr"))
        .collect();
    assert!(!usr.is_empty(), "{mounts}");
    assert!(
        usr.iter()
            .all(|l| l.split(' ').nth(5).unwrap().starts_with("ro")),
        "{usr:?}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn an_overlay_workspace_is_mounted_by_the_monitor_and_its_deletions_are_whiteouts() {
    use std::os::unix::fs::FileTypeExt;
    let Some(c) = support::confiner(true) else {
        return;
    };
    let ws = Dir::new(".chock-vm-overlay-");
    for d in ["lower/sub", "layers/upper", "layers/work"] {
        std::fs::create_dir_all(ws.0.join(d)).unwrap();
    }
    std::fs::write(ws.0.join("lower/gone.txt"), "lower\n").unwrap();
    std::fs::write(ws.0.join("lower/sub/kept.txt"), "lower\n").unwrap();
    let plan = |script: &str| {
        Plan::builder(
            vec!["sh".into(), "-c".into(), script.into()],
            WorkspaceMount::Overlay {
                lower: ws.0.join("lower"),
                upper: ws.0.join("layers/upper"),
                work: ws.0.join("layers/work"),
            },
            ws.0.join("lower"),
        )
        .timeout(Some(Duration::from_secs(120)))
        .build()
    };
    // The guest's own overlayfs over a 9p upper layer fails this `rm` (ENXIO): no whiteout.
    let out = run_plan(
        &c,
        plan(
            "rm gone.txt && echo new > new.txt && echo more >> sub/kept.txt && ls -a && cat sub/kept.txt",
        ),
    );
    assert!(!out.contains("gone.txt"), "{out}");
    assert!(out.contains("new.txt"), "{out}");
    assert!(out.ends_with("lower\nmore\n"), "{out}");
    // The upper layer is the host's overlayfs's: a whiteout for the deletion, the writes.
    let upper = ws.0.join("layers/upper");
    let gone = std::fs::symlink_metadata(upper.join("gone.txt")).expect("a whiteout");
    assert!(gone.file_type().is_char_device(), "{gone:?}");
    assert_eq!(
        std::fs::read_to_string(upper.join("new.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join("sub/kept.txt")).unwrap(),
        "lower\nmore\n"
    );
    // The project (the lower layer) is untouched.
    assert_eq!(
        std::fs::read_to_string(ws.0.join("lower/gone.txt")).unwrap(),
        "lower\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.0.join("lower/sub/kept.txt")).unwrap(),
        "lower\n"
    );
    assert!(!ws.0.join("lower/new.txt").exists());
    // A snapshot of that guest is taken and the next call still sees the workspace.
    let snap = ws.0.join("snap");
    c.snapshot(&snap).expect("snapshot");
    assert_eq!(run_plan(&c, plan("cat new.txt")), "new\n");
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_snapshot_that_cannot_be_kept_leaves_nothing_and_the_guest_warm() {
    let Some(c) = support::confiner(true) else {
        return;
    };
    let ws = Dir::new(".chock-vm-ws-");
    std::fs::write(ws.0.join("who"), "parent\n").unwrap();
    let first = run(&c, &ws, WHO);
    let monitor = c.monitors();
    // Where the snapshot should go is a file: it cannot be put there.
    let state = Dir::new(".chock-vm-state-");
    let to = state.0.join("guest");
    std::fs::write(&to, "not a directory").unwrap();
    c.snapshot(&to).expect_err("a snapshot put over a file");
    let left: Vec<_> = std::fs::read_dir(&state.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("guest")], "{left:?}");
    assert_eq!(std::fs::read_to_string(&to).unwrap(), "not a directory");
    // The guest is the same, warm, its workspace mounted again.
    assert_eq!(run(&c, &ws, WHO), first);
    assert_eq!(c.monitors(), monitor);
}
