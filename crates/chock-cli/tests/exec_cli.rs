//! `chock exec` end to end: the real binary, a real project, a real sandbox and a real session log.

mod run_support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use run_support::{CHOCK, open_pty, text};

/// The shared hermetic world with a `hello.txt` in its project, seen as exec's tests read it: one
/// session per exec, its events as (kind, data).
struct World(run_support::World);

impl std::ops::Deref for World {
    type Target = run_support::World;
    fn deref(&self) -> &run_support::World {
        &self.0
    }
}

impl World {
    fn new() -> World {
        let w = run_support::World::new();
        w.write("hello.txt", "hello\n");
        World(w)
    }

    fn policy(&self, toml: &str) {
        self.write("chock.toml", toml);
    }

    fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["exec", "--"];
        args.extend_from_slice(command);
        self.chock(&args)
    }

    /// (kind, data) of every line of the only session's log, each exactly its kind's type.
    fn events(&self) -> Vec<(String, serde_json::Value)> {
        self.0
            .events_exact()
            .into_iter()
            .map(|(kind, _, data)| (kind, data))
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

/// Chock ignores SIGPIPE (Rust's default: a pipe to a server that has gone is an error, and a
/// closed stdout ends a command quietly); the command it confines still has every signal's default
/// disposition, so `chock exec -- yes | head -1` ends as `yes | head -1` does. Its stdout is a
/// pipe whose reader goes away, and the kernel's `SigIgn` mask of the confined process is read.
#[test]
fn the_confined_command_keeps_sigpipes_default() {
    let w = World::new();
    let out = w.exec(&["sh", "-c", "grep SigIgn /proc/self/status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mask = text(&out.stdout);
    let mask = mask
        .trim()
        .strip_prefix("SigIgn:")
        .expect("a SigIgn line")
        .trim();
    let mask = u64::from_str_radix(mask, 16).expect("a hex mask");
    let sigpipe = 1u64 << (13 - 1);
    assert_eq!(
        mask & sigpipe,
        0,
        "SIGPIPE is ignored in the sandbox: {mask:#x}"
    );
    // And so a writer whose reader has gone is killed by SIGPIPE, quietly, as outside Chock (an
    // ignored SIGPIPE would have `yes` say "Broken pipe").
    let out = w.exec(&["sh", "-c", "yes | head -c 1 >/dev/null"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("Broken pipe"),
        "{}",
        text(&out.stderr)
    );
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
            "command.result",
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
    // Without --keep the write is read back in the call and goes with it; on a kernel whose
    // tmpfs keeps `user.` xattrs nothing of the workspace was ever on disk (only the lock and
    // the log are), elsewhere its directory is removed at the end.
    let w2 = World::new();
    let out = w2.exec(&["sh", "-c", "echo new > new.txt && cat new.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "new\n");
    assert!(!w2.project.join("new.txt").exists());
    let mut left: Vec<String> = std::fs::read_dir(&w2.sessions()[0])
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["lock", "log.jsonl"],
        "without --keep the workspace goes"
    );
}

/// An overlay's root shows its upper root's mode, and Chock makes the upper: the project root
/// must look inside as it does outside (not the 0700 of a private directory), in memory and kept,
/// and what the command makes still follows the host's umask.
#[test]
fn the_project_root_keeps_its_mode_inside_and_the_command_keeps_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    std::fs::set_permissions(&w.project, std::fs::Permissions::from_mode(0o751)).unwrap();
    let script = "stat -c %a .; umask 022; mkdir made; stat -c %a made";
    for keep in [false, true] {
        let mut args = vec!["exec"];
        if keep {
            args.push("--keep");
        }
        args.extend(["--", "sh", "-c", script]);
        let out = w.chock(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            "751\n755\n",
            "the project root's mode inside (keep: {keep})"
        );
    }
    // Without a umask of its own, the command has the host's (the tree is built under 0).
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let ours = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("a Umask line")
        .trim()
        .to_string();
    let out = w.exec(&["sh", "-c", "umask"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        ours,
        "the command has the host's umask"
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
            "command.result",
            "session.end"
        ]
    );
    assert_eq!(w.events()[2].1["decision"], "deny");
    assert_eq!(w.events()[2].1["allowed"], false);
    assert_eq!(w.events()[3].1["outcome"], "refused");
}

/// `chock exec` finds `chock-git` beside itself: git in its call is the shim, each invocation
/// decided on the host.
#[test]
fn git_in_the_call_is_decided_per_invocation_and_a_deny_row_stops_it() {
    let w = run_support::World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"git.commit\"\ndecision = \"deny\"\n",
    ));
    let out = w.chock(&[
        "exec",
        "--",
        "sh",
        "-c",
        "git status --short; git -c user.name=a -c user.email=b commit -q --allow-empty -m x; \
         echo \"exit $?\"; /usr/bin/git rev-list --count HEAD",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "exit 126\n1\n");
    assert!(
        text(&out.stderr).contains("`git.commit` refused by"),
        "{}",
        text(&out.stderr)
    );
    let decided: Vec<(String, bool)> = w
        .events()
        .into_iter()
        .filter(|(k, _, d)| {
            k == "decision" && d["action"].as_str().is_some_and(|a| a.starts_with("git."))
        })
        .map(|(_, _, d)| {
            (
                d["action"].as_str().unwrap().to_string(),
                d["allowed"] == true,
            )
        })
        .collect();
    assert_eq!(
        decided,
        [
            ("git.status".to_string(), true),
            ("git.commit".to_string(), false),
            ("git.inspect".to_string(), true)
        ]
    );
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
            "approval.ask",
            "approval.answer",
            "decision",
            "command.result",
            "session.end"
        ]
    );
    let events = w.events();
    assert_eq!(events[2].1["question"], "q-1");
    assert_eq!(events[3].1["question"], "q-1");
    assert_eq!(events[3].1["answer"], "none");
    assert_eq!(events[4].1["allowed"], false);
    assert_eq!(events[5].1["outcome"], "refused");
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

/// A write path over the directory Chock's binaries are in (`~/.cargo` over `~/.cargo/bin`) is
/// refused when the policy is read: one call could otherwise replace `chock-full`, which the
/// person's next command runs unconfined. Reading it stays allowed.
#[test]
fn a_write_path_over_chock_s_own_binaries_is_refused() {
    let w = World::new();
    let bin = Path::new(CHOCK).canonicalize().unwrap();
    let install = bin.parent().unwrap().parent().unwrap();
    w.policy(&format!("[sandbox]\nwrite = [\"{}\"]\n", install.display()));
    let out = w.exec(&["/bin/true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("chock.toml:2:")
            && stderr.contains(&format!(
                "overlaps {}, where Chock's own binaries are",
                bin.parent().unwrap().display()
            )),
        "{stderr}"
    );
    w.policy(&format!("[sandbox]\nread = [\"{}\"]\n", install.display()));
    let out = w.exec(&["/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
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

/// A command that is on the host's PATH but in a directory the sandbox does not show (as `cargo` in
/// `~/.cargo/bin`): exec says where it is on the host and the exact `[sandbox]` row that shows it;
/// with that row, the program is found and classified.
#[test]
fn a_command_only_on_the_host_is_located_with_the_row_that_shows_it() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let bin = w.home.join(".toolchain/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("chock-host-only");
    std::fs::write(&program, "#!/bin/sh\necho from the host toolchain\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = w.chock_with_env(&["exec", "--", "chock-host-only"], &[("PATH", &path)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(123), "{err}");
    assert!(err.contains("has no class"), "{err}");
    assert!(
        err.contains(&format!(
            "`chock-host-only` is {} on the host",
            program.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("  [sandbox]\n  read = [\"~/.toolchain/bin\"]"),
        "{err}"
    );
}

/// A process killed by the sandbox's seccomp filter: exec names the forbidden call instead of a
/// bare status (`bpf`, number 321 on x86_64, made through perl's `syscall`).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_call_killed_by_the_filter_is_named() {
    let w = World::new();
    let out = w.exec(&["perl", "-e", "syscall(321, 0, 0, 0); print qq(survived\\n)"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 9), "{err}");
    assert!(!text(&out.stdout).contains("survived"));
    assert!(
        err.contains("seccomp filter killed a process of the call")
            && err.contains("the system call `bpf`"),
        "{err}"
    );
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's Rust toolchain: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn cargo_test_passes_inside_with_the_hosts_toolchain() {
    let home = home();
    let (rustup, cargo_home) = (home.join(".rustup"), home.join(".cargo"));
    if !chock_test_support::requires(
        cargo_home.join("bin/cargo").exists() && rustup.is_dir(),
        format_args!(
            "no ~/.cargo/bin/cargo and ~/.rustup for this user ({})",
            home.display()
        ),
    ) {
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
    // The host's toolchain is found through the real HOME (`~/.rustup`, `~/.cargo`).
    let out = w
        .command(&["exec", "--", "cargo", "test", "--offline"])
        .env("HOME", &home)
        .env("CARGO_TARGET_DIR", cache.join("target"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", cargo_home.join("bin").display()),
        )
        .stdin(Stdio::null())
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
    if !chock_test_support::installed("/usr/bin/unshare") {
        return;
    }
    // A user namespace whose max_user_namespaces is 0: chock inside it cannot make its own.
    let w = World::new();
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} exec -- /bin/true",
        CHOCK
    );
    let out = w
        .program("/usr/bin/unshare")
        .args(["-Ur", "sh", "-c", &script])
        .stdin(Stdio::null())
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
            "command.result",
            "session.end"
        ]
    );
    assert_eq!(w.events()[3].1["outcome"], "failed");
}

/// A loopback HTTP server answering every request with `body`; returns its port.
fn http_server(body: &'static str) -> u16 {
    chock_test_support::model::page_server(None, body)
}

/// How the terminal prompt's approval question ends, waiting for the answer.
const QUESTION_END: &str = "[n] no > ";

/// Runs `chock exec -- curl` to a loopback server under a table that asks about exactly that host and
/// port, on a terminal of its own (`setsid -c` makes the pty its controlling terminal, so `/dev/tty`
/// is the pty), and answers the connection's question with `answer`. Returns the World, the exit
/// code, stdout, and what the terminal showed.
fn curl_asked_on_a_terminal(answer: &str) -> (World, Option<i32>, String, String) {
    use std::io::{Read, Write};
    let port = http_server("asked body");
    let w = World::new();
    w.policy(&format!(
        "[[rule]]\naction = \"exec.system.curl\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"ask\"\n"
    ));
    let (mut master, slave) = open_pty();
    let url = format!("http://127.0.0.1:{port}/");
    let child = w
        .program("setsid")
        .args(["-w", "-c", CHOCK, "exec", "--"])
        .args(["curl", "-sf", "--max-time", "20", &url])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 1];
    while !(seen.contains("let the command ") && seen.ends_with(QUESTION_END)) {
        let n = master.read(&mut buf).unwrap();
        assert!(n > 0, "the question never came: {seen}");
        seen.push(char::from(buf[0]));
    }
    master.write_all(format!("{answer}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (w, out.status.code(), text(&out.stdout), seen)
}

fn curl_is_installed() -> bool {
    chock_test_support::installed("/usr/bin/curl")
        && chock_test_support::installed("/usr/bin/setsid")
}

#[test]
fn at_a_terminal_a_yes_lets_the_commands_asked_connection_through() {
    if !curl_is_installed() {
        return;
    }
    let (w, code, stdout, seen) = curl_asked_on_a_terminal("y");
    assert_eq!(code, Some(0), "{stdout}\n{seen}");
    assert_eq!(stdout, "asked body");
    assert!(
        seen.contains("let the command open a TCP connection to 127.0.0.1:"),
        "{seen}"
    );
    assert!(seen.contains("net.connect.1.0.0.127."), "{seen}");
    assert_answer_precedes_broker(&w.events(), true, "allow");
}

#[test]
fn at_a_terminal_a_no_refuses_the_connection_logged_before_the_broker_acts() {
    if !curl_is_installed() {
        return;
    }
    let (w, code, stdout, seen) = curl_asked_on_a_terminal("n");
    assert_ne!(code, Some(0), "{stdout}\n{seen}");
    assert!(!stdout.contains("asked body"), "{stdout}");
    assert_answer_precedes_broker(&w.events(), false, "refuse");
}

/// The person's answer (approved or not), then the pipeline's decision, are in the log before the
/// broker's `net.decision` acts on it.
fn assert_answer_precedes_broker(
    events: &[(String, serde_json::Value)],
    approved: bool,
    decision: &str,
) {
    let answered = if approved { "allow_once" } else { "deny" };
    let answer = events
        .iter()
        .position(|(k, d)| k == "approval.answer" && d["answer"] == answered)
        .unwrap_or_else(|| panic!("no approval.answer {answered}: {events:?}"));
    let settled = events
        .iter()
        .position(|(k, d)| {
            k == "decision" && d["allowed"] == approved && d["action"] == events[answer].1["action"]
        })
        .unwrap_or_else(|| panic!("no decision after the answer: {events:?}"));
    let decided = events
        .iter()
        .position(|(k, d)| k == "net.decision" && d["decision"] == decision)
        .unwrap_or_else(|| panic!("no net.decision {decision}: {events:?}"));
    assert!(answer < settled && settled < decided, "{events:?}");
}

#[test]
fn without_a_terminal_an_asked_connection_is_refused_and_gets_no_proxy() {
    if !curl_is_installed() {
        return;
    }
    let port = http_server("asked body");
    let w = World::new();
    w.policy(&format!(
        "[[rule]]\naction = \"exec.system.curl\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"ask\"\n"
    ));
    let url = format!("http://127.0.0.1:{port}/");
    let out = w.exec(&["curl", "-sf", "--max-time", "10", &url]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(!text(&out.stdout).contains("asked body"));
    assert!(
        !w.kinds().iter().any(|k| k == "approval.ask"),
        "nobody was asked: {:?}",
        w.kinds()
    );
}

/// A small terminal, enough to read back what a person sees: printable text lands at the cursor;
/// `CR`, `LF`, `ESC 7`/`ESC 8`, `CSI K`, `CSI J` and `CSI r` (which homes the cursor) move or erase;
/// an `OSC`/`DCS`/`APC`/`PM`/`SOS` string swallows everything until `BEL` or `ST`; `CAN`/`SUB`
/// abort a sequence or string in progress. Returns the lines and the cursor's row.
fn render(bytes: &[u8]) -> (Vec<String>, usize) {
    enum State {
        Ground,
        Esc,
        EscCharset,
        Csi(String),
        Str { osc: bool },
        StrEsc { osc: bool },
    }
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut saved = (0usize, 0usize);
    let mut state = State::Ground;
    for c in String::from_utf8_lossy(bytes).chars() {
        state = match state {
            _ if c == '\u{18}' || c == '\u{1a}' => State::Ground,
            State::Ground => match c {
                '\u{1b}' => State::Esc,
                '\r' => {
                    col = 0;
                    State::Ground
                }
                '\n' => {
                    row += 1;
                    State::Ground
                }
                c if c.is_control() => State::Ground,
                c => {
                    while lines.len() <= row {
                        lines.push(Vec::new());
                    }
                    let line = &mut lines[row];
                    while line.len() <= col {
                        line.push(' ');
                    }
                    line[col] = c;
                    col += 1;
                    State::Ground
                }
            },
            State::Esc => match c {
                '[' => State::Csi(String::new()),
                ']' => State::Str { osc: true },
                'P' | '_' | '^' | 'X' => State::Str { osc: false },
                '(' | ')' | '*' | '+' => State::EscCharset,
                '7' => {
                    saved = (row, col);
                    State::Ground
                }
                '8' => {
                    (row, col) = saved;
                    State::Ground
                }
                _ => State::Ground,
            },
            State::EscCharset => State::Ground,
            State::Csi(mut params) => {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    while lines.len() <= row {
                        lines.push(Vec::new());
                    }
                    match (c, params.as_str()) {
                        ('K', "2") => lines[row].clear(),
                        ('K', "" | "0") => lines[row].truncate(col),
                        ('J', "" | "0") => {
                            lines[row].truncate(col);
                            lines.truncate(row + 1);
                        }
                        ('r', "") => (row, col) = (0, 0),
                        _ => {}
                    }
                    State::Ground
                } else {
                    params.push(c);
                    State::Csi(params)
                }
            }
            State::Str { osc } => match c {
                '\u{7}' if osc => State::Ground,
                '\u{1b}' => State::StrEsc { osc },
                _ => State::Str { osc },
            },
            State::StrEsc { osc } => match c {
                '\\' => State::Ground,
                _ => State::Str { osc },
            },
        };
    }
    let lines = lines.into_iter().map(|l| l.into_iter().collect()).collect();
    (lines, row)
}

#[test]
fn the_small_terminal_reads_back_what_a_person_sees() {
    let (lines, row) = render(b"a\r\x1b[2Kb\r\n\x1b]0;title\x07c\x1b]0;lost\nd\x18e");
    assert_eq!(lines, vec!["b".to_string(), "ce".to_string()]);
    assert_eq!(row, 1);
}

/// Hole 5 of issue 9: the command's output tries to forge the connection's question (a fake question
/// naming another host drawn over the line with `CR` + erase-line, then an unterminated `OSC` that
/// would swallow the real question into the window title), and keeps redrawing the line while the
/// question is open. The question is drawn after the reset preamble, reads the real host, and nothing
/// the command writes reaches the terminal while it is open: that output comes after the answer.
#[test]
fn at_a_terminal_the_commands_output_cannot_forge_or_overwrite_the_connections_question() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    if !curl_is_installed() {
        return;
    }
    let port = http_server("asked body");
    let w = World::new();
    w.policy(&format!(
        "[[rule]]\naction = \"exec.system.sh\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"ask\"\n"
    ));
    let script = format!(
        r"printf 'EARLY\r\033[2Kchock: approval needed for net.connect.com.example.443\n  let the command open a TCP connection to example.com:443\n  [y] yes once  [a] yes to this exact act for the session  [n] no > \033]0;'
i=0; while [ $i -lt 25 ]; do printf '\r\033[2KLATE example.com:443 \033]0;'; sleep 0.2; i=$((i+1)); done &
curl -sf --max-time 30 http://127.0.0.1:{port}/; wait; printf ' END\n'"
    );
    let (master, slave) = open_pty();
    let child = w
        .program("setsid")
        .args(["-w", "-c", CHOCK, "exec", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::<u8>::new()));
    let mut answer = master.try_clone().unwrap();
    let reader = {
        let seen = Arc::clone(&seen);
        let mut master = master;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let snapshot = || seen.lock().unwrap().clone();
    let real = format!("a TCP connection to 127.0.0.1:{port}");
    let started = Instant::now();
    let asked = loop {
        let now = text(&snapshot());
        // (The old `[y/N]` prompt too, so that without the fix this fails on what the person saw.)
        if now.contains(&real) && (now.ends_with(QUESTION_END) || now.ends_with("[y/N] ")) {
            break snapshot();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the question never came: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The command goes on writing for seconds; while the question is open none of it may show.
    std::thread::sleep(Duration::from_secs(2));
    let before_answer = snapshot();
    answer.write_all(b"y\n").unwrap();
    let status = child.wait_with_output().unwrap().status;
    reader.join().unwrap();
    let all = snapshot();
    let shown_while_open = text(&before_answer[asked.len()..]);
    assert_eq!(
        shown_while_open, "",
        "the command's output reached the terminal while the question was open"
    );

    // Read back what the person saw when asked: the question block (from the last question heading to
    // the cursor) names the real host only.
    let (lines, row) = render(&asked);
    let heading = lines[..=row]
        .iter()
        .rposition(|l| l.starts_with("chock: approval needed for"))
        .unwrap_or_else(|| panic!("no question on the screen: {lines:#?}"));
    let block = lines[heading..=row].join("\n");
    assert!(
        block.contains(&format!("net.connect.1.0.0.127.{port}")) && block.contains(&real),
        "{block}\n---\n{lines:#?}"
    );
    assert!(!block.contains("example.com"), "{block}");
    // In the bytes: the command's early output, then the reset preamble, then the question.
    let asked_text = text(&asked);
    let early = asked_text
        .find("EARLY")
        .expect("the early output came before");
    let reset = asked_text[early..]
        .find("\u{18}\u{1b}\\")
        .map(|i| i + early);
    let question = asked_text.rfind("chock: approval needed for net.connect.1.0.0.127.");
    assert!(
        matches!((reset, question), (Some(r), Some(q)) if early < r && r < q),
        "{asked_text:?}"
    );
    // What the command wrote while asked comes after the answer, then the body and the end.
    let after = text(&all[before_answer.len()..]);
    assert!(after.contains("LATE"), "{after:?}");
    assert!(
        after.contains("asked body") && after.contains(" END"),
        "{after:?}"
    );
    assert_eq!(status.code(), Some(0), "{after:?}");
    assert_answer_precedes_broker(&w.events(), true, "allow");
}
