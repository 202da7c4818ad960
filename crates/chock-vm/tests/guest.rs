//! The microVM guest for real: QEMU's microvm machine under TCG or KVM, Debian's cloud kernel,
//! the guest's init built for musl. Each test boots guests of its own.
//!
//! Needs (`.ci/run` installs and builds them; built without the `microvm` feature the tests are
//! ignored): qemu-system-x86 with its virtiofsd, the kernel (fetched into the target directory
//! on first use), `chock-guest` built for x86_64-unknown-linux-musl, and `chock-hostile` built.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_sandbox::{
    CallHandle, Confiner, ExitStatus, Outcome, Plan, SandboxError, StdioMode, WorkspaceMount,
};
use chock_test_support::installed;
use chock_test_support::microvm::{QEMU, guest_init, target_dir};
use chock_vm::{GuestConfig, GuestConfiner};
use support::kernel_dir;

/// A project directory under the home (the sandbox gives a call its own /tmp), removed on drop.
struct Project(PathBuf);

impl Project {
    fn new() -> Project {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        let dir = tempfile::Builder::new()
            .prefix(".chock-vm-test-")
            .tempdir_in(home)
            .unwrap()
            .keep();
        Project(dir)
    }

    fn plan(&self, argv: &[&str]) -> Plan {
        Plan::builder(
            argv.iter().map(|s| s.to_string()).collect(),
            WorkspaceMount::Bind {
                source: self.0.clone(),
            },
            self.0.clone(),
        )
        .timeout(Some(Duration::from_secs(120)))
        .build()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        // overlayfs leaves its work directory's own `work` at mode 000: opened up first, or an
        // unprivileged user could not remove it.
        fn open_up(dir: &Path) {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&e.path());
                }
            }
        }
        open_up(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `plan` in `c` to its end: what it printed on stdout and stderr, and how it ended.
async fn run(c: &GuestConfiner, plan: Plan) -> Result<(String, String, Outcome), SandboxError> {
    let call = c.prepare(plan).await?;
    let mut h = c.start(call, StdioMode::Piped, None).await?;
    let (out, err) = pump(h.as_mut());
    let outcome = h.wait().await?;
    Ok((out.join().unwrap(), err.join().unwrap(), outcome))
}

type Reader = std::thread::JoinHandle<String>;

fn pump(h: &mut dyn CallHandle) -> (Reader, Reader) {
    let read = |f: Option<std::fs::File>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut f) = f {
                let _ = f.read_to_string(&mut s);
            }
            s
        })
    };
    (read(h.take_stdout()), read(h.take_stderr()))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_call_runs_under_the_guest_kernel_and_the_next_in_the_same_warm_guest() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    rt().block_on(async {
        let (out, err, outcome) = run(&c, p.plan(&["uname", "-r"])).await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0), "stderr: {err}");
        let host = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        assert_eq!(out.trim(), c.kernel_release());
        assert_ne!(out.trim(), host, "the call ran under the host's kernel");
        let first = c.monitors();
        assert_eq!(first.len(), 1, "one guest: {first:?}");
        // The next call runs in the same guest, kept warm, and writes into the shared workspace.
        let (_, err, outcome) = run(&c, p.plan(&["sh", "-c", "echo from-guest > out.txt"]))
            .await
            .unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0), "stderr: {err}");
        assert_eq!(c.monitors(), first, "the warm guest was not reused");
        assert_eq!(
            std::fs::read_to_string(p.0.join("out.txt")).unwrap(),
            "from-guest\n"
        );
    });
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn the_guest_has_no_network_device() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    rt().block_on(async {
        let (_, err, outcome) = run(&c, p.plan(&["true"])).await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0), "stderr: {err}");
    });
    let hello = c.last_hello().expect("the guest said hello");
    assert_eq!(hello.interfaces, vec!["lo".to_string()]);
    // virtio ids: 1 is a network card; the guest has the console (3) and virtiofs (26) only.
    assert!(
        !hello.virtio_devices.contains(&1),
        "{:?}",
        hello.virtio_devices
    );
    assert!(
        hello.virtio_devices.contains(&26),
        "{:?}",
        hello.virtio_devices
    );
}

/// chock-hostile (built beside this test) copied into the project.
fn hostile_in(p: &Project) -> Option<String> {
    let built = target_dir().join("debug/chock-hostile");
    if !installed(&built) {
        return None;
    }
    let to = p.0.join("chock-hostile");
    std::fs::copy(&built, &to).unwrap();
    Some(to.to_string_lossy().into_owned())
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn the_escape_suites_key_attacks_are_stopped_inside_the_guest() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    let Some(hostile) = hostile_in(&p) else {
        return;
    };
    rt().block_on(async {
        // Every layer is on in the guest: no capabilities, no_new_privs, a seccomp filter.
        let (out, err, _) = run(&c, p.plan(&[&hostile, "status"])).await.unwrap();
        assert!(out.contains("NoNewPrivs:\t1"), "{out}\n{err}");
        assert!(out.contains("Seccomp:\t2"), "{out}\n{err}");
        // The filter's kill list holds in the guest as on the host, naming the call.
        for act in ["mount", "keyctl", "ptrace", "bpf", "init_module", "setns"] {
            let (out, err, outcome) = run(&c, p.plan(&[&hostile, "syscall", act])).await.unwrap();
            assert_eq!(
                outcome.status,
                ExitStatus::Signaled(libc::SIGKILL),
                "{act} was not killed: {out} {err}"
            );
            assert_eq!(outcome.forbidden_call.as_deref(), Some(act), "{act}");
        }
        // A new user namespace is refused by argument.
        let (out, _, outcome) = run(&c, p.plan(&[&hostile, "syscall", "unshare-user"]))
            .await
            .unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0), "{out}");
        assert_eq!(out.trim(), "refused EPERM");
        // Nothing outside the workspace is writable, and the guest's init is not visible.
        let (_, _, outcome) = run(&c, p.plan(&["sh", "-c", "echo x > /usr/escaped"]))
            .await
            .unwrap();
        assert_ne!(outcome.status, ExitStatus::Exited(0));
        assert!(!Path::new("/usr/escaped").exists());
        // The call sees its own processes only: the guest's init and its threads are not there.
        let (out, _, _) = run(&c, p.plan(&["sh", "-c", "ls /proc | grep -c '^[0-9]'"]))
            .await
            .unwrap();
        let seen: u32 = out.trim().parse().unwrap();
        assert!(seen <= 4, "the call sees {seen} processes");
    });
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_guest_killed_mid_call_fails_the_call_and_the_next_call_boots_a_new_one() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    rt().block_on(async {
        let call = c.prepare(p.plan(&["sleep", "60"])).await.unwrap();
        let mut h = c.start(call, StdioMode::Piped, None).await.unwrap();
        let (out, err) = pump(h.as_mut());
        let monitors = c.monitors();
        assert_eq!(monitors.len(), 1);
        let pid = rustix::process::Pid::from_raw(monitors[0] as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
        let started = Instant::now();
        let ended = h.wait().await;
        assert!(ended.is_err(), "the call survived its guest: {ended:?}");
        assert!(started.elapsed() < Duration::from_secs(20));
        let _ = (out.join(), err.join());
        let (out, _, outcome) = run(&c, p.plan(&["echo", "again"])).await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0));
        assert_eq!(out, "again\n");
        let now = c.monitors();
        assert_eq!(now.len(), 1);
        assert_ne!(now, monitors, "the dead guest was reused");
    });
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_killed_call_ends_and_its_guest_stays_warm() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    rt().block_on(async {
        let call = c.prepare(p.plan(&["sleep", "60"])).await.unwrap();
        let mut h = c.start(call, StdioMode::Piped, None).await.unwrap();
        let (out, err) = pump(h.as_mut());
        let monitors = c.monitors();
        assert!(h.killer().unwrap().kill());
        let outcome = h.wait().await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Signaled(libc::SIGKILL));
        let _ = (out.join(), err.join());
        let (_, _, outcome) = run(&c, p.plan(&["true"])).await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0));
        assert_eq!(c.monitors(), monitors);
    });
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn the_monitor_runs_confined() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    c.warm_up(&p.plan(&["true"])).unwrap();
    let pid = c.monitors()[0];
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status.contains("Seccomp:\t2"),
        "QEMU runs without its filter:\n{status}"
    );
    // no_new_privs, which its Landlock ruleset (`chock-confine`, applied before its exec) sets;
    // that ruleset itself is seen refusing in `confine/tests.rs`, around a probe in QEMU's place.
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // The file server of this project's workspace: its own user and mount namespaces,
    // no_new_privs, virtiofsd's own filter.
    let project = format!("source={}", p.0.display());
    let servers: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|q| {
            let cmd = std::fs::read(format!("/proc/{q}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            cmd.split('\0')
                .next()
                .is_some_and(|a| a.ends_with("/virtiofsd"))
                && cmd.split('\0').any(|a| a == project)
        })
        .collect();
    assert_eq!(servers.len(), 1, "{servers:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", servers[0])).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    for ns in ["user", "mnt"] {
        let theirs = std::fs::read_link(format!("/proc/{}/ns/{ns}", servers[0])).unwrap();
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(
            theirs, ours,
            "a file server shares the host's {ns} namespace"
        );
    }
    for ns in ["net", "user", "ipc", "uts"] {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(theirs, ours, "QEMU shares the host's {ns} namespace");
    }
    // Its root is its own: /usr, /dev's few nodes, the kernel and the machine's sockets, and
    // nothing of the project, the workspace or the home.
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut seen: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    seen.sort();
    for name in &seen {
        assert!(
            [
                "bin", "boot", "dev", "etc", "lib", "lib64", "sbin", "tmp", "usr", "vm"
            ]
            .contains(&name.as_str()),
            "the monitor sees /{name}: {seen:?}"
        );
    }
    assert!(!root.join(p.0.strip_prefix("/").unwrap()).exists());
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let home = std::env::var("HOME").unwrap_or_default();
    assert!(!mounts.contains(&format!(" {home} ")), "{mounts}");
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_guest_that_cannot_start_fails_the_call() {
    if !installed(QEMU) || !installed(guest_init()) {
        return;
    }
    let Some(kernel_dir) = kernel_dir(false) else {
        return;
    };
    // An init that is not a program: the guest's kernel finds nothing to run.
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("not-an-init");
    std::fs::write(&bad, b"not a program").unwrap();
    let c = GuestConfiner::new(&GuestConfig {
        kernel_dir: kernel_dir.clone(),
        guest_init: bad,
        memory_mib: 256,
        snapshots: false,
    })
    .unwrap();
    let p = Project::new();
    rt().block_on(async {
        let err = run(&c, p.plan(&["true"])).await.unwrap_err();
        assert!(
            matches!(&err, SandboxError::Host { what, .. } if what.contains("microVM")),
            "{err}"
        );
    });
    assert!(c.monitors().is_empty());
    assert_eq!(processes_naming(&p.0), Vec::<String>::new());
    // A kernel QEMU cannot load: the monitor exits before the guest's channel is connected, and
    // the file servers started for it are gone too.
    let bad_kernel = d.path().join("kernel");
    std::fs::create_dir_all(bad_kernel.join("modules")).unwrap();
    let good = kernel_dir;
    std::fs::copy(good.join("release"), bad_kernel.join("release")).unwrap();
    for m in std::fs::read_dir(good.join("modules")).unwrap() {
        let m = m.unwrap();
        std::fs::copy(m.path(), bad_kernel.join("modules").join(m.file_name())).unwrap();
    }
    std::fs::write(bad_kernel.join("vmlinux"), b"not a kernel").unwrap();
    let c = GuestConfiner::new(&GuestConfig {
        kernel_dir: bad_kernel,
        guest_init: guest_init(),
        memory_mib: 256,
        snapshots: false,
    })
    .unwrap();
    rt().block_on(async {
        assert!(run(&c, p.plan(&["true"])).await.is_err());
    });
    assert_eq!(processes_naming(&p.0), Vec::<String>::new());
}

/// The command lines of the processes that name `path` (a guest's file servers do).
fn processes_naming(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle))
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn an_overlay_workspace_takes_the_calls_writes_in_its_upper_layer() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    let (lower, upper, work) = (p.0.join("lower"), p.0.join("s/upper"), p.0.join("s/work"));
    for d in [&lower, &upper, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(lower.join("old.txt"), "old\n").unwrap();
    let plan = |argv: &[&str]| {
        Plan::builder(
            argv.iter().map(|s| s.to_string()).collect(),
            WorkspaceMount::Overlay {
                lower: lower.clone(),
                upper: upper.clone(),
                work: work.clone(),
            },
            lower.clone(),
        )
        .build()
    };
    rt().block_on(async {
        let script = "cat old.txt && echo new > new.txt && rm old.txt";
        let (out, err, outcome) = run(&c, plan(&["sh", "-c", script])).await.unwrap();
        assert_eq!(outcome.status, ExitStatus::Exited(0), "{out}\n{err}");
        assert_eq!(out, "old\n");
    });
    assert_eq!(
        std::fs::read_to_string(upper.join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(
        lower.join("old.txt").exists(),
        "the lower layer was written"
    );
    // The removal is overlayfs' whiteout in the upper layer, as the host's review reads it.
    use std::os::unix::fs::FileTypeExt;
    let whiteout = std::fs::symlink_metadata(upper.join("old.txt")).unwrap();
    assert!(whiteout.file_type().is_char_device(), "{whiteout:?}");
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_gated_call_runs_only_once_its_key_is_opened() {
    let Some(c) = support::confiner(false) else {
        return;
    };
    let p = Project::new();
    rt().block_on(async {
        // A key dropped unopened (a refused decision): the start fails and nothing ran.
        let (gate, key) = chock_sandbox::gate().unwrap();
        let call = c
            .prepare(p.plan(&["sh", "-c", "echo ran > refused.txt"]))
            .await
            .unwrap();
        let starting = c.start(call, StdioMode::Piped, Some(gate));
        drop(key);
        assert!(starting.await.is_err(), "a call started without its key");
        // An opened key lets the next call run, in the same warm guest.
        let (gate, key) = chock_sandbox::gate().unwrap();
        let call = c
            .prepare(p.plan(&["sh", "-c", "echo ran > allowed.txt"]))
            .await
            .unwrap();
        key.open();
        let mut h = c.start(call, StdioMode::Piped, Some(gate)).await.unwrap();
        let (out, err) = pump(h.as_mut());
        assert_eq!(h.wait().await.unwrap().status, ExitStatus::Exited(0));
        let _ = (out.join(), err.join());
    });
    assert!(!p.0.join("refused.txt").exists(), "the refused call ran");
    assert!(p.0.join("allowed.txt").exists());
}
