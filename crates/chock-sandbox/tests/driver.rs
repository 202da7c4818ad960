//! The driver through real processes: each layer's basic function.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, SandboxError, StdioMode, WorkspaceMount, spawn};

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().canonicalize().unwrap().join("proj");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("hello.txt"), "hello\n").unwrap();
    (dir, p)
}

fn plan_for(project: &Path, argv: &[&str]) -> Plan {
    Plan::builder(
        argv.iter().map(|s| s.to_string()).collect(),
        WorkspaceMount::Bind {
            source: project.to_path_buf(),
        },
        project.to_path_buf(),
    )
    .timeout(Some(Duration::from_secs(30)))
    .build()
}

fn run(plan: &Plan) -> Result<Run, SandboxError> {
    let mut child = spawn(plan, StdioMode::Piped)?;
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
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    Ok(Run {
        status: outcome.status,
        stdout,
        stderr,
    })
}

fn sh(project: &Path, script: &str) -> Run {
    run(&plan_for(project, &["/bin/sh", "-c", script])).unwrap()
}

#[test]
fn true_runs_and_exit_status_passes_through() {
    let (_d, p) = project();
    assert_eq!(sh(&p, "exit 0").status, ExitStatus::Exited(0));
    let r = sh(&p, "echo out; echo err >&2; exit 7");
    assert_eq!(r.status, ExitStatus::Exited(7));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");
}

#[test]
fn a_signal_is_reported_as_such() {
    let (_d, p) = project();
    assert_eq!(sh(&p, "kill -TERM $$").status, ExitStatus::Signaled(15));
}

#[test]
fn every_namespace_is_new() {
    let (_d, p) = project();
    let names = ["user", "mnt", "pid", "ipc", "uts", "net", "cgroup"];
    let script: String = names
        .iter()
        .map(|n| format!("readlink /proc/self/ns/{n}; "))
        .collect();
    let r = sh(&p, &script);
    assert_eq!(r.status, ExitStatus::Exited(0), "{}", r.stderr);
    let inside: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(inside.len(), names.len());
    for (n, line) in names.iter().zip(inside) {
        let host = std::fs::read_link(format!("/proc/self/ns/{n}")).unwrap();
        assert_ne!(Path::new(line), host, "{n} namespace is the host's");
    }
}

#[test]
fn the_user_maps_to_itself_and_the_host_name_is_chock() {
    let (_d, p) = project();
    // SAFETY: geteuid never fails.
    let uid = unsafe { libc::geteuid() };
    let r = sh(&p, "id -u; cat /proc/self/uid_map; hostname");
    let lines: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], [uid.to_string().as_str()]);
    assert_eq!(
        lines[1],
        [uid.to_string().as_str(), uid.to_string().as_str(), "1"]
    );
    assert_eq!(lines[2], ["chock"]);
}

#[test]
fn the_command_runs_under_a_private_init() {
    let (_d, p) = project();
    let r = sh(&p, "echo $$; ls -d /proc/[0-9]* | wc -l");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0], "2",
        "the command is the first child of the call's init"
    );
    let count: u32 = lines[1].trim().parse().unwrap();
    assert!(
        count <= 5,
        "only the call's own processes are visible, saw {count}"
    );
}

#[test]
fn the_workspace_is_read_write_at_the_project_path_and_the_root_is_not() {
    let (_d, p) = project();
    let r = sh(
        &p,
        "pwd; cat hello.txt; echo made > made.txt; touch /etc/x 2>/dev/null || echo etc-refused; touch /x 2>/dev/null || echo root-refused",
    );
    assert_eq!(
        r.stdout,
        format!("{}\nhello\netc-refused\nroot-refused\n", p.display())
    );
    assert_eq!(
        std::fs::read_to_string(p.join("made.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn an_overlay_workspace_leaves_the_project_untouched() {
    let (d, p) = project();
    let upper = d.path().join("upper");
    let work = d.path().join("work");
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut plan = plan_for(
        &p,
        &[
            "/bin/sh",
            "-c",
            "echo changed > hello.txt; echo new > new.txt; cat hello.txt",
        ],
    );
    plan.workspace = WorkspaceMount::Overlay {
        lower: p.clone(),
        upper: upper.clone(),
        work,
    };
    let r = run(&plan).unwrap();
    assert_eq!(r.stdout, "changed\n");
    assert_eq!(
        std::fs::read_to_string(p.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert!(!p.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(upper.join("new.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn declared_paths_are_bound_read_only_or_read_write() {
    let (d, p) = project();
    let base = d.path().canonicalize().unwrap();
    let (ro, rw, rw_file) = (
        base.join("toolchain"),
        base.join("cache"),
        base.join("history.txt"),
    );
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("tool"), "tool\n").unwrap();
    std::fs::write(&rw_file, "").unwrap();
    let script = format!(
        "cat {ro}/tool; echo x > {ro}/y 2>/dev/null || echo ro-refused; echo cached > {rw}/c; echo line >> {f}",
        ro = ro.display(),
        rw = rw.display(),
        f = rw_file.display()
    );
    let mut plan = plan_for(&p, &["/bin/sh", "-c", &script]);
    plan.extra_read = vec![ro.clone()];
    plan.extra_write = vec![rw.clone(), rw_file.clone()];
    let r = run(&plan).unwrap();
    assert_eq!(r.stdout, "tool\nro-refused\n", "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(rw.join("c")).unwrap(), "cached\n");
    assert_eq!(std::fs::read_to_string(&rw_file).unwrap(), "line\n");
    assert!(!ro.join("y").exists());
}

#[test]
fn tmp_and_home_are_private_size_capped_tmpfs() {
    let (_d, p) = project();
    let mut plan = plan_for(
        &p,
        &[
            "/bin/sh",
            "-c",
            "grep -E ' /tmp | /home/sandboxed ' /proc/self/mounts; echo $HOME; ls -A $HOME | wc -l",
        ],
    );
    plan.home = PathBuf::from("/home/sandboxed");
    plan.env = chock_sandbox::scrub_env(&[], &[], &plan.home);
    plan.limits.tmp_size_bytes = 8 << 20;
    let r = run(&plan).unwrap();
    let mounts: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("tmpfs"))
        .collect();
    assert_eq!(mounts.len(), 2, "{}", r.stdout);
    assert!(
        mounts.iter().all(|m| m.contains("size=8192k")),
        "{mounts:?}"
    );
    assert!(r.stdout.contains("/home/sandboxed\n0\n"), "{}", r.stdout);
}

#[test]
fn rlimits_are_set() {
    let (_d, p) = project();
    let mut plan = plan_for(&p, &["/bin/sh", "-c", "ulimit -c; ulimit -n; ulimit -f"]);
    plan.limits.nofile = 200;
    plan.limits.fsize_bytes = 1 << 20;
    let r = run(&plan).unwrap();
    // `ulimit -f` counts 512-byte blocks in dash.
    assert_eq!(r.stdout, "0\n200\n2048\n");
}

#[test]
fn only_the_scrubbed_environment_reaches_the_command() {
    let (_d, p) = project();
    let host = vec![
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        (
            "ANTHROPIC_API_KEY".to_string(),
            "sk-should-not-pass".to_string(),
        ),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    let plan = Plan::builder(
        vec!["/usr/bin/env".into()],
        WorkspaceMount::Bind { source: p.clone() },
        p.clone(),
    )
    .home(PathBuf::from("/home/h"))
    .build_with_env(&host);
    let r = run(&plan).unwrap();
    let mut got: Vec<&str> = r.stdout.lines().collect();
    got.sort_unstable();
    assert_eq!(got, ["HOME=/home/h", "LANG=C.UTF-8", "PATH=/usr/bin:/bin"]);
}

#[test]
fn a_layer_that_fails_stops_the_call_before_the_command_runs() {
    let (_d, p) = project();
    let mut plan = plan_for(&p, &["/bin/sh", "-c", "echo ran > ran.txt"]);
    plan.cwd = p.join("does-not-exist");
    match run(&plan) {
        Err(SandboxError::Layer { layer, reason, .. }) => {
            assert_eq!(layer, chock_sandbox::Layer::Workspace);
            assert!(reason.contains("working directory"), "{reason}");
        }
        other => panic!("expected a layer error, got {:?}", other.map(|r| r.status)),
    }
    assert!(!p.join("ran.txt").exists());
}

#[test]
fn a_missing_program_is_an_exec_error() {
    let (_d, p) = project();
    match run(&plan_for(&p, &["no-such-program-anywhere"])) {
        Err(SandboxError::Exec { not_found, .. }) => assert!(not_found),
        other => panic!("expected an exec error, got {:?}", other.map(|r| r.status)),
    }
}

#[test]
fn the_timeout_kills_the_whole_tree() {
    let (_d, p) = project();
    let mut plan = plan_for(
        &p,
        &[
            "/bin/sh",
            "-c",
            "(setsid sh -c 'while :; do echo t >> tick; sleep 0.05; done' &); sleep 100",
        ],
    );
    plan.timeout = Some(Duration::from_millis(700));
    let started = std::time::Instant::now();
    let r = run(&plan).unwrap();
    assert_eq!(r.status, ExitStatus::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(10));
    let before = std::fs::metadata(p.join("tick")).unwrap().len();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        std::fs::metadata(p.join("tick")).unwrap().len(),
        before,
        "a process outlived the call"
    );
}

#[test]
fn kill_ends_the_call() {
    let (_d, p) = project();
    let mut child = spawn(&plan_for(&p, &["/bin/sleep", "100"]), StdioMode::Null).unwrap();
    child.kill().unwrap();
    assert_eq!(
        child.wait().unwrap().status,
        ExitStatus::Signaled(libc::SIGKILL)
    );
}

#[test]
fn tcp_is_refused_except_the_proxy_port() {
    let (_d, p) = project();
    if !chock_test_support::installed("/usr/bin/python3") {
        return;
    }
    let script = "import socket,sys\n\
        s=socket.socket(); s.connect(('127.0.0.1', 3128)); s.sendall(b'hello'); s.close()\n\
        try:\n    socket.socket().bind(('127.0.0.1', 8081)); print('bind-allowed')\n\
        except OSError as e: print('bind', e.errno)\n\
        try:\n    socket.socket().connect(('127.0.0.1', 8082)); print('connect-allowed')\n\
        except OSError as e: print('connect', e.errno)\n";
    let mut plan = plan_for(&p, &["/usr/bin/python3", "-c", script]);
    plan.network = chock_sandbox::NetworkPlan::Proxy { port: 3128 };
    let mut child = spawn(&plan, StdioMode::Piped).unwrap();
    let listener = child
        .proxy_listener()
        .expect("the proxy listener comes back to the host");
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello");
    let mut out = String::new();
    child
        .take_stdout()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(child.wait().unwrap().status, ExitStatus::Exited(0));
    // EACCES from Landlock: without it, both would work inside the call's own network namespace.
    assert_eq!(
        out,
        format!("bind {}\nconnect {}\n", libc::EACCES, libc::EACCES)
    );
}

#[test]
fn the_mount_table_lists_every_bind() {
    let (_d, p) = project();
    let plan = plan_for(&p, &["true"]);
    let mounts = chock_sandbox::describe_mounts(&plan).unwrap();
    assert!(mounts.iter().any(|m| m == "ro bind /usr"));
    assert!(
        mounts
            .iter()
            .any(|m| m == &format!("rw bind {}", p.display()))
    );
    assert!(mounts.iter().any(|m| m.starts_with("tmpfs /tmp")));
}

#[test]
fn calls_spawned_from_several_threads_at_once_stay_apart() {
    let (_d, p) = project();
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || {
                sh(
                    &p,
                    &format!(
                        "echo {i} > out-{i}.txt; cat out-{i}.txt; ls /proc | grep -c '^[0-9]'"
                    ),
                )
            })
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        let r = t.join().unwrap();
        assert_eq!(r.status, ExitStatus::Exited(0), "{}", r.stderr);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines[0], i.to_string());
        let visible: u32 = lines[1].parse().unwrap();
        assert!(
            visible <= 5,
            "call {i} saw {visible} processes: another call's?"
        );
    }
}

#[test]
fn dropping_the_child_kills_the_call() {
    let (_d, p) = project();
    let plan = plan_for(
        &p,
        &[
            "/bin/sh",
            "-c",
            "while :; do echo t >> tick; sleep 0.05; done",
        ],
    );
    let child = spawn(&plan, StdioMode::Null).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(child);
    let before = std::fs::metadata(p.join("tick")).unwrap().len();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::metadata(p.join("tick")).unwrap().len(), before);
}

#[test]
fn a_home_at_the_project_or_under_tmp_still_runs() {
    let (_d, p) = project();
    for home in [p.clone(), PathBuf::from("/tmp/h"), PathBuf::from("/tmp")] {
        let mut plan = plan_for(&p, &["/bin/sh", "-c", "cd && pwd && touch ok"]);
        plan.home = home.clone();
        plan.env = chock_sandbox::scrub_env(&[], &[], &home);
        let r = run(&plan).unwrap();
        assert_eq!(
            r.status,
            ExitStatus::Exited(0),
            "home {}: {}",
            home.display(),
            r.stderr
        );
        assert_eq!(r.stdout, format!("{}\n", home.display()));
    }
}

#[test]
fn a_missing_declared_path_is_refused_before_any_process_exists() {
    let (d, p) = project();
    let mut plan = plan_for(&p, &["/bin/true"]);
    let missing = d.path().join("no-such-toolchain");
    plan.extra_read = vec![missing.clone()];
    match spawn(&plan, StdioMode::Null) {
        Err(SandboxError::Plan(msg)) => {
            assert!(msg.contains(&missing.display().to_string()), "{msg}")
        }
        other => panic!("expected a plan error, got {other:?}"),
    }
}
