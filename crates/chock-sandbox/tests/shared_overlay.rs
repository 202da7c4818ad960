//! The session's shared overlay through real processes: calls that run at the same time attach one
//! overlay instance, see each other's writes at once, and read no host path of the session's state
//! in their mount table.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use chock_sandbox::{
    ExitStatus, Plan, SandboxChild, SandboxError, SharedOverlay, StdioMode, WorkspaceMount,
    spawn_shared,
};

/// A project (the lower layer) and a session-like state directory holding upper and work.
struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    state: PathBuf,
    upper: PathBuf,
    work: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("proj");
        let state = base.join("state").join("session-1");
        let (upper, work) = (state.join("upper"), state.join("work"));
        for d in [&project, &upper, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(project.join("hello.txt"), "hello\n").unwrap();
        Fixture {
            _dir: dir,
            project,
            state,
            upper,
            work,
        }
    }

    fn mount(&self) -> WorkspaceMount {
        WorkspaceMount::Overlay {
            lower: self.project.clone(),
            upper: self.upper.clone(),
            work: self.work.clone(),
        }
    }

    fn plan(&self, script: &str) -> Plan {
        Plan::builder(
            vec!["/bin/sh".into(), "-c".into(), script.into()],
            self.mount(),
            self.project.clone(),
        )
        .shared_overlay(true)
        .timeout(Some(Duration::from_secs(30)))
        .build()
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Reads a started call to its end.
fn finish(mut child: SandboxChild) -> Result<Run, SandboxError> {
    let read = |f: Option<std::fs::File>| {
        let mut f = f.unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            s
        })
    };
    let out = read(child.take_stdout());
    let err = read(child.take_stderr());
    let outcome = child.wait()?;
    Ok(Run {
        status: outcome.status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    })
}

fn run(fx: &Fixture, overlay: &SharedOverlay, script: &str) -> Result<Run, SandboxError> {
    finish(spawn_shared(&fx.plan(script), StdioMode::Piped, overlay)?)
}

/// Waits (on the host) until `what` holds, at most 10 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How many "upperdir is in-use" warnings the kernel log holds, when it can be read (as root).
fn in_use_warnings() -> Option<usize> {
    // SAFETY: geteuid never fails.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let out = std::process::Command::new("dmesg").output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("overlayfs: upperdir is in-use"))
            .count(),
    )
}

/// A shell loop that waits up to 5 s for `test` to hold, else prints `never` and fails.
fn sh_wait(test: &str, never: &str) -> String {
    format!(
        "n=0; until {test}; do n=$((n+1)); \
         if [ $n -gt 500 ]; then echo {never}; exit 1; fi; sleep 0.01; done"
    )
}

#[test]
fn fifty_calls_started_in_pairs_share_one_overlay() {
    let fx = Fixture::new();
    let overlay = SharedOverlay::new(&fx.mount()).unwrap();
    let warnings = in_use_warnings();
    for pair in 0..25 {
        let barrier = Barrier::new(2);
        let runs: Vec<Result<Run, SandboxError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let (fx, overlay, barrier) = (&fx, &overlay, &barrier);
                    s.spawn(move || {
                        let (mine, theirs) =
                            (format!("f-{pair}-{i}"), format!("f-{pair}-{}", 1 - i));
                        // Each call writes its own file (whole, by rename) and must see its
                        // partner's, written by a call that started within milliseconds of it.
                        let script = format!(
                            "echo {mine} > {mine}.tmp; mv {mine}.tmp {mine}; {}; cat {theirs}",
                            sh_wait(&format!("[ -e {theirs} ]"), "partner-file-never-seen")
                        );
                        barrier.wait();
                        run(fx, overlay, &script)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, r) in runs.into_iter().enumerate() {
            let r = r.unwrap_or_else(|e| panic!("pair {pair}, call {i}: {e}"));
            assert_eq!(
                (r.status, r.stdout.as_str()),
                (
                    ExitStatus::Exited(0),
                    format!("f-{pair}-{}\n", 1 - i).as_str()
                ),
                "pair {pair}, call {i}: {}",
                r.stderr
            );
        }
    }
    for pair in 0..25 {
        for i in 0..2 {
            let name = format!("f-{pair}-{i}");
            assert_eq!(
                std::fs::read_to_string(fx.upper.join(&name)).unwrap(),
                format!("{name}\n")
            );
        }
    }
    assert!(
        !fx.project.join("f-0-0").exists(),
        "the project is the lower layer"
    );
    // The kernel warns when a second overlay is mounted on an upper directory in use; with one
    // instance it never does. (Another process on the machine mounting overlays on one upper
    // directory twice would add warnings of its own: the message names no path.)
    if let (Some(before), Some(after)) = (warnings, in_use_warnings()) {
        assert_eq!(
            after, before,
            "the kernel warned that the upper directory was in use"
        );
    }
}

#[test]
fn a_background_and_a_foreground_call_see_each_others_writes_and_deletions_at_once() {
    let fx = Fixture::new();
    let overlay = SharedOverlay::new(&fx.mount()).unwrap();
    let background = format!(
        "echo bg-wrote > bg.tmp; mv bg.tmp bg.txt; {}; cat fg.txt; {}; \
         echo bg-saw-deletions; rm fg.txt; sleep 2",
        sh_wait("[ -e fg.txt ]", "bg-never-saw-fg"),
        sh_wait(
            "[ ! -e bg.txt ] && [ ! -e hello.txt ]",
            "bg-never-saw-deletions"
        ),
    );
    let bg = spawn_shared(&fx.plan(&background), StdioMode::Piped, &overlay).unwrap();
    wait_until("the background call's file in the upper directory", || {
        fx.upper.join("bg.txt").exists()
    });
    // No waiting inside the foreground call: what the background call wrote is there at once, and
    // the foreground call's write and deletions (of the background's file and of a project file)
    // are what the background call waits for.
    let fg = run(
        &fx,
        &overlay,
        "cat bg.txt && ls -a && echo fg-wrote > fg.tmp && mv fg.tmp fg.txt && rm bg.txt hello.txt",
    )
    .unwrap();
    assert_eq!(fg.status, ExitStatus::Exited(0), "{}", fg.stderr);
    assert_eq!(fg.stdout, "bg-wrote\n.\n..\nbg.txt\nhello.txt\n");
    wait_until(
        "the background call's deletion in the upper directory",
        || !fx.upper.join("fg.txt").exists(),
    );
    // The background call (still running) deleted the foreground's file: gone here too, at once.
    let after = run(
        &fx,
        &overlay,
        "if [ -e fg.txt ]; then echo fg.txt-still-there; else echo fg.txt-gone; fi",
    )
    .unwrap();
    assert_eq!(after.stdout, "fg.txt-gone\n", "{}", after.stderr);
    let bg = finish(bg).unwrap();
    assert_eq!(
        (bg.status, bg.stdout.as_str()),
        (ExitStatus::Exited(0), "fg-wrote\nbg-saw-deletions\n"),
        "{}",
        bg.stderr
    );
    assert_eq!(
        overlay.instances_made(),
        1,
        "the calls shared one overlay instance"
    );
    assert_eq!(
        std::fs::read_to_string(fx.project.join("hello.txt")).unwrap(),
        "hello\n"
    );
}

#[test]
fn a_call_after_the_others_ended_sees_the_project_as_it_is_now() {
    let fx = Fixture::new();
    let overlay = SharedOverlay::new(&fx.mount()).unwrap();
    let first = run(&fx, &overlay, "cat hello.txt").unwrap();
    assert_eq!(first.stdout, "hello\n");
    // The user replaces the file as an editor does (write a new file, rename it over the old one).
    std::fs::write(fx.project.join("hello.new"), "edited\n").unwrap();
    std::fs::rename(fx.project.join("hello.new"), fx.project.join("hello.txt")).unwrap();
    // Once the first call is reaped the instance is unmounted; the next call gets a fresh one, which
    // shows the project's current file (an instance kept for the session would show the old one).
    wait_until("the first call's lease to end", || overlay.leases() == 0);
    let second = run(&fx, &overlay, "cat hello.txt").unwrap();
    assert_eq!(second.stdout, "edited\n", "{}", second.stderr);
    assert_eq!(overlay.instances_made(), 2);
}

#[test]
fn one_helper_makes_every_instance_and_a_killed_one_is_replaced() {
    let fx = Fixture::new();
    let overlay = SharedOverlay::new(&fx.mount()).unwrap();
    let call = |n: u64| {
        let r = run(&fx, &overlay, "cat hello.txt").unwrap();
        assert_eq!(r.stdout, "hello\n", "{}", r.stderr);
        wait_until("the call's lease to end", || overlay.leases() == 0);
        assert_eq!(overlay.instances_made(), n);
        overlay
            .helper_pid()
            .expect("a helper stays after an instance")
    };
    let first = call(1);
    // The second instance comes from the same process: no fork per instance.
    assert_eq!(call(2), first);
    // A helper that is gone (killed from outside) is noticed at the next request and replaced;
    // the call still gets an instance of its own, made in a new helper's namespaces.
    let pid = libc::pid_t::try_from(first).unwrap();
    // SAFETY: kill a child process of this test.
    let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(killed, 0);
    let third = call(3);
    assert_ne!(third, first);
    // The helper ends with its overlay (its socket closes) and is reaped.
    drop(overlay);
    wait_until("the helper to end", || {
        !std::path::Path::new(&format!("/proc/{third}")).exists()
    });
}

#[test]
fn the_mount_table_names_no_path_of_the_session_state() {
    let fx = Fixture::new();
    let overlay = SharedOverlay::new(&fx.mount()).unwrap();
    let r = run(&fx, &overlay, "cat /proc/self/mountinfo").unwrap();
    assert_eq!(r.status, ExitStatus::Exited(0), "{}", r.stderr);
    let state = fx.state.parent().unwrap().display().to_string();
    for (what, p) in [
        ("state directory", state.as_str()),
        ("upper directory", &fx.upper.display().to_string()),
        ("work directory", &fx.work.display().to_string()),
    ] {
        assert!(!r.stdout.contains(p), "the {what} {p} shows:\n{}", r.stdout);
    }
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains(&format!(" {} ", fx.project.display())))
        .unwrap_or_else(|| panic!("no mount at the project:\n{}", r.stdout));
    assert!(line.contains(" - overlay "), "{line}");
    // The layers are named by the helper's descriptors, not by host paths.
    assert!(
        !line.contains(&format!("lowerdir={}", fx.project.display())),
        "{line}"
    );
    assert!(line.contains("lowerdir=/proc/self/fd/"), "{line}");
}

#[test]
fn an_overlay_that_cannot_be_made_fails_the_call() {
    // Upper and work on two file systems: overlayfs refuses, and the call must fail rather than
    // fall back to anything.
    let fx = Fixture::new();
    let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("skipped: /dev/shm is not writable");
        return;
    };
    let upper = shm.path().join("upper");
    std::fs::create_dir(&upper).unwrap();
    let mount = WorkspaceMount::Overlay {
        lower: fx.project.clone(),
        upper: upper.clone(),
        work: fx.work.clone(),
    };
    let overlay = SharedOverlay::new(&mount).unwrap();
    let mut plan = fx.plan("echo ran > ran.txt");
    plan.workspace = mount;
    match spawn_shared(&plan, StdioMode::Piped, &overlay) {
        Err(SandboxError::Layer { layer, reason, .. }) => {
            assert_eq!(layer, chock_sandbox::Layer::Workspace);
            assert!(
                reason.contains("shared overlay could not be made"),
                "{reason}"
            );
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the call started on an overlay that cannot exist"),
    }
    assert!(!upper.join("ran.txt").exists());
    assert_eq!(overlay.leases(), 0);
}

#[test]
fn a_shared_plan_is_refused_without_its_overlay_and_with_another() {
    let fx = Fixture::new();
    let plan = fx.plan("true");
    let err = chock_sandbox::spawn(&plan, StdioMode::Null).unwrap_err();
    assert!(err.to_string().contains("spawn_shared"), "{err}");
    let other = Fixture::new();
    let theirs = SharedOverlay::new(&other.mount()).unwrap();
    let err = spawn_shared(&plan, StdioMode::Null, &theirs).unwrap_err();
    assert!(
        err.to_string().contains("not those of the shared overlay"),
        "{err}"
    );
    assert_eq!(theirs.instances_made(), 0);
}
