//! `chock serve`, `chock run --daemon`, `chock attach` and `chock sessions list` as real
//! processes: one line saying where it listens, a second daemon refused, a non-loopback address
//! refused, a question answered at a terminal attached to the daemon, a daemon stopped by SIGTERM
//! with a question open (unanswered, still listed after a restart), and a `[sandbox]` path that
//! would hold the daemon's socket refused with the field named; the model's title shown escaped
//! through attach; a session stopped by its budget ends `out_of_budget` through attach (exit 1),
//! and `run --daemon` exits 1 when its task is stopped so.

mod run_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_protocol::rpc::{Call, Pending, PendingParams, StartParams, Started};
use run_support::*;

const ASK_SH: &str = "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n";
const ASKING: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo ran > made-by-the-command" }

[[turn]]
text = "done"
"#;

/// A running `chock serve` and the line it printed.
struct Daemon {
    child: Child,
    line: String,
}

impl Daemon {
    fn start(w: &World, args: &[&str]) -> Daemon {
        let mut cmd = w.command(&["serve"]);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("chock: serving on "), "{line}");
        Daemon { child, line }
    }

    /// SIGTERM, and its exit status.
    fn stop(mut self) -> i32 {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let status = self.child.wait().unwrap();
        status.code().unwrap_or(-1)
    }
}

fn socket(w: &World) -> std::path::PathBuf {
    w.runtime.join("chock/daemon.sock")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn log_kinds(w: &World) -> Vec<(String, serde_json::Value)> {
    w.events().into_iter().map(|(k, _, d)| (k, d)).collect()
}

#[test]
fn serve_says_where_it_listens_and_a_second_daemon_or_a_network_address_is_refused() {
    let w = World::with_git_project();
    let daemon = Daemon::start(&w, &[]);
    assert_eq!(
        daemon.line.trim_end(),
        format!("chock: serving on {}", socket(&w).display())
    );
    let again = w.chock(&["serve"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("a daemon is already running (pid"),
        "{}",
        text(&again.stderr)
    );
    let wide = w.chock(&["serve", "--host", "0.0.0.0:8080"]);
    assert_eq!(wide.status.code(), Some(2));
    assert!(
        text(&wide.stderr).contains("only a loopback address"),
        "{}",
        text(&wide.stderr)
    );
    assert_eq!(daemon.stop(), 0);
    assert!(!socket(&w).exists(), "the socket goes with the daemon");
    // With --host the same line names the port and the one-time link.
    let daemon = Daemon::start(&w, &["--host", "127.0.0.1:0"]);
    assert!(
        daemon.line.contains(" and http://127.0.0.1:"),
        "{}",
        daemon.line
    );
    assert!(daemon.line.contains("/#login="), "{}", daemon.line);
    assert_eq!(daemon.stop(), 0);
}

#[test]
fn run_daemon_puts_the_question_to_this_terminal_and_sessions_list_shows_the_daemons_session() {
    let w = World::with_git_project_and_policy(Some(ASK_SH));
    let provider = w.script(ASKING);
    let daemon = Daemon::start(&w, &[]);
    let (mut master, slave) = open_pty();
    let mut child = w
        .command(&["run", "--daemon", "--provider", &provider, "make a file"])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    while !seen.contains("[n] no > ") {
        let n = stderr.read(&mut byte).unwrap();
        assert!(n > 0, "the prompt never came: {seen}");
        seen.push(char::from(byte[0]));
    }
    assert!(
        seen.contains("approval needed for exec.system.sh"),
        "{seen}"
    );
    master.write_all(b"y\n").unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{seen}{rest}");
    assert!(
        stdout.contains("in the daemon (provider script"),
        "{stdout}"
    );
    assert!(
        rest.contains("waits in the daemon for a follow-up"),
        "{rest}"
    );
    let events = log_kinds(&w);
    let answer = events.iter().find(|(k, _)| k == "approval.answer").unwrap();
    assert_eq!(answer.1["answer"], "allow_once");
    assert!(
        answer.1["by"].as_str().unwrap().starts_with("unix:uid="),
        "{}",
        answer.1
    );
    assert!(
        events
            .iter()
            .any(|(k, d)| k == "command.result" && d["outcome"] == "ran")
    );
    let list = w.chock(&["sessions", "list"]);
    let listed = text(&list.stdout);
    assert!(
        listed.contains(&format!("{}  daemon:idle", w.session_id())),
        "{listed}"
    );
    assert_eq!(daemon.stop(), 0);
    // Stopped, the daemon ended its idle session cleanly.
    assert_eq!(w.events().last().unwrap().0, "session.end");
    let listed = text(&w.chock(&["sessions", "list"]).stdout);
    assert!(listed.contains("ended"), "{listed}");
}

#[test]
fn sigterm_leaves_an_open_question_unanswered_and_a_restarted_daemon_still_lists_it() {
    let w = World::with_git_project_and_policy(Some(ASK_SH));
    let provider = w.script(ASKING);
    let daemon = Daemon::start(&w, &[]);
    let (session, question) = rt().block_on(async {
        let mut client = DaemonClient::unix(&socket(&w)).await.unwrap();
        let started: Started = client
            .call(&Call::SessionsStart(StartParams {
                task: "make a file".into(),
                project: w.project.display().to_string(),
                provider: Some(provider.clone()),
                model: None,
                subscribe: false,
            }))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pending: Pending = client
                .call(&Call::ApprovalsPending(PendingParams { session: None }))
                .await
                .unwrap();
            if let Some(q) = pending.approvals.first() {
                assert!(q.answerable);
                break (started.session, q.question.clone());
            }
            assert!(Instant::now() < deadline, "never asked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert_eq!(daemon.stop(), 0);
    let events = log_kinds(&w);
    assert!(
        !events.iter().any(|(k, _)| k == "approval.answer"),
        "nobody answered for the person: {events:?}"
    );
    assert!(!events.iter().any(|(k, _)| k == "command.result"));
    let daemon = Daemon::start(&w, &[]);
    rt().block_on(async {
        let mut client = DaemonClient::unix(&socket(&w)).await.unwrap();
        let pending: Pending = client
            .call(&Call::ApprovalsPending(PendingParams { session: None }))
            .await
            .unwrap();
        assert_eq!(pending.approvals.len(), 1, "{pending:?}");
        assert_eq!(pending.approvals[0].question, question);
        assert_eq!(pending.approvals[0].session, session);
        assert!(!pending.approvals[0].answerable);
    });
    let attach = w.chock(&["attach", &session]);
    assert_eq!(attach.status.code(), Some(1));
    let said = text(&attach.stderr);
    assert!(
        said.contains(&format!("question {question}")) && said.contains("stays unanswered"),
        "{said}"
    );
    assert!(said.contains("does not run in the daemon"), "{said}");
    let unknown = w.chock(&["attach", "20990101T000000Z-000000"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert_eq!(daemon.stop(), 0);
    assert!(!w.events().iter().any(|(k, _, _)| k == "approval.answer"));
}

#[test]
fn a_sandbox_path_that_would_hold_the_daemons_socket_is_refused_naming_the_field() {
    let w = World::with_git_project_and_policy(Some(&format!(
        "[sandbox]\nread = [\"{}\"]\n",
        w_runtime_placeholder()
    )));
    // The placeholder is replaced now that the world's runtime directory is known.
    let policy = std::fs::read_to_string(w.project.join("chock.toml"))
        .unwrap()
        .replace(&w_runtime_placeholder(), &w.runtime.display().to_string());
    w.write("chock.toml", &policy);
    let daemon = Daemon::start(&w, &[]);
    let out = w.chock(&["run", "--daemon", "--provider", "demo", "anything"]);
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("chock.toml:2:"), "{said}");
    assert!(said.contains("sandbox path refused"), "{said}");
    assert!(said.contains("the daemon's socket"), "{said}");
    assert!(w.sessions().is_empty(), "no session was made");
    assert_eq!(daemon.stop(), 0);
    // Without a daemon, --daemon says how to start one.
    let out = w.chock(&["run", "--daemon", "--provider", "demo", "anything"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("start one with `chock serve`"),
        "{}",
        text(&out.stderr)
    );
}

fn w_runtime_placeholder() -> String {
    "/RUNTIME-PLACEHOLDER".into()
}

/// `chock run --daemon` (attach's own printing) shows what the model wrote through the one
/// escaper: a title that would write the clipboard (OSC 52), redraw its line and reverse what
/// follows reaches the terminal escaped.
#[test]
fn run_daemon_shows_the_models_title_escaped() {
    let w = World::with_git_project();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "set_title"
input = { title = "fix\u001B]52;c;ZXZpbA==\u0007\rall good\u202Etxt" }

[[turn]]
text = "done"
"#,
    );
    let daemon = Daemon::start(&w, &[]);
    let out = w.chock(&["run", "--daemon", "--provider", &provider, "title it"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let raw: Vec<char> = stdout
        .chars()
        .filter(|&c| chock_protocol::text::must_escape(c) && c != '\n')
        .collect();
    assert_eq!(raw, Vec::<char>::new(), "{stdout:?}");
    assert!(
        stdout.contains(r"set_title title=fix\u{1b}]52;c;ZXZpbA==\u{7}\rall good\u{202e}txt"),
        "{stdout}"
    );
    assert_eq!(daemon.stop(), 0);
}

/// A session stopped by its budget ends `out_of_budget` through `chock attach` as through every
/// front end: the summary says so and attach exits 1 (the one mapping from how a session ended),
/// not 0 as for `done`.
#[test]
fn a_session_stopped_by_its_budget_ends_out_of_budget_through_attach() {
    let w = World::with_git_project_and_policy(Some("[budget]\ntokens = 1\n"));
    let provider = w.script("[[turn]]\ntext = \"never asked\"\n");
    let daemon = Daemon::start(&w, &[]);
    let run = w.chock(&["run", "--daemon", "--provider", &provider, "spend"]);
    // The task was stopped by the budget: `run --daemon` exits as a session run here would (1),
    // told how the task ended by the state change that follows it.
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(
        text(&run.stderr).contains("the task ended (out_of_budget)"),
        "{}",
        text(&run.stderr)
    );
    let session = w.session_id();
    let attach = w
        .command(&["attach", &session])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let attach subscribe before the session ends (ending it first is a different, refused case).
    std::thread::sleep(Duration::from_millis(1500));
    rt().block_on(async {
        let mut client = DaemonClient::unix(&socket(&w)).await.unwrap();
        let _: chock_protocol::rpc::Done = client
            .call(&Call::SessionsEnd(chock_protocol::rpc::SessionParams {
                session: session.clone(),
            }))
            .await
            .unwrap();
    });
    let out = attach.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("ended       out_of_budget"),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let end = log_kinds(&w)
        .into_iter()
        .find(|(k, _)| k == "session.end")
        .expect("the session ended");
    assert_eq!(end.1["reason"], "out_of_budget", "{end:?}");
    assert_eq!(daemon.stop(), 0);
}
