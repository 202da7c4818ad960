//! `chock run` end to end: the real binary, a real project (plain and git), the real sandbox, a
//! recorded model (`demo`, `script:FILE`) or a loopback server speaking the Anthropic wire format,
//! and the real session log, verified afterwards.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A project, isolated state/config/data directories, and helpers to run `chock` there.
struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("project");
        std::fs::create_dir_all(&project).unwrap();
        for sub in ["state", "config", "data"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        World {
            _dir: dir,
            base,
            project,
        }
    }

    /// A git project with one commit, a tiny program and its test.
    fn with_git_project() -> World {
        Self::with_git_project_and_policy(None)
    }

    /// As [`World::with_git_project`], with a chock.toml committed alongside.
    fn with_git_project_and_policy(policy: Option<&str>) -> World {
        let w = World::new();
        if let Some(policy) = policy {
            w.write("chock.toml", policy);
        }
        w.write(
            "calc.sh",
            "#!/bin/sh\n# adds two numbers\necho $(( $1 - $2 ))\n",
        );
        w.write(
            "test.sh",
            "#!/bin/sh\nif [ \"$(sh calc.sh 2 3)\" = 5 ]; then echo PASS; else echo FAIL; exit 1; fi\n",
        );
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "-A"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "start",
            ],
        ] {
            let status = Command::new("git")
                .args(args)
                .current_dir(&w.project)
                .status()
                .unwrap();
            assert!(status.success());
        }
        w
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.project.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn script(&self, toml: &str) -> String {
        let path = self.base.join("script.toml");
        std::fs::write(&path, toml).unwrap();
        format!("script:{}", path.display())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chock"));
        cmd.args(args)
            .current_dir(&self.project)
            .env("XDG_STATE_HOME", self.base.join("state"))
            .env("XDG_CONFIG_HOME", self.base.join("config"))
            .env("XDG_DATA_HOME", self.base.join("data"))
            .env_remove("CHOCK_ORG_POLICY")
            // Never the developer's own keyring: the keyring test starts a bus of its own.
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY");
        cmd
    }

    fn chock(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    fn sessions(&self) -> Vec<PathBuf> {
        let root = self.base.join("state/chock/sessions");
        let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn session(&self) -> PathBuf {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "one session");
        sessions[0].clone()
    }

    fn session_id(&self) -> String {
        self.session()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// Every event of the only session: (kind, call_id, data).
    fn events(&self) -> Vec<(String, Option<String>, serde_json::Value)> {
        let text = std::fs::read_to_string(self.session().join("log.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["kind"].as_str().unwrap().to_string(),
                    v["call_id"].as_str().map(str::to_string),
                    v["data"].clone(),
                )
            })
            .collect()
    }

    fn assert_log_verifies(&self) {
        let report = chock_log::verify(&self.session()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.torn_tail.is_none());
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// For every tool call: its decision is logged, and logged before its result.
fn assert_decisions_precede_results(events: &[(String, Option<String>, serde_json::Value)]) {
    let calls: Vec<&String> = events
        .iter()
        .filter(|(k, _, _)| k == "tool.call")
        .filter_map(|(_, c, _)| c.as_ref())
        .collect();
    assert!(!calls.is_empty());
    for call in calls {
        let at = |kind: &str| {
            events
                .iter()
                .position(|(k, c, _)| k == kind && c.as_ref() == Some(call))
        };
        let decision = at("decision").unwrap_or_else(|| panic!("no decision for {call}"));
        let result = at("tool.result").unwrap_or_else(|| panic!("no result for {call}"));
        let called = at("tool.call").unwrap();
        assert!(
            called < decision && decision < result,
            "{call}: call {called}, decision {decision}, result {result}"
        );
    }
}

#[test]
fn the_demo_runs_offline_in_a_plain_directory_and_changes_only_the_workspace() {
    let w = World::new();
    w.write("README.md", "a project\n");
    let out = w.chock(&["run", "--provider", "demo", "add a note about this project"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let id = w.session_id();
    assert!(
        stdout.starts_with(&format!("chock: session {id} ")),
        "{stdout}"
    );
    for line in [
        "turns       6",
        "tool calls  5",
        "5 allowed (table 5",
        "cost        $0.0000",
        &format!("chock diff {id}"),
    ] {
        assert!(stdout.contains(line), "{line:?} missing from:\n{stdout}");
    }
    let names: Vec<_> = std::fs::read_dir(&w.project)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["README.md"], "the project is never written");
    assert!(
        stdout.contains(&format!("chock workspace adopt {id}")),
        "no git: the work is adopted, not applied"
    );
    let diff = w.chock(&["diff", &id]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff.stderr));
    assert!(
        text(&diff.stdout).contains("+- status: reviewed"),
        "{}",
        text(&diff.stdout)
    );
    w.assert_log_verifies();
    let events = w.events();
    assert_decisions_precede_results(&events);
    assert_eq!(events.last().unwrap().0, "session.end");
    assert_eq!(events.last().unwrap().2["summary"]["ended"], "done");
}

#[test]
fn verbose_names_the_log() {
    let w = World::new();
    let out = w.chock(&["run", "--verbose", "--provider", "demo", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = w.session().join("log.jsonl");
    let second = text(&out.stdout).lines().nth(1).unwrap().to_string();
    assert_eq!(second, format!("chock: log {}", log.display()));
}

const FIX_SCRIPT: &str = r#"
name = "fix-calc"
model = "scripted"

[[turn]]
text = "Reading the program."
[[turn.call]]
tool = "read_file"
input = { path = "calc.sh" }
expect = { is_error = false, contains = "$1 - $2" }

[[turn]]
text = "The sign is wrong; fixing it."
[[turn.call]]
tool = "edit_file"
input = { path = "calc.sh", old = "echo $(( $1 - $2 ))", new = "echo $(( $1 + $2 ))" }
expect = { is_error = false }

[[turn]]
text = "Running the tests in the sandbox."
[[turn.call]]
tool = "run_command"
input = { command = "sh test.sh" }
expect = { is_error = false, contains = "PASS" }

[[turn]]
text = "Fixed: calc.sh adds now, and test.sh passes."
"#;

#[test]
fn a_scripted_model_reads_edits_runs_the_tests_in_the_sandbox_and_finishes() {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
    ));
    let provider = w.script(FIX_SCRIPT);
    let out = w.chock(&["run", "--provider", &provider, "fix calc.sh"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("tool calls  3"), "{stdout}");
    // The real project still has the bug; the session's diff has the fix.
    assert!(
        std::fs::read_to_string(w.project.join("calc.sh"))
            .unwrap()
            .contains("$1 - $2")
    );
    let id = w.session_id();
    let diff = w.chock(&["diff", &id]);
    let diff_text = text(&diff.stdout);
    assert!(
        diff_text.contains("-echo $(( $1 - $2 ))") && diff_text.contains("+echo $(( $1 + $2 ))"),
        "{diff_text}"
    );
    w.assert_log_verifies();
    let events = w.events();
    assert_decisions_precede_results(&events);
    // run_command went through the session's confined call under the model's own call id.
    let call = events
        .iter()
        .find(|(k, c, _)| k == "tool.call" && c.as_deref() == Some("play_3_1"))
        .unwrap();
    assert_eq!(call.2["action"], "exec.system.sh");
    let result = events
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("play_3_1"))
        .unwrap();
    assert_eq!(result.2["exit_code"], 0);
    // The work can be applied with the workspace commands.
    let apply = w.chock(&["apply", &id]);
    assert_eq!(
        apply.status.code(),
        Some(0),
        "{}{}",
        text(&apply.stdout),
        text(&apply.stderr)
    );
    assert!(
        std::fs::read_to_string(w.project.join("calc.sh"))
            .unwrap()
            .contains("$1 + $2")
    );
}

#[test]
fn an_edit_of_lines_never_shown_is_refused_and_the_model_reads_why() {
    let w = World::with_git_project();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "edit_file"
input = { path = "calc.sh", old = "- $2", new = "+ $2" }
expect = { is_error = true, contains = "was not shown to you" }

[[turn]]
text = "I must read it first."
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "fix it blind"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("+ $2"), "nothing was written");
}

#[test]
fn an_ask_with_nobody_to_ask_is_a_refusal_logged_before_the_act() {
    let w = World::with_git_project();
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n",
    );
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "touch made-by-the-command" }
expect = { is_error = true, contains = "refused" }

[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "x.txt", content = "x" }
expect = { is_error = false }

[[turn]]
text = "done"
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "touch a file"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("1 refused"), "{stdout}");
    let events = w.events();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|(_, c, _)| c.as_deref() == Some("play_1_1"))
        .map(|(k, _, _)| k.as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "tool.call",
            "decision",
            "approval.ask",
            "approval.answer",
            "tool.result"
        ]
    );
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["approved"], false);
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("made-by-the-command"));
    assert!(text(&diff.stdout).contains("x.txt"));
}

#[test]
fn a_first_word_that_is_not_a_command_is_refused_with_a_hint() {
    let w = World::new();
    let out = w.chock(&["fix", "the", "parser"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(text(&out.stderr), @"chock: unknown command 'fix'; to give a task, write `chock -- fix the parser`");
    assert!(w.sessions().is_empty(), "nothing ran");
    // After `--` the words are a task (here refused only because no provider is configured).
    let out = w.chock(&["--", "fix", "the", "parser"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no provider"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_task_on_standard_input_and_after_the_double_dash_runs() {
    let w = World::new();
    let mut child = w
        .command(&["run", "--provider", "demo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the task from stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = w.events();
    let note = events
        .iter()
        .find(|(k, _, d)| k == "note" && d.get("task").is_some())
        .unwrap();
    assert_eq!(note.2["task"], "the task from stdin");
}

#[test]
fn a_bad_config_names_file_line_and_column_and_nothing_runs() {
    let w = World::new();
    let config = w.base.join("config/chock/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[providers.x]\nkind = \"gemini\"\n").unwrap();
    let out = w.chock(&["run", "--provider", "demo", "task"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("{}:2:8:", config.display())), "{err}");
    assert!(w.sessions().is_empty());
}

/// The `type`s docs/json-events.md documents, with the fields each must carry.
const JSON_SCHEMA: &[(&str, &[&str])] = &[
    (
        "session_started",
        &["session", "log_dir", "project", "provider", "model"],
    ),
    ("turn_started", &["turn"]),
    ("text", &["text"]),
    ("thinking", &["text"]),
    ("model_retry", &["attempt", "wait_ms", "reason"]),
    (
        "model_response",
        &[
            "turn",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_usd",
            "stop_reason",
        ],
    ),
    ("tool_call", &["call_id", "tool", "input"]),
    (
        "approval_asked",
        &["call_id", "action", "decision", "decided_by"],
    ),
    (
        "decision",
        &["call_id", "action", "allowed", "decision", "decided_by"],
    ),
    ("tool_result", &["call_id", "tool", "ok", "summary"]),
    ("plan_updated", &["steps"]),
    ("title_set", &["title"]),
    ("background_ended", &["handle", "status"]),
    ("turn_ended", &["turn"]),
    ("session_ended", &["summary"]),
];

#[test]
fn json_mode_writes_one_documented_event_per_line() {
    let w = World::new();
    let out = w.chock(&["run", "--json", "--provider", "demo", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    for event in &events {
        let kind = event["type"].as_str().unwrap();
        let (_, fields) = JSON_SCHEMA
            .iter()
            .find(|(t, _)| *t == kind)
            .unwrap_or_else(|| panic!("undocumented {kind}"));
        for field in *fields {
            assert!(event.get(*field).is_some(), "{kind} lacks {field}: {event}");
        }
    }
    assert_eq!(events.first().unwrap()["type"], "session_started");
    assert_eq!(events.first().unwrap()["session"], w.session_id());
    let end = events.last().unwrap();
    assert_eq!(end["type"], "session_ended");
    for key in [
        "session",
        "ended",
        "turns",
        "tool_calls",
        "decisions",
        "cost_usd",
        "review",
        "take",
    ] {
        assert!(end["summary"].get(key).is_some(), "summary lacks {key}");
    }
    let calls = events.iter().filter(|e| e["type"] == "tool_call").count();
    let results = events.iter().filter(|e| e["type"] == "tool_result").count();
    assert_eq!((calls, results), (5, 5));
    let schema_doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/json-events.md"),
    )
    .unwrap();
    for (kind, _) in JSON_SCHEMA {
        assert!(
            schema_doc.contains(&format!("`{kind}`")),
            "docs/json-events.md does not document {kind}"
        );
    }
}

/// Opens a pseudo-terminal: (master, slave).
fn open_pty() -> (std::fs::File, std::fs::File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    (std::fs::File::from(master), slave)
}

/// Runs a session whose one command the table says to ask about, answering `answer` on a terminal.
fn run_with_terminal_answer(answer: &str) -> (World, String) {
    let w = World::with_git_project();
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n",
    );
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo ran > made-by-the-command" }

[[turn]]
text = "done"
"#,
    );
    let (mut master, slave) = open_pty();
    let mut child = w
        .command(&["run", "--provider", &provider, "make a file"])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the prompt on stderr, then answer on the terminal.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut buf = [0u8; 1];
    while !seen.contains("[n] no > ") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "the prompt never came: {seen}");
        seen.push(char::from(buf[0]));
    }
    assert!(
        seen.contains("approval needed for exec.system.sh"),
        "{seen}"
    );
    master.write_all(format!("{answer}\n").as_bytes()).unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{seen}{rest}",
        text(&out.stdout)
    );
    let _ = stderr.lines();
    (w, text(&out.stdout))
}

#[test]
fn a_person_at_the_terminal_says_yes_and_the_command_runs() {
    let (w, stdout) = run_with_terminal_answer("y");
    assert!(stdout.contains("1 allowed (table 0, person 1"), "{stdout}");
    let events = w.events();
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["approved"], true);
    assert!(
        answer.2["by"]
            .as_str()
            .unwrap()
            .contains("allowed by terminal"),
        "{}",
        answer.2
    );
    assert_decisions_precede_results(&events);
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(
        text(&diff.stdout).contains("made-by-the-command"),
        "{}",
        text(&diff.stdout)
    );
}

#[test]
fn a_person_at_the_terminal_says_no_and_nothing_runs() {
    let (w, stdout) = run_with_terminal_answer("n");
    assert!(
        stdout.contains("1 refused (table 0, answered no 1"),
        "{stdout}"
    );
    let events = w.events();
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["approved"], false);
    let result = events.iter().find(|(k, _, _)| k == "tool.result");
    assert!(
        result.is_none_or(|r| r.2.get("exit_code").is_none()),
        "nothing ran"
    );
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("made-by-the-command"));
}

/// One reply of the loopback model: an HTTP error, or a stream of Anthropic SSE events.
enum Reply {
    Error(u16, &'static str),
    Events(Vec<String>),
}

fn message_start(id: &str, input_tokens: u64) -> String {
    format!(
        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{{"input_tokens":{input_tokens},"output_tokens":1}}}}}}"#
    )
}

/// A streamed reply: some text, then optionally one tool call whose input arrives in two pieces.
fn reply(id: &str, input_tokens: u64, text: &str, call: Option<(&str, &str, &str)>) -> Reply {
    let mut events = vec![
        message_start(id, input_tokens),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_string(),
        serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}).to_string(),
        r#"{"type":"content_block_stop","index":0}"#.to_string(),
    ];
    let stop = if let Some((call_id, name, input)) = call {
        let (a, b) = input.split_at(input.len() / 2);
        events.push(
            serde_json::json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":call_id,"name":name,"input":{}}})
                .to_string(),
        );
        for piece in [a, b] {
            events.push(
                serde_json::json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":piece}})
                    .to_string(),
            );
        }
        events.push(r#"{"type":"content_block_stop","index":1}"#.to_string());
        "tool_use"
    } else {
        "end_turn"
    };
    events.push(format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}"}},"usage":{{"output_tokens":10}}}}"#));
    events.push(r#"{"type":"message_stop"}"#.to_string());
    Reply::Events(events)
}

/// A loopback server speaking the Anthropic Messages wire format, one reply per request, in order.
/// Returns the port and the raw requests it saw.
fn anthropic_server(replies: Vec<Reply>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for reply in replies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            seen.push(format!("{head}{}", String::from_utf8_lossy(&body)));
            let out = match reply {
                Reply::Error(status, body) => format!(
                    "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nretry-after-ms: 10\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                ),
                Reply::Events(events) => {
                    let mut out = String::from(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
                    );
                    for data in events {
                        let kind: serde_json::Value = serde_json::from_str(&data).unwrap();
                        out.push_str(&format!(
                            "event: {}\ndata: {data}\n\n",
                            kind["type"].as_str().unwrap()
                        ));
                    }
                    out
                }
            };
            stream.write_all(out.as_bytes()).unwrap();
            stream.flush().unwrap();
        }
        seen
    });
    (port, server)
}

/// config.toml naming the loopback server as provider `fake`, its key in `key_env`.
fn fake_provider(w: &World, port: u16, key_env: &str) {
    let config = w.base.join("config/chock/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"{key_env}\"\nmodel = \"claude-sonnet-4-5\"\n"
        ),
    )
    .unwrap();
}

#[test]
fn a_run_through_a_loopback_anthropic_server_with_a_stored_key() {
    let w = World::new();
    w.write("hello.txt", "hello from the project\n");
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            1000,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply("msg_2", 1200, "It says hello.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_UNSET_KEY");
    let key = "sk-ant-test-0123456789abcdef";
    let mut login = w
        .command(&["login", "--provider", "fake"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    login
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{key}\n").as_bytes())
        .unwrap();
    let login = login.wait_with_output().unwrap();
    assert_eq!(login.status.code(), Some(0), "{}", text(&login.stderr));
    assert!(!text(&login.stdout).contains(key));
    let stored = w.base.join("data/chock/credentials/fake");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let out = w.chock(&["run", "--provider", "fake", "what does hello.txt say?"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Reading it.") && stdout.contains("It says hello."),
        "{stdout}"
    );
    assert!(stdout.contains("2200 input"), "{stdout}");
    assert!(
        !stdout.contains("unknown (no price"),
        "a known model has a price: {stdout}"
    );
    let requests = server.join().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {key}")),
        "{}",
        requests[0]
    );
    assert!(
        requests[1].contains("hello from the project"),
        "the tool result went back: {}",
        requests[1]
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key), "the key never reaches the log");
    w.assert_log_verifies();
    let events = w.events();
    assert_decisions_precede_results(&events);
    let read = events
        .iter()
        .find(|(k, c, _)| k == "tool.call" && c.as_deref() == Some("toolu_01"))
        .unwrap();
    assert_eq!(read.2["input"]["path"], "hello.txt");
}

#[test]
fn the_agent_narrows_itself_cannot_widen_alone_and_its_other_tools_work() {
    let w = World::with_git_project();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "set_title"
input = { title = "self-restraint" }
[[turn.call]]
tool = "update_plan"
input = { steps = [{ step = "narrow myself", status = "in_progress" }, { step = "stop" }] }
[[turn.call]]
tool = "read_guidance"
input = { topic = "editing" }
expect = { is_error = false, contains = "edit_file" }

[[turn]]
[[turn.call]]
tool = "restrict_self"
input = { action = "fs.write", decision = "deny" }
expect = { is_error = false, contains = "restricted" }
[[turn.call]]
tool = "restrict_self"
input = { action = "exec.*", decision = "deny" }
expect = { is_error = false, contains = "restricted" }

[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "x.txt", content = "x" }
expect = { is_error = true, contains = "ratchet" }
[[turn.call]]
tool = "run_command"
input = { command = "echo hi > y.txt" }
expect = { is_error = true, contains = "ratchet" }

[[turn]]
[[turn.call]]
tool = "restrict_self"
input = { action = "fs.write", decision = "allow" }
expect = { is_error = true, contains = "ratchet.widen_action" }
[[turn.call]]
tool = "ask_user"
input = { question = "may I?" }
expect = { is_error = false, contains = "no answer" }

[[turn]]
text = "I stayed inside my own limits."
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "be careful"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("title       self-restraint"), "{stdout}");
    let events = w.events();
    assert_decisions_precede_results(&events);
    let widen = events
        .iter()
        .find(|(k, _, d)| k == "approval.ask" && d["action"] == "ratchet.widen_action")
        .expect("the widening was asked about");
    assert_eq!(widen.1.as_deref(), Some("play_4_1"));
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("x.txt") && !text(&diff.stdout).contains("y.txt"));
}

#[test]
fn request_action_applies_the_work_when_the_table_allows_it() {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
    ));
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "docs/NEW.md", content = "new\n" }

[[turn]]
[[turn.call]]
tool = "request_action"
input = { action = "workspace.apply", reason = "the docs are written" }
expect = { is_error = false, contains = "applied as" }

[[turn]]
[[turn.call]]
tool = "request_action"
input = { action = "git.push", reason = "ship it" }
expect = { is_error = true, contains = "only workspace.apply" }

[[turn]]
text = "Applied."
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "write docs and apply them"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(w.project.join("docs/NEW.md")).unwrap(),
        "new\n"
    );
    let events = w.events();
    let decision = events
        .iter()
        .position(|(k, c, _)| k == "decision" && c.as_deref() == Some("play_2_1"))
        .unwrap();
    let apply = events
        .iter()
        .position(|(k, _, _)| k == "workspace.apply")
        .unwrap();
    assert!(decision < apply, "decided before applying");
    assert_decisions_precede_results(&events);
}

#[test]
fn an_overloaded_model_is_retried_and_the_retry_is_logged() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        Reply::Error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        reply("msg_1", 10, "Fine now.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w
        .command(&["run", "--provider", "fake", "hi"])
        .env("CHOCK_TEST_KEY", "sk-test-retry-key-123456")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("retrying"), "{stdout}");
    assert_eq!(server.join().unwrap().len(), 2);
    let events = w.events();
    let retry = events
        .iter()
        .find(|(k, _, _)| k == "model.retry")
        .expect("a model.retry event");
    assert_eq!(retry.2["attempt"], 1);
    assert!(
        retry.2["reason"].as_str().unwrap().contains("529"),
        "{}",
        retry.2
    );
    w.assert_log_verifies();
}

#[test]
fn a_background_command_returns_a_handle_and_its_end_is_recorded() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Starting a slow job.",
            Some((
                "toolu_bg",
                "run_command",
                r#"{"command": "sleep 1; echo slow-job-done", "background": true}"#,
            )),
        ),
        reply(
            "msg_2",
            10,
            "Checking on it.",
            Some(("toolu_read", "read_output", r#"{"handle": "bg-toolu_bg"}"#)),
        ),
        reply("msg_3", 10, "It runs on; I am done.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w
        .command(&["run", "--provider", "fake", "run the slow job"])
        .env("CHOCK_TEST_KEY", "sk-test-bg-key-1234567")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let requests = server.join().unwrap();
    assert!(
        requests[1].contains("started in the background as bg-toolu_bg"),
        "{}",
        requests[1]
    );
    assert!(requests[2].contains("still running"), "{}", requests[2]);
    let events = w.events();
    let ended = events
        .iter()
        .position(|(k, _, d)| k == "note" && d["background"] == "bg-toolu_bg" && d["ended"] == true)
        .expect("the background command's end is recorded");
    assert_eq!(events[ended].2["status"], 0);
    let end = events
        .iter()
        .position(|(k, _, _)| k == "session.end")
        .unwrap();
    assert!(ended < end);
    assert_decisions_precede_results(&events);
    w.assert_log_verifies();
}

#[test]
fn the_file_tools_see_what_a_command_deleted_in_the_overlay() {
    let w = World::new();
    w.write("README.md", "a project\n");
    w.write("keep/a.txt", "a\n");
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "rm README.md && rm -r keep && mkdir keep && echo b > keep/b.txt" }
expect = { is_error = false }

[[turn]]
[[turn.call]]
tool = "read_file"
input = { path = "README.md" }
expect = { is_error = true, contains = "no such file" }
[[turn.call]]
tool = "list"
input = { path = "." }
expect = { is_error = false, contains = "keep/" }
[[turn.call]]
tool = "glob"
input = { pattern = "**/*.txt" }
expect = { is_error = false, contains = "keep/b.txt" }

[[turn]]
text = "The view matches the sandbox."
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "tidy"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let events = w.events();
    let output = |call: &str| {
        events
            .iter()
            .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some(call))
            .map(|(_, _, d)| d["output"].as_str().unwrap_or_default().to_string())
            .unwrap()
    };
    assert_eq!(
        output("play_2_2"),
        "keep/\n",
        "the deleted README.md is gone from the view"
    );
    assert_eq!(
        output("play_2_3"),
        "keep/b.txt\n",
        "the replaced directory hides the old a.txt"
    );
    assert!(w.project.join("README.md").exists() && w.project.join("keep/a.txt").exists());
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[test]
fn login_uses_a_running_os_keyring_and_run_finds_the_key_there() {
    if let Some(missing) = ["dbus-run-session", "gnome-keyring-daemon", "secret-tool"]
        .into_iter()
        .find(|p| !on_path(p))
    {
        eprintln!(
            "skipped: {missing} is not installed (apt-get install dbus libsecret-tools gnome-keyring)"
        );
        return;
    }
    let w = World::new();
    w.write("hello.txt", "hello from the project\n");
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply("msg_2", 10, "It says hello.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_UNSET_KEY");
    let key = "sk-ant-keyring-0123456789";
    let looked_up = w.base.join("looked-up");
    let script = format!(
        "printf pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1\n\
         printf %s '{key}' | \"$CHOCK\" login --provider fake || exit 10\n\
         secret-tool lookup application chock provider fake > '{}' || exit 11\n\
         \"$CHOCK\" run --provider fake 'what does hello.txt say?' || exit 12\n",
        looked_up.display()
    );
    let home = w.base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("dbus-run-session")
        .args(["--", "sh", "-c", &script])
        .current_dir(&w.project)
        .env("CHOCK", env!("CARGO_BIN_EXE_chock"))
        .env("HOME", &home)
        .env("XDG_STATE_HOME", w.base.join("state"))
        .env("XDG_CONFIG_HOME", w.base.join("config"))
        .env("XDG_DATA_HOME", w.base.join("data"))
        .env_remove("CHOCK_ORG_POLICY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("stored the key for fake in the OS keyring"),
        "{stdout}"
    );
    assert!(
        !w.base.join("data/chock/credentials/fake").exists(),
        "no file copy when the keyring took it"
    );
    assert_eq!(std::fs::read_to_string(&looked_up).unwrap().trim(), key);
    let requests = server.join().unwrap();
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {key}"))
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key), "the key never reaches the log");
}

#[test]
fn agent_review_asks_the_same_model_as_a_reviewer_and_logs_its_verdict() {
    let w = World::new();
    w.write("hello.txt", "hello\n");
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"fs.read\"\ndecision = \"agent_review\"\n",
    );
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply(
            "msg_r",
            10,
            r#"{"allow": true, "reasons": "reading a project file is harmless"}"#,
            None,
        ),
        reply("msg_2", 10, "It says hello.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w
        .command(&["run", "--provider", "fake", "read hello.txt"])
        .env("CHOCK_TEST_KEY", "sk-test-review-key-12345")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("reviewer 1"), "{stdout}");
    let requests = server.join().unwrap();
    assert!(
        requests[1].contains("Act: fs.read"),
        "the reviewer is told the act: {}",
        requests[1]
    );
    assert!(
        !requests[1].contains("\"tools\""),
        "the reviewer gets no tools"
    );
    let events = w.events();
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["answer"], "allow_once");
    assert_eq!(answer.2["reasons"], "reading a project file is harmless");
    assert!(answer.2["by"].as_str().unwrap().starts_with("reviewer:"));
    assert_decisions_precede_results(&events);
}

#[test]
fn the_key_never_reaches_a_tool_call_or_the_log() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Looking around.",
            Some((
                "toolu_env",
                "run_command",
                r#"{"command": "env; echo done"}"#,
            )),
        ),
        reply("msg_2", 10, "Nothing there.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let key = "sk-ant-never-in-a-tool-call-987654";
    let out = w
        .command(&["run", "--provider", "fake", "look at the environment"])
        .env("CHOCK_TEST_KEY", key)
        .env("ANTHROPIC_API_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let requests = server.join().unwrap();
    let result = &requests[1];
    assert!(
        result.contains("done") && result.contains("PATH="),
        "the command ran: {result}"
    );
    let body = result.split("\r\n\r\n").nth(1).unwrap();
    assert!(
        !body.contains(key),
        "the key is not in the command's environment: {body}"
    );
    assert!(!body.contains("CHOCK_TEST_KEY") && !body.contains("ANTHROPIC_API_KEY"));
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key));
}

#[test]
fn ctrl_c_ends_the_session_as_a_record_and_the_command_with_it() {
    let w = World::new();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo started > started.txt; sleep 60", timeout_secs = 120 }

[[turn]]
text = "never reached"
"#,
    );
    let child = w
        .command(&["run", "--provider", &provider, "wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the command is running in the sandbox (its tool.result has not come).
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed().as_secs() < 30,
            "the command never started"
        );
        if w.sessions().len() == 1 {
            let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap_or_default();
            if log.contains("\"kind\":\"decision\",\"call_id\":\"play_1_1\"") {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed().as_secs() < 30,
        "interrupted long before the sleep ended"
    );
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("interrupted"));
    let events = w.events();
    let last = events.last().unwrap();
    assert_eq!(last.0, "session.end");
    assert_eq!(last.2["summary"]["ended"], "interrupted");
    w.assert_log_verifies();
    // The command died with its sandbox.
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x0060\x00"))
    };
    let gone_by = std::time::Instant::now();
    while sleeping() {
        assert!(
            gone_by.elapsed().as_secs() < 5,
            "the interrupted command outlived the session"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn task_words_after_the_double_dash_run_with_the_default_provider_on_another_project() {
    let w = World::new();
    w.write("README.md", "a project\n");
    let config = w.base.join("config/chock/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "default_provider = \"demo\"\n").unwrap();
    let out = w
        .command(&["--", "add", "a", "note"])
        .current_dir(&w.base)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // Run from the parent directory: without --project the parent is the project.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let first = w.events().into_iter().next().unwrap();
    assert_eq!(first.2["project"], w.base.display().to_string());
    std::fs::remove_dir_all(w.base.join("state/chock/sessions")).unwrap();
    let project = w.project.display().to_string();
    let out = w
        .command(&["run", "--project", &project, "add a note"])
        .current_dir(&w.base)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let first = w.events().into_iter().next().unwrap();
    assert_eq!(first.2["project"], project);
    let note = w
        .events()
        .into_iter()
        .find(|(k, _, d)| k == "note" && d.get("task").is_some())
        .unwrap();
    assert_eq!(note.2["task"], "add a note");
}
