//! `chock run` end to end, offline: the real binary, a real project (plain and git), the real sandbox,
//! the recorded model (`demo`, `script:FILE`), and the real session log, verified afterwards.

mod run_support;

use std::path::Path;
use std::process::Stdio;

use run_support::*;

#[test]
fn the_demo_runs_offline_in_a_plain_directory_and_changes_only_the_workspace() {
    let w = World::new();
    w.write("README.md", "a project\n");
    let out = w.chock(&["run", "--provider", "demo", "add a note about this project"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let id = w.session_id();
    assert_eq!(
        id, FIRST_SESSION,
        "the fixed clock and ids name the session"
    );
    assert!(
        stdout.starts_with(&format!("chock: session {id} ")),
        "{stdout}"
    );
    let summary = &stdout[stdout.find("── session").unwrap()..];
    w.settings().bind(|| insta::assert_snapshot!(summary, @r"
    ── session 20260101T000000Z-000001 ──
    ended       done
    turns       6
    tool calls  5
    decisions   5 allowed (table 5, person 0, reviewer 0); 0 refused (table 0, answered no 0, nobody answered 0)
    cost        $0.0000 (0 input, 0 output tokens)
    review      chock diff 20260101T000000Z-000001   (then `chock workspace adopt 20260101T000000Z-000001` to take the work)
    "));
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
        .find(|(k, c, _)| k == "command.result" && c.as_deref() == Some("play_3_1"))
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
    let out = w.chock_with_input(&["run", "--provider", "demo"], b"the task from stdin\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = w.events();
    let note = events
        .iter()
        .find(|(k, _, d)| k == "note" && d.get("task").is_some())
        .unwrap();
    assert_eq!(note.2["task"], "the task from stdin");
}

#[test]
fn task_words_after_the_double_dash_run_with_the_default_provider_on_another_project() {
    let world = || {
        let w = World::new();
        w.write("README.md", "a project\n");
        w.config_toml("default_provider = \"demo\"\n");
        w
    };
    let w = world();
    let out = w.chock_from_base(&["--", "add", "a", "note"]);
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
    // A second world, so each has one session (an overlay's work directory cannot be removed by a
    // user who is not root).
    let w = world();
    let project = w.project.display().to_string();
    let out = w.chock_from_base(&["run", "--project", &project, "add a note"]);
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

#[test]
fn a_bad_config_names_file_line_and_column_and_nothing_runs() {
    let w = World::new();
    let config = w.config_toml("[providers.x]\nkind = \"gemini\"\n");
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
    ("text", &["item", "text"]),
    ("thinking", &["item", "text"]),
    ("item_started", &["item", "turn", "kind"]),
    ("item_delta", &["item", "text"]),
    ("item_completed", &["item", "ok"]),
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
        &["question", "call_id", "action", "decision", "decided_by"],
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
    // Every item names the turn it began in: a command's output and an approval too.
    let mut turn = serde_json::Value::Null;
    let mut kinds = Vec::new();
    for event in &events {
        match event["type"].as_str() {
            Some("turn_started") => turn = event["turn"].clone(),
            Some("item_started") => {
                assert_eq!(event["turn"], turn, "{event}");
                kinds.push(event["kind"]["kind"].clone());
            }
            _ => {}
        }
    }
    assert!(
        kinds.contains(&serde_json::json!("command_output")),
        "the demo runs a command: {kinds:?}"
    );
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

#[test]
fn ctrl_c_ends_the_session_as_a_record_and_the_command_with_it() {
    let w = World::new();
    // A duration no other process on the machine sleeps for (other tests run `sleep 60` too), so
    // the scan of /proc below finds this command and nothing else.
    let duration = format!("60.{:06}", std::process::id() % 1_000_000);
    let provider = w.script(&format!(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "echo started > started.txt; sleep {duration}", timeout_secs = 120 }}

[[turn]]
text = "never reached"
"#
    ));
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
    let cmdline = format!("sleep\0{duration}\0").into_bytes();
    let sleeping = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == cmdline))
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
fn the_turn_bound_ends_a_session_that_would_go_on() {
    let w = World::new();
    let turn = "[[turn]]\n[[turn.call]]\ntool = \"list\"\ninput = { path = \".\" }\n\n";
    let provider = w.script(&format!(
        "{}[[turn]]\ntext = \"never reached\"\n",
        turn.repeat(3)
    ));
    let out = w.chock(&["run", "--max-turns", "2", "--provider", &provider, "loop"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("ended       max_turns") && stdout.contains("turns       2"),
        "{stdout}"
    );
    let events = w.events();
    assert_eq!(
        events
            .iter()
            .filter(|(k, _, _)| k == "model.request")
            .count(),
        2
    );
    assert_eq!(events.last().unwrap().2["summary"]["ended"], "max_turns");
    w.assert_log_verifies();
}

const GIT_SCRIPT: &str = r#"
name = "git-in-the-sandbox"
model = "scripted"

[[turn]]
text = "Committing in the workspace."
[[turn.call]]
tool = "run_command"
input = { command = "git -c user.name=a -c user.email=b commit -q --allow-empty -m agent && git rev-list --count HEAD" }
expect = { is_error = false, contains = "2" }

[[turn]]
text = "Pushing by the real git's full path."
[[turn.call]]
tool = "run_command"
input = { command = "/usr/bin/git push origin main; echo \"exit $?\"" }
expect = { is_error = false, contains = "exit 126" }

[[turn]]
text = "Committed; the push was refused."
"#;

/// The agent's run_command goes through the same confined call as `chock exec`: git in it is the
/// shim, each invocation decided under the model's call id.
#[test]
fn the_agents_git_is_decided_per_invocation_under_its_call_id() {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n",
    ));
    let provider = w.script(GIT_SCRIPT);
    let out = w.chock(&["run", "--provider", &provider, "commit"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let decided: Vec<(Option<String>, String, bool)> = w
        .events()
        .into_iter()
        .filter(|(k, _, d)| {
            k == "decision" && d["action"].as_str().is_some_and(|a| a.starts_with("git."))
        })
        .map(|(_, c, d)| {
            (
                c,
                d["action"].as_str().unwrap().to_string(),
                d["allowed"] == true,
            )
        })
        .collect();
    let call = |id: &str| Some(id.to_string());
    assert_eq!(
        decided,
        [
            (call("play_1_1"), "git.commit".to_string(), true),
            (call("play_1_1"), "git.maintenance".to_string(), true),
            (call("play_1_1"), "git.inspect".to_string(), true),
            (call("play_2_1"), "git.push".to_string(), false),
        ]
    );
}
