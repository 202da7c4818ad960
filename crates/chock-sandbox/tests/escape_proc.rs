//! Escape suite, processes and privilege: host processes, capabilities, set-uid programs,
//! mounting, nested namespaces, inherited descriptors, processes that outlive the call.
//! Each test names the layer that must stop the act; see docs/sandbox.md.

mod escape_support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use chock_sandbox::ExitStatus;
use escape_support::{Backing, Fixture, SECRET, host_processes_with, hostile, run, token};

/// A host process that the tests try to see and to signal; killed when dropped.
struct HostSleeper {
    child: std::process::Child,
    token: String,
}

impl HostSleeper {
    fn start() -> HostSleeper {
        let token = token("sleeper");
        let child = std::process::Command::new("/bin/sh")
            .args(["-c", "exec sleep 60", &token])
            .spawn()
            .expect("start a host sleep");
        HostSleeper { child, token }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for HostSleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Attack: look at the host's processes. Layer: the pid namespace with a fresh /proc.
#[test]
fn host_processes_are_invisible() {
    let sleeper = HostSleeper::start();
    let r = hostile(Backing::Overlay, &["pids"]);
    let out = r.assert_reported();
    let head: String = out.lines().take(12).collect::<Vec<_>>().join("\n");
    assert!(
        !out.contains(&sleeper.token),
        "a host process is visible inside (first lines):\n{head}"
    );
    let pids: Vec<u32> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(
        !pids.is_empty(),
        "/proc lists nothing at all, so this test proves nothing:\n{out}"
    );
    assert!(
        pids.len() <= 4,
        "{} processes visible, not only the call's own:\n{head}",
        pids.len()
    );
    assert!(
        pids.contains(&1),
        "the sandbox's /proc has no pid 1:\n{out}"
    );
    assert!(
        !pids.contains(&sleeper.child.id()) || sleeper.child.id() <= 4,
        "host pid visible:\n{out}"
    );
}

/// Attack: signal a host process by its host pid. Layer: the pid namespace (the pid does not exist
/// inside: ESRCH); Landlock's signal scope (ABI 6+) stands behind it.
#[test]
fn a_host_process_cannot_be_signalled() {
    let mut sleeper = HostSleeper::start();
    let pid = sleeper.child.id().to_string();
    let r = hostile(Backing::Overlay, &["kill", &pid]);
    assert!(
        sleeper.alive(),
        "the host process was killed from inside the sandbox"
    );
    r.assert_refused("ESRCH", "pid namespace");
}

/// The five capability sets and the confinement flags of a process inside, from /proc/self/status.
fn status_fields(out: &str) -> std::collections::BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Attack: keep any capability. Layer: capabilities dropped from every set (bounding and ambient
/// included), no_new_privs, and the seccomp filter installed (mode 2).
#[test]
fn no_capability_survives() {
    let r = hostile(Backing::Overlay, &["status"]);
    let fields = status_fields(r.assert_reported());
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            fields.get(set).map(String::as_str),
            Some("0000000000000000"),
            "{set} inside: {fields:?}"
        );
    }
    assert_eq!(
        fields.get("NoNewPrivs").map(String::as_str),
        Some("1"),
        "no_new_privs: {fields:?}"
    );
    assert_eq!(
        fields.get("Seccomp").map(String::as_str),
        Some("2"),
        "seccomp filter mode: {fields:?}"
    );
}

/// A set-user-id root program of the host, visible inside through /usr.
fn setuid_program() -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    [
        "/usr/bin/su",
        "/usr/bin/passwd",
        "/usr/bin/chfn",
        "/usr/bin/newgrp",
        "/usr/bin/gpasswd",
    ]
    .into_iter()
    .find(|p| std::fs::metadata(p).is_ok_and(|m| m.mode() & 0o4000 != 0 && m.uid() == 0))
}

/// Attack: gain privilege by executing a set-user-id root program. Layers: no_new_privs (the
/// set-uid bit is ignored) and the empty bounding set (even root regains nothing on exec).
#[test]
fn a_setuid_program_gains_nothing() {
    let Some(program) = setuid_program() else {
        println!(
            "skipped: no set-uid root program under /usr/bin on this machine (su, passwd, chfn, newgrp)"
        );
        return;
    };
    let fx = Fixture::new(Backing::Overlay);
    let me = status_fields(run(&fx.hostile_plan(&["status"])).assert_reported());
    let my_euid = me
        .get("Uid")
        .and_then(|u| u.split_whitespace().nth(1))
        .expect("Uid line")
        .to_string();
    let r = run(&fx.hostile_plan(&["setuid-probe", program]));
    let out = r.assert_reported().trim().to_string();
    let probe = status_fields(&out.replace(' ', "\n").replace('=', ":"));
    assert_eq!(
        probe.get("euid"),
        Some(&my_euid),
        "{program} changed the effective uid: {out}"
    );
    assert_eq!(
        probe.get("capeff").map(String::as_str),
        Some("0000000000000000"),
        "{program}: {out}"
    );
    assert_eq!(
        probe.get("capprm").map(String::as_str),
        Some("0000000000000000"),
        "{program}: {out}"
    );
}

/// Attack: mount a filesystem (old and new mount API). Layer: the seccomp filter (kill).
#[test]
fn mounting_is_killed() {
    for call in ["mount", "fsopen", "open_tree"] {
        hostile(Backing::Overlay, &["syscall", call]).assert_killed_for(call);
    }
    let fx = Fixture::new(Backing::Overlay);
    let r = run(&fx.plan(vec![
        "/usr/bin/mount".into(),
        "-t".into(),
        "tmpfs".into(),
        "none".into(),
        "/tmp".into(),
    ]));
    assert_ne!(
        r.status,
        ExitStatus::Exited(0),
        "mount(8) succeeded inside: {r:?}"
    );
}

/// Attack: make nested namespaces (a new user namespace would bring a fresh set of capabilities).
/// Layer: the seccomp filter, refusing namespace flags by argument (EPERM), clone3 as a whole
/// (ENOSYS); unshare(1) from util-linux as a real program.
#[test]
fn nested_namespaces_are_refused() {
    for (call, errno) in [
        ("unshare-user", "EPERM"),
        ("unshare-mount", "EPERM"),
        ("unshare-net", "EPERM"),
        ("unshare-pid", "EPERM"),
        ("clone-newuser", "EPERM"),
        ("clone-newns", "EPERM"),
        ("clone-newnet", "EPERM"),
        ("clone3-newuser", "ENOSYS"),
    ] {
        hostile(Backing::Overlay, &["syscall", call])
            .assert_refused(errno, &format!("seccomp: {call}"));
    }
    // Control: unshare without namespace flags stays allowed, so the refusal above is by argument.
    let control = hostile(Backing::Overlay, &["syscall", "unshare-files"]);
    assert!(
        control.stdout.starts_with("succeeded"),
        "unshare(CLONE_FILES) must stay allowed: {control:?}"
    );
    if std::path::Path::new("/usr/bin/unshare").exists() {
        let fx = Fixture::new(Backing::Overlay);
        let r = run(&fx.plan(vec![
            "/usr/bin/unshare".into(),
            "-U".into(),
            "/bin/true".into(),
        ]));
        assert_ne!(
            r.status,
            ExitStatus::Exited(0),
            "unshare -U succeeded inside: {r:?}"
        );
    }
}

/// Attack: use a descriptor the host process left open without close-on-exec. Layer: every
/// descriptor but 0, 1 and 2 is closed before exec.
#[test]
fn an_inherited_descriptor_is_closed() {
    let fx = Fixture::new(Backing::Overlay);
    // Opened without O_CLOEXEC on purpose: exec alone would pass it on.
    let fd: OwnedFd = nix::fcntl::open(
        &fx.secret,
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    )
    .expect("open the secret without O_CLOEXEC");
    let n = fd.as_raw_fd().to_string();
    let r = run(&fx.hostile_plan(&["read-fd", &n]));
    let listing = run(&fx.hostile_plan(&["fds"]));
    drop(fd);
    assert!(
        !r.stdout.contains(SECRET),
        "the inherited descriptor leaked the secret: {r:?}"
    );
    r.assert_refused("EBADF", "descriptors closed before exec");
    let out = listing.assert_reported();
    let open: Vec<&str> = out.lines().filter_map(|l| l.split(" -> ").next()).collect();
    // 0, 1, 2 and the directory descriptor the listing itself uses.
    assert!(
        open.len() <= 4 && open.iter().all(|f| ["0", "1", "2", "3"].contains(f)),
        "open inside:\n{out}"
    );
    assert!(
        !out.contains("secret"),
        "the secret file is open inside:\n{out}"
    );
}

fn outlives_the_call(act: &str) {
    let fx = Fixture::new(Backing::BindCopy);
    let marker = fx.project.join("daemon-marker");
    let token = token("daemon");
    let started = Instant::now();
    let r = run(&fx.hostile_plan(&[act, &marker.to_string_lossy(), "1500", &token]));
    assert!(
        r.stdout.contains("daemon started"),
        "the daemon did not start: {r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the call waited for its daemon"
    );
    let survivors = host_processes_with(&token);
    std::thread::sleep(Duration::from_millis(2500));
    let landed = fx.landed("daemon-marker");
    assert!(
        survivors.is_empty(),
        "processes of the call survive it on the host: {survivors:?}"
    );
    assert!(
        !landed.exists(),
        "a process of the call wrote {} after the call ended",
        landed.display()
    );
}

/// Attack: leave a double-forked, setsid'd daemon behind that writes a marker later. Layer:
/// lifetime (the pid namespace dies with the call; the tree is killed).
#[test]
fn a_daemon_does_not_outlive_the_call() {
    outlives_the_call("daemonize");
}

/// As above, with the daemon holding the call's stdout and stderr open, so reading the output to
/// its end does not end the call.
#[test]
fn a_daemon_holding_stdout_does_not_outlive_the_call() {
    outlives_the_call("daemonize-keep-stdio");
}

/// Attack: leave a process behind that appends to a file without pause, so that any moment it
/// outlives the call shows as growth after the call returned. Layer: lifetime (the init kills and
/// reaps every other process of the namespace before it reports the command's status, which is
/// what ends the host's wait).
#[test]
fn nothing_of_the_call_runs_after_the_call_returns() {
    let fx = Fixture::new(Backing::BindCopy);
    let plan = fx.plan(vec![
        "/bin/sh".into(),
        "-c".into(),
        "for i in 1 2 3 4 5 6 7 8; do (while :; do echo tick >> ticks; done) </dev/null >/dev/null 2>&1 & done; sleep 0.3; exit 0".into(),
    ]);
    let r = run(&plan);
    assert_eq!(r.status, ExitStatus::Exited(0), "{r:?}");
    let ticks = fx.landed("ticks");
    let at_return = std::fs::metadata(&ticks).expect("the writer ran").len();
    std::thread::sleep(Duration::from_millis(300));
    let later = std::fs::metadata(&ticks).expect("the file stays").len();
    assert_eq!(
        later,
        at_return,
        "a process of the call wrote {} after the call returned",
        ticks.display()
    );
}

/// Attack: attach a System V shared memory segment the host made. Layer: the IPC namespace (the
/// key does not exist inside: ENOENT).
#[test]
fn a_host_shared_memory_segment_is_invisible() {
    let key = 0x4348_0000 | i32::try_from(std::process::id() & 0xffff).unwrap_or(0);
    // SAFETY: creating a 4 KiB segment under our own key; removed below.
    let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o600) };
    assert!(
        id >= 0,
        "shmget on the host: {}",
        std::io::Error::last_os_error()
    );
    let r = hostile(Backing::Overlay, &["shm-get", &key.to_string()]);
    // SAFETY: removing the segment made above.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    r.assert_refused("ENOENT", "IPC namespace");
}

/// Attack: leave a file with file capabilities (CAP_SETUID) in the workspace. Inside a user
/// namespace whose root is the host's root, such a file would carry real capabilities on the host.
/// Layer: the capability drop (setting `security.capability` needs CAP_SETFCAP): EPERM.
#[test]
fn no_file_capability_can_be_set() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        let path = fx.project.join("capped").to_string_lossy().into_owned();
        let r = run(&fx.hostile_plan(&["setcap", &path]));
        r.assert_refused("EPERM", "capabilities dropped (CAP_SETFCAP)");
        let landed = fx.landed("capped");
        let mut buf = [0u8; 64];
        let (p, name) = (
            std::ffi::CString::new(landed.to_string_lossy().as_bytes()).unwrap(),
            std::ffi::CString::new("security.capability").unwrap(),
        );
        // SAFETY: NUL-terminated path and name, a 64-byte buffer as passed.
        let n = unsafe {
            libc::getxattr(
                p.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        assert!(
            n < 0,
            "{} carries file capabilities on the host ({backing:?})",
            landed.display()
        );
    }
}
