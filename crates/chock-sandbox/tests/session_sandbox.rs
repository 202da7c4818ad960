//! A session's calls forked from its session init (`session_sandbox.rs`): each call sees nothing
//! the call before it left (no process, no /tmp file, no System V object, no mount), a socket bound
//! under a declared path after the session sandbox was built is unreachable, and a session init
//! that died is replaced, never bypassed.
//!
//! The calls run through [`chock_sandbox::spawn_in_session`] with a bound workspace (the backing a
//! session sandbox holds in its tree) and with a shared overlay (which each call attaches itself).

mod escape_support;

use std::os::unix::net::UnixListener;
use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, SharedOverlay, SocketIndex, StdioMode};
use escape_support::{Backing, Fixture, Run};

fn run_in(
    plan: &Plan,
    index: &SocketIndex,
    overlay: Option<&SharedOverlay>,
) -> Result<Run, chock_sandbox::SandboxError> {
    use std::io::Read;
    let mut child = chock_sandbox::spawn_in_session(plan, StdioMode::Piped, overlay, index)?;
    let read = |f: Option<std::fs::File>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut f) = f {
                let _ = f.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let (out, err) = (read(child.take_stdout()), read(child.take_stderr()));
    let outcome = child.wait()?;
    Ok(Run {
        status: outcome.status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        forbidden_call: outcome.forbidden_call.clone(),
        filter_note: outcome.filter_note(),
    })
}

/// A session's first call: built the per-call way (no session init yet), so that a session of one
/// call pays nothing for a sandbox it would not reuse; the next call with the same key builds one.
fn warm_up(plan: &Plan, index: &SocketIndex, overlay: Option<&SharedOverlay>) {
    let mut plan = plan.clone();
    plan.argv = vec!["/bin/true".into()];
    let run = run_in(&plan, index, overlay).unwrap();
    assert_eq!(run.status, ExitStatus::Exited(0), "{run:?}");
    assert_eq!(
        index.session_init_pid(),
        None,
        "the first call builds no session init"
    );
}

fn sh(fx: &Fixture, script: &str, shared: bool) -> Plan {
    let mut plan = fx.plan(vec!["/bin/sh".into(), "-c".into(), script.into()]);
    plan.shared_overlay = shared;
    plan.timeout = Some(Duration::from_secs(30));
    plan
}

/// What the second call of a session sees of the first: the first leaves a background process
/// (`setsid`, double-forked), a file in /tmp, in /dev/shm and in the home, and a System V shared
/// memory segment; the second lists its processes, those places, its System V segments and its
/// mounts. Layers: the call's own pid namespace (killed with its init), its own tmpfs mounts
/// (`fresh.rs`), its own ipc namespace, its own copy of the session's mount namespace.
#[test]
fn the_second_call_of_a_session_sees_nothing_the_first_left() {
    for (backing, shared) in [(Backing::BindCopy, false), (Backing::Overlay, true)] {
        let fx = Fixture::new(backing);
        let overlay = shared.then(|| SharedOverlay::new(&fx.mount()).unwrap());
        let index = SocketIndex::new();
        warm_up(&sh(&fx, "true", shared), &index, overlay.as_ref());
        let token = escape_support::token("left-behind");
        let leave = format!(
            "setsid sh -c 'sleep 300; : {token}' </dev/null >/dev/null 2>&1 & \
             echo left > /tmp/left; echo left > /dev/shm/left; echo left > \"$HOME/left\"; \
             ipcmk -M 4096 >/dev/null; ipcs -m | grep -c '^0x' ; echo made"
        );
        let first = run_in(&sh(&fx, &leave, shared), &index, overlay.as_ref()).unwrap();
        assert_eq!(first.status, ExitStatus::Exited(0), "{first:?}");
        assert!(first.stdout.contains("made"), "{first:?}");
        // The call's pid namespace died with its init, the session init's lives on.
        assert!(
            escape_support::host_processes_with(&token).is_empty(),
            "the first call's background process outlived it"
        );
        let first_init = index.session_init_pid().expect("a session init runs");
        let look = "ls /proc | grep -c '^[0-9]'; ls -A /tmp /dev/shm \"$HOME\"; \
                    echo shm $(ipcs -m | grep -c '^0x'); echo mounts $(wc -l < /proc/self/mountinfo)";
        let second = run_in(&sh(&fx, look, shared), &index, overlay.as_ref()).unwrap();
        assert_eq!(second.status, ExitStatus::Exited(0), "{second:?}");
        assert_eq!(
            index.session_init_pid(),
            Some(first_init),
            "the second call ran in the same session sandbox"
        );
        assert!(
            !second.stdout.contains("left"),
            "a file survived: {second:?}"
        );
        assert!(
            second.stdout.contains("shm 0"),
            "a segment survived: {second:?}"
        );
        // sh, ls and grep of the first pipeline at most: pid 1 (the init) and the shell's children.
        let procs: u32 = second
            .stdout
            .lines()
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            procs <= 4,
            "a process of the first call survived: {second:?}"
        );
        let third = run_in(&sh(&fx, look, shared), &index, overlay.as_ref()).unwrap();
        let mounts = |r: &Run| {
            r.stdout
                .lines()
                .find(|l| l.starts_with("mounts"))
                .map(str::to_string)
        };
        assert_eq!(mounts(&second), mounts(&third), "the mount table grew");
    }
}

/// Attack: a host daemon binds a socket under a declared read path after the session sandbox was
/// built (its tree holds the masks of the sockets that existed then). Layer: the session key
/// compares the tree the call would build (the index's current sockets) with the sandbox's, and
/// a call with a new socket gets a new session sandbox with the mask: `connect` answers
/// ECONNREFUSED. Without the comparison the call runs in the old tree and reaches the listener.
#[test]
fn a_socket_bound_after_the_session_sandbox_was_built_is_unreachable() {
    let fx = Fixture::new(Backing::BindCopy);
    let shared = fx.base.join("toolchain");
    std::fs::create_dir_all(&shared).unwrap();
    let index = SocketIndex::new();
    let socket = shared.join("daemon.sock");
    let plan = || {
        let mut plan = fx.hostile_plan(&["connect-unix", &socket.to_string_lossy()]);
        plan.extra_read = vec![shared.clone()];
        plan
    };
    warm_up(&plan(), &index, None);
    run_in(&plan(), &index, None)
        .unwrap()
        .assert_refused("ENOENT", "nothing is there yet");
    assert!(
        index.session_init_pid().is_some(),
        "the sandbox is built before the socket"
    );
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = run_in(&plan(), &index, None).unwrap();
    assert!(
        listener.accept().is_err(),
        "the host listener was reached: {r:?}"
    );
    r.assert_refused("ECONNREFUSED", "the mask of a socket bound since");
}

/// What the host changes under a declared read directory between two calls of a session shows in
/// the second: a file made where the first call found nothing, and a file replaced by a rename.
/// Layer: each call's own read overlay, made fresh from the tree's layers (`read_overlay.rs`,
/// `fresh.rs`): an overlay keeps what it looked up (a missing name stays missing, a replaced file
/// stays the old one), so calls sharing the tree's overlay would see the first call's view.
#[test]
fn what_the_host_changes_under_a_read_path_shows_in_the_next_call() {
    let fx = Fixture::new(Backing::BindCopy);
    let shared = fx.base.join("toolchain");
    std::fs::create_dir_all(shared.join("lib")).unwrap();
    std::fs::write(shared.join("lib").join("version"), "1\n").unwrap();
    let index = SocketIndex::new();
    let lib = shared.join("lib");
    let script = format!(
        "cat {0}/version; cat {0}/added 2>/dev/null || echo missing",
        lib.display()
    );
    let plan = || {
        let mut plan = sh(&fx, &script, false);
        plan.extra_read = vec![shared.clone()];
        plan
    };
    warm_up(&plan(), &index, None);
    let first = run_in(&plan(), &index, None).unwrap();
    assert_eq!(first.stdout, "1\nmissing\n", "{first:?}");
    assert!(
        index.session_init_pid().is_some(),
        "the calls run in a session sandbox"
    );
    std::fs::write(lib.join("added"), "new\n").unwrap();
    std::fs::write(lib.join("version.tmp"), "2\n").unwrap();
    std::fs::rename(lib.join("version.tmp"), lib.join("version")).unwrap();
    let second = run_in(&plan(), &index, None).unwrap();
    assert_eq!(
        second.stdout, "2\nnew\n",
        "the second call saw the first call's view of the read path: {second:?}"
    );
}

/// Attack: the session init is killed between calls (by the user, the OOM killer). Layer: the
/// host notices before it sends the next call (the init's pidfd) or when sending fails, and builds
/// a new session sandbox; the call is confined as every call is (its host name, its view of the
/// host's files), never run outside it.
#[test]
fn a_killed_session_init_is_replaced_and_the_next_call_is_confined() {
    let fx = Fixture::new(Backing::BindCopy);
    let index = SocketIndex::new();
    let script = format!(
        "hostname; cat {} 2>/dev/null || echo unreadable",
        fx.secret.display()
    );
    warm_up(&sh(&fx, &script, false), &index, None);
    let first = run_in(&sh(&fx, &script, false), &index, None).unwrap();
    assert_eq!(first.stdout, "chock\nunreadable\n", "{first:?}");
    let pid = index.session_init_pid().expect("a session init runs");
    // SAFETY: a signal to a process this test started (through the sandbox).
    let killed = unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL) };
    assert_eq!(killed, 0);
    std::thread::sleep(Duration::from_millis(50));
    let second = run_in(&sh(&fx, &script, false), &index, None).unwrap();
    assert_eq!(second.stdout, "chock\nunreadable\n", "{second:?}");
    let replaced = index.session_init_pid().expect("a new session init runs");
    assert_ne!(replaced, pid, "the dead session init was replaced");
}

/// A call made ready (`ready_in_session`: what the host works out while the session syncs the
/// call's decision) runs nothing until it is started: the command's file is not there while the
/// ready call waits, nor after one is dropped unstarted, whose overlay lease ends with it; the
/// same plan started afterwards runs once, in the session sandbox as any later call.
#[test]
fn a_ready_call_runs_nothing_until_it_is_started() {
    let fx = Fixture::new(Backing::Overlay);
    let index = SocketIndex::new();
    let overlay = SharedOverlay::new(&fx.plan(vec!["/bin/true".into()]).workspace).unwrap();
    let plan = sh(&fx, "echo ran >> ran.txt", true);
    warm_up(&plan, &index, Some(&overlay));
    let ran = fx.landed("ran.txt");
    let unleased = |what: &str| {
        let start = std::time::Instant::now();
        while overlay.leases() != 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    unleased("the first call keeps its lease");
    let dropped = chock_sandbox::ready_in_session(&plan, Some(&overlay), &index).unwrap();
    assert_eq!(
        overlay.leases(),
        1,
        "a ready call holds the overlay instance"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!ran.exists(), "the command ran before its start");
    drop(dropped);
    unleased("a call dropped unstarted keeps its lease");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!ran.exists(), "a call dropped unstarted ran");
    let ready = chock_sandbox::ready_in_session(&plan, Some(&overlay), &index).unwrap();
    assert!(!ran.exists(), "the command ran before its start");
    let mut child = ready.start(StdioMode::Null).unwrap();
    let outcome = child.wait().unwrap();
    assert_eq!(outcome.status, ExitStatus::Exited(0));
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
    assert!(
        index.session_init_pid().is_some(),
        "it ran in the session sandbox"
    );
}
