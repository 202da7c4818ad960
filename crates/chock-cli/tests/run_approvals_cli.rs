//! `chock run` deciding acts: the table, nobody to ask, a person at a real pseudo-terminal, a reviewer
//! model, the agent narrowing itself, and an apply the agent asks for.

mod run_support;

use std::io::{BufReader, Read, Write};
use std::process::Stdio;

use run_support::*;

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
            "approval.ask",
            "approval.answer",
            "decision",
            "command.result",
            "tool.result"
        ]
    );
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["answer"], "none");
    assert!(answer.2["question"].as_str().unwrap().starts_with("q-"));
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("made-by-the-command"));
    assert!(text(&diff.stdout).contains("x.txt"));
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
    assert_eq!(answer.2["answer"], "allow_once");
    assert_eq!(answer.2["by"], "terminal", "{}", answer.2);
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
    assert_eq!(answer.2["answer"], "deny");
    let result = events.iter().find(|(k, _, _)| k == "command.result");
    assert!(
        result.is_some_and(|r| r.2["outcome"] == "refused"),
        "nothing ran"
    );
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(!text(&diff.stdout).contains("made-by-the-command"));
}

#[test]
fn agent_review_asks_the_same_model_as_a_reviewer_and_logs_its_verdict() {
    let w = World::new();
    reviewed_hello(&w);
    let (port, server) = anthropic_server(reviewed_read("reading a project file is harmless", 10));
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "read hello.txt"],
        &[("CHOCK_TEST_KEY", "sk-test-review-key-12345")],
    );
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

/// `--json` streams in the log's order: a command's `decision` is sent when the session has decided
/// it, before it runs — for a background command too, whose handle is only given once the session
/// let it run. A refused background command is answered as a refusal, never as "started".
#[test]
fn json_decisions_stream_before_the_act_even_in_the_background() {
    let script = |expect: &str| {
        format!(
            r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "sleep 1; echo late", background = true }}
expect = {expect}

[[turn]]
text = "started it"
"#
        )
    };
    let cases = [
        (
            None,
            "{ is_error = false, contains = \"started in the background\" }",
            true,
        ),
        (
            Some("[[rule]]\naction = \"exec.system.sh\"\ndecision = \"deny\"\n"),
            "{ is_error = true, contains = \"refused\" }",
            false,
        ),
    ];
    for (policy, expect, allowed) in cases {
        let w = World::new();
        if let Some(policy) = policy {
            w.write("chock.toml", policy);
        }
        let provider = w.script(&script(expect));
        let out = w.chock(&["run", "--json", "--provider", &provider, "start a job"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let events: Vec<serde_json::Value> = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is JSON"))
            .collect();
        let position = |kind: &str| {
            events
                .iter()
                .position(|e| e["type"] == kind && e["call_id"] == "play_1_1")
                .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
        };
        assert!(
            position("tool_call") < position("decision")
                && position("decision") < position("tool_result"),
            "{events:?}"
        );
        assert_eq!(events[position("decision")]["allowed"], allowed);
        // The call's record in the log ends with exactly one result (the session writes it, refused or run).
        let results = w
            .events()
            .iter()
            .filter(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("play_1_1"))
            .count();
        assert_eq!(results, 1);
    }
}

/// Runs a session that writes `docs/NEW.md` and asks for the apply, which the table says to ask a
/// person about; at the terminal prompt `meanwhile` runs (with the session's directory), then `answer`
/// is typed. Returns the world, the prompt as the person saw it, and stdout.
fn apply_with_terminal_answer(
    expect: &str,
    meanwhile: impl FnOnce(&std::path::Path),
    answer: &str,
) -> (World, String, String) {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"ask\"\n",
    ));
    let provider = w.script(&format!(
        r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = {{ path = "docs/NEW.md", content = "new\n" }}

[[turn]]
[[turn.call]]
tool = "request_action"
input = {{ action = "workspace.apply", reason = "the docs are written" }}
expect = {expect}

[[turn]]
text = "done"
"#
    ));
    let (mut master, slave) = open_pty();
    let mut child = w
        .command(&["run", "--provider", &provider, "write docs and apply them"])
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let mut buf = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("[n] no > ") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the prompt never came: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.push(buf[0]);
    }
    let seen = String::from_utf8_lossy(&seen).into_owned();
    meanwhile(&w.session());
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
    (w, seen, text(&out.stdout))
}

/// The 64-hex digest named in an apply question.
fn digest_in(prompt: &str) -> String {
    let at = prompt.find("digest ").expect("the question names a digest") + "digest ".len();
    let digest: String = prompt[at..].chars().take(64).collect();
    assert!(
        digest.chars().all(|c| c.is_ascii_hexdigit()) && digest.len() == 64,
        "{prompt}"
    );
    digest
}

#[test]
fn an_approved_apply_lands_exactly_what_the_person_was_shown() {
    let (w, prompt, _) = apply_with_terminal_answer(
        r#"{ is_error = false, contains = "applied as" }"#,
        |_| {},
        "y",
    );
    assert!(
        prompt.contains("approval needed for workspace.apply"),
        "{prompt}"
    );
    assert!(
        prompt.contains("docs/NEW.md | 1 +"),
        "the summary: {prompt}"
    );
    assert!(prompt.contains("1 file changed"), "{prompt}");
    let digest = digest_in(&prompt);
    assert_eq!(
        std::fs::read_to_string(w.project.join("docs/NEW.md")).unwrap(),
        "new\n"
    );
    let events = w.events();
    let apply = events
        .iter()
        .find(|(k, _, _)| k == "workspace.apply")
        .expect("the apply is logged");
    assert_eq!(apply.2["digest"], digest.as_str(), "{}", apply.2);
    assert_decisions_precede_results(&events);
}

#[test]
fn a_workspace_changed_while_the_person_decided_is_refused_and_the_project_untouched() {
    let (w, prompt, _) = apply_with_terminal_answer(
        r#"{ is_error = true, contains = "workspace changed while you waited" }"#,
        |session| {
            // What a command still running in the sandbox would do: write into the workspace.
            std::fs::write(session.join("workspace/upper/sneaked.txt"), "sneaked\n").unwrap();
        },
        "y",
    );
    assert!(prompt.contains("docs/NEW.md"), "{prompt}");
    assert!(!prompt.contains("sneaked"), "{prompt}");
    assert!(!w.project.join("docs/NEW.md").exists(), "nothing applied");
    assert!(
        !w.project.join("sneaked.txt").exists(),
        "nothing slipped in"
    );
    let events = w.events();
    assert!(
        !events.iter().any(|(k, _, _)| k == "workspace.apply"),
        "no apply logged"
    );
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(
        text(&diff.stdout).contains("sneaked.txt"),
        "the work stays in the session"
    );
}

/// The hole this closes: with no chock.toml in the project nothing is bound at that path, so a
/// command creates one granting itself everything; the agent's own apply must not carry it home,
/// even when the organisation lets every apply through without a question.
#[test]
fn request_action_never_applies_a_policy_file_a_command_created() {
    let w = World::with_git_project();
    let org = w.base.join("org.toml");
    std::fs::write(
        &org,
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "printf '[[rule]]\\naction = \"net.connect.*\"\\ndecision = \"allow\"\\n' > chock.toml && echo '# note' >> calc.sh" }
expect = { is_error = false }

[[turn]]
[[turn.call]]
tool = "request_action"
input = { action = "workspace.apply", reason = "done" }
expect = { is_error = true, contains = "your changes include chock.toml, Chock's own policy" }

[[turn]]
text = "Left it for the person."
"#,
    );
    let out = w.chock_with_env(
        &["run", "--provider", &provider, "widen the policy"],
        &[("CHOCK_ORG_POLICY", org.to_str().unwrap())],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        !w.project.join("chock.toml").exists(),
        "the policy file never landed"
    );
    assert!(
        !std::fs::read_to_string(w.project.join("calc.sh"))
            .unwrap()
            .contains("# note"),
        "nothing of the apply landed"
    );
    let events = w.events();
    assert!(events.iter().all(|(k, _, _)| k != "workspace.apply"));
    let refusal = events
        .iter()
        .find(|(k, c, d)| {
            k == "decision" && c.as_deref() == Some("play_2_1") && d["allowed"] == false
        })
        .expect("the refusal is logged as a decision");
    assert!(
        refusal.2["decided_by"]
            .as_str()
            .unwrap()
            .contains("Chock's own policy"),
        "{:?}",
        refusal.2
    );
    // The person's review shows it, marked.
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(
        text(&diff.stdout).contains("!! chock.toml: this changes Chock's own policy"),
        "{}",
        text(&diff.stdout)
    );
}
