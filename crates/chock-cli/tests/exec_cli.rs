//! `chock exec` end to end: the real binary, a real project, a real sandbox and a real session log.

mod run_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use run_support::{sessions_under, text};

/// A project and an isolated sessions root (XDG_STATE_HOME) for one test.
struct World {
    _dir: tempfile::TempDir,
    project: PathBuf,
    state: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("project");
        let state = base.join("state");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(project.join("hello.txt"), "hello\n").unwrap();
        World {
            _dir: dir,
            project,
            state,
        }
    }

    fn policy(&self, toml: &str) {
        std::fs::write(self.project.join("chock.toml"), toml).unwrap();
    }

    fn chock(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_chock"))
            .args(args)
            .current_dir(&self.project)
            .env("XDG_STATE_HOME", &self.state)
            .env_remove("CHOCK_ORG_POLICY")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["exec", "--"];
        args.extend_from_slice(command);
        self.chock(&args)
    }

    /// The session directories under the sessions root.
    fn sessions(&self) -> Vec<PathBuf> {
        sessions_under(&self.state.join("chock/sessions"))
    }

    /// (kind, data) of every line of the only session's log.
    fn events(&self) -> Vec<(String, serde_json::Value)> {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "one session per exec");
        let text = std::fs::read_to_string(sessions[0].join("log.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["kind"].as_str().unwrap_or_default().to_string(),
                    v["data"].clone(),
                )
            })
            .collect()
    }

    fn kinds(&self) -> Vec<String> {
        self.events().into_iter().map(|(k, _)| k).collect()
    }
}

#[test]
fn status_and_output_pass_through() {
    let w = World::new();
    let out = w.exec(&["sh", "-c", "cat hello.txt; echo err >&2; exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\n");
    assert!(text(&out.stderr).contains("err\n"));
}

#[test]
fn the_log_records_call_decision_and_result_in_order() {
    let w = World::new();
    let out = w.exec(&["/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        w.kinds(),
        [
            "session.start",
            "tool.call",
            "decision",
            "tool.result",
            "session.end"
        ]
    );
    let events = w.events();
    assert_eq!(events[1].1["action"], "exec.system.true");
    assert_eq!(events[2].1["decision"], "allow");
    assert_eq!(events[3].1["exit_code"], 0);
    assert!(events[3].1["limits"]["nofile"].as_u64().is_some());
}

#[test]
fn writes_land_in_the_workspace_never_the_project_and_keep_keeps_it() {
    let w = World::new();
    let out = w.chock(&[
        "exec",
        "--keep",
        "--",
        "sh",
        "-c",
        "echo changed > hello.txt; echo new > new.txt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(w.project.join("hello.txt")).unwrap(),
        "hello\n"
    );
    assert!(!w.project.join("new.txt").exists());
    let session = &w.sessions()[0];
    assert!(
        session.join("workspace").is_dir(),
        "--keep leaves the workspace"
    );
    let w2 = World::new();
    assert_eq!(
        w2.exec(&["sh", "-c", "echo new > new.txt"]).status.code(),
        Some(0)
    );
    assert!(
        !w2.sessions()[0].join("workspace").exists(),
        "without --keep the workspace goes"
    );
}

#[test]
fn a_denied_program_is_refused_with_123_and_never_runs() {
    let w = World::new();
    w.policy("[[rule]]\naction = \"exec.system.touch\"\ndecision = \"deny\"\n");
    let out = w.exec(&["touch", "made.txt"]);
    assert_eq!(out.status.code(), Some(123), "{}", text(&out.stderr));
    let stderr = text(&out.stderr).replace(&w.project.display().to_string(), "[PROJECT]");
    insta::assert_snapshot!(stderr, @"chock: refused `exec.system.touch`: the policy denies it ([PROJECT]/chock.toml:2 (rule `exec.system.touch`))");
    assert_eq!(
        w.kinds(),
        [
            "session.start",
            "tool.call",
            "decision",
            "tool.result",
            "session.end"
        ]
    );
    assert_eq!(w.events()[2].1["decision"], "deny");
    assert_eq!(w.events()[3].1["ran"], false);
    assert_eq!(w.events()[3].1["refused"], true);
}

#[test]
fn an_ask_with_nobody_to_answer_is_a_refusal() {
    let w = World::new();
    w.policy("[[rule]]\naction = \"exec.system.touch\"\ndecision = \"ask\"\n");
    let out = w.exec(&["touch", "made.txt"]);
    assert_eq!(out.status.code(), Some(123), "{}", text(&out.stderr));
    let stderr = text(&out.stderr).replace(&w.project.display().to_string(), "[PROJECT]");
    insta::assert_snapshot!(stderr, @"chock: refused `exec.system.touch`: nobody answered: a refusal (asked because [PROJECT]/chock.toml:2 (rule `exec.system.touch`) says ask; answered by nobody)");
    assert_eq!(
        w.kinds(),
        [
            "session.start",
            "tool.call",
            "decision",
            "approval.ask",
            "approval.answer",
            "tool.result",
            "session.end"
        ]
    );
    assert_eq!(w.events()[4].1["approved"], false);
    assert_eq!(w.events()[5].1["refused"], true);
}

#[test]
fn a_timeout_exits_124() {
    let w = World::new();
    let out = w.chock(&["exec", "--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("timed out"));
}

#[test]
fn a_program_missing_inside_the_sandbox_exits_127() {
    let w = World::new();
    let out = w.exec(&["/usr/bin/no-such-program-here"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
}

#[test]
fn a_malformed_policy_is_bad_input() {
    let w = World::new();
    w.policy("[[rule]]\naction = \n");
    let out = w.exec(&["/bin/true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("chock.toml"));
}

#[test]
fn verbose_lists_every_bind() {
    let w = World::new();
    w.policy("");
    let out = w.chock(&["exec", "--verbose", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("mount: ro bind /usr"), "{err}");
    assert!(
        err.contains(&format!("mount: overlay {}", w.project.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "mount: ro bind {}",
            w.project.join("chock.toml").display()
        )),
        "{err}"
    );
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

#[test]
fn cargo_test_passes_inside_with_the_hosts_toolchain() {
    let home = home();
    let (rustup, cargo_home) = (home.join(".rustup"), home.join(".cargo"));
    if !cargo_home.join("bin/cargo").exists() || !rustup.is_dir() {
        eprintln!(
            "skipped: no ~/.cargo/bin/cargo and ~/.rustup for this user ({})",
            home.display()
        );
        return;
    }
    let w = World::new();
    let cache = w.project.parent().unwrap().join("cache");
    std::fs::create_dir_all(w.project.join("src")).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(
        w.project.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        w.project.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n}\n",
    )
    .unwrap();
    w.policy(&format!(
        "[sandbox]\nread = [\"~/.rustup\", \"~/.cargo\"]\nwrite = [\"{}\"]\nenv = [\"CARGO_TARGET_DIR\"]\n",
        cache.display()
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_chock"))
        .args(["exec", "--", "cargo", "test", "--offline"])
        .current_dir(&w.project)
        .env("XDG_STATE_HOME", &w.state)
        .env("CARGO_TARGET_DIR", cache.join("target"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", cargo_home.join("bin").display()),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("test tests::adds ... ok"));
    // Writes went to the declared cache and the workspace only: the project holds what it held.
    assert!(cache.join("target/debug").is_dir());
    let mut names: Vec<String> = std::fs::read_dir(&w.project)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["Cargo.toml", "chock.toml", "hello.txt", "src"],
        "Cargo.lock and target stay out of the project"
    );
    assert_eq!(w.events()[1].1["action"], "exec.extra.cargo");
    let _ = Path::new(&rustup);
}

#[test]
fn a_missing_layer_exits_125_naming_it_and_what_to_do() {
    if !Path::new("/usr/bin/unshare").exists() {
        eprintln!("skipped: no /usr/bin/unshare to make a user namespace that allows no more");
        return;
    }
    // A user namespace whose max_user_namespaces is 0: chock inside it cannot make its own.
    let w = World::new();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} exec -- /bin/true",
        env!("CARGO_BIN_EXE_chock")
    );
    let out = Command::new("/usr/bin/unshare")
        .args(["-Ur", "sh", "-c", &script])
        .current_dir(&w.project)
        .env("XDG_STATE_HOME", &w.state)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("`user namespace` could not be applied"),
        "{err}"
    );
    assert!(
        err.contains("hint: user namespaces are disabled: sysctl -w user.max_user_namespaces="),
        "{err}"
    );
    assert_eq!(
        w.kinds(),
        [
            "session.start",
            "tool.call",
            "decision",
            "tool.result",
            "session.end"
        ]
    );
    assert_eq!(w.events()[3].1["ran"], false);
}
