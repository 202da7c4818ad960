//! Round trip: real sessions run through the binary write as many event kinds as they can, and
//! every line they write must fit its kind's type exactly (`EventData::parse_exact`): a writer
//! cannot put a field in the log that docs/log.md does not document, nor leave out one it says is
//! there. The test names every line that does not fit, and says which kinds it covered.

mod run_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use chock_log::{EventData, EventKind};
use run_support::*;

fn ok(what: &str, out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A loopback HTTP server answering every request with a short page; returns its port.
fn http_server() -> u16 {
    chock_test_support::model::page_server(
        Some("text/html"),
        "<html><body><p>a page</p></body></html>",
    )
}

/// The demo in a plain directory, its work adopted.
fn demo_adopted() -> (World, Vec<PathBuf>) {
    let w = World::new();
    w.write("README.md", "a project\n");
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"workspace.adopt\"\ndecision = \"allow\"\n",
    );
    ok(
        "demo",
        &w.chock(&["run", "--provider", "demo", "add a note"]),
    );
    let id = w.session_id();
    ok("adopt", &w.chock(&["workspace", "adopt", &id]));
    let sessions = w.sessions();
    (w, sessions)
}

/// A recording that calls most tools, under a table that puts the first read to the recorded
/// reviewer and lets a fetch and a command's connection reach a loopback server; then the work
/// is applied and undone, after a crash left a torn line at the end of the log.
fn scripted_everything() -> (World, Vec<PathBuf>) {
    let port = http_server();
    let w = World::with_git_project_and_policy(Some(&format!(
        "[[rule]]\naction = \"fs.read\"\ndecision = \"agent_review\"\n\n\
         [[rule]]\naction = \"net.fetch.1.0.0.127\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n"
    )));
    let curl = if on_path("curl") {
        format!(
            "[[turn.call]]\ntool = \"run_command\"\ninput = {{ command = \"curl -sf --max-time 20 http://127.0.0.1:{port}/\" }}\n"
        )
    } else {
        String::new()
    };
    let provider = w.script(&format!(
        r#"
review = '{{"allow": true, "reasons": "reading is harmless"}}'

[[turn]]
text = "Looking first."
[[turn.call]]
tool = "set_title"
input = {{ title = "everything" }}
[[turn.call]]
tool = "update_plan"
input = {{ steps = [{{ step = "look", status = "in_progress" }}, {{ step = "change" }}] }}
[[turn.call]]
tool = "read_file"
input = {{ path = "calc.sh" }}

[[turn]]
[[turn.call]]
tool = "edit_file"
input = {{ path = "calc.sh", old = "echo $(( $1 - $2 ))", new = "echo $(( $1 + $2 ))" }}
[[turn.call]]
tool = "write_file"
input = {{ path = "notes.txt", content = "notes\n" }}

[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "sh test.sh" }}
[[turn.call]]
tool = "run_command"
input = {{ command = "echo from-the-background", background = true }}
{curl}
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "sleep 1" }}
[[turn.call]]
tool = "fetch_url"
input = {{ url = "http://127.0.0.1:{port}/" }}
[[turn.call]]
tool = "web_search"
input = {{ query = "chock" }}

[[turn]]
[[turn.call]]
tool = "ask_user"
input = {{ question = "may I?" }}
[[turn.call]]
tool = "restrict_self"
input = {{ action = "git.push", decision = "deny" }}
[[turn.call]]
tool = "restrict_self"
input = {{ action = "git.push", decision = "allow" }}

[[turn]]
text = "Done."
"#
    ));
    ok(
        "scripted run",
        &w.chock(&["run", "--provider", &provider, "do everything"]),
    );
    let id = w.session_id();
    // A crash mid-write: the next writer (apply) sets the torn line aside and notes it.
    let log = w.session().join("log.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(b"{\"seq\":999,\"ts\":\"20");
    std::fs::write(&log, bytes).unwrap();
    let apply = w.chock(&["apply", &id]);
    ok("apply", &apply);
    let apply_id = format!("{id}.1");
    assert!(
        text(&apply.stdout).contains(&apply_id),
        "{}",
        text(&apply.stdout)
    );
    ok("undo", &w.chock(&["undo", &apply_id]));
    let sessions = w.sessions();
    (w, sessions)
}

/// `chock exec`: a command that runs, one the table denies, one with no class.
fn execs() -> (World, Vec<PathBuf>) {
    let w = World::new();
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"exec.system.touch\"\ndecision = \"deny\"\n",
    );
    ok("exec true", &w.chock(&["exec", "--", "true"]));
    let denied = w.chock(&["exec", "--", "touch", "x"]);
    assert_eq!(denied.status.code(), Some(123), "{}", text(&denied.stderr));
    // Not on the sandbox's PATH: no class, so `exec.unparsed`, asked, and nobody answers.
    let unclassified = w.chock(&["exec", "--", "no-such-program-here"]);
    assert_eq!(
        unclassified.status.code(),
        Some(123),
        "{}",
        text(&unclassified.stderr)
    );
    let sessions = w.sessions();
    (w, sessions)
}

/// A model that fails once with an overloaded error and then answers: a retry.
fn retried() -> (World, Vec<PathBuf>) {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        Reply::Error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        ),
        reply("msg_1", 10, "Nothing to do.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    ok(
        "retried run",
        &w.chock_with_env(
            &["run", "--provider", "fake", "say hi"],
            &[("CHOCK_TEST_KEY", "sk-test-retry-key-12345")],
        ),
    );
    server.join().unwrap();
    let sessions = w.sessions();
    (w, sessions)
}

/// The lines of a session that do not fit their type, by kind: `session seq N: why` each.
fn misfits(session: &Path, by_kind: &mut BTreeMap<&'static str, Vec<String>>) {
    for event in chock_log::read_events(session).unwrap() {
        if let Err(err) = EventData::parse_exact(event.kind, &event.data) {
            let mut why = err.to_string();
            if why.chars().count() > 400 {
                why = why.chars().take(400).collect::<String>() + "…";
            }
            by_kind
                .entry(event.kind.as_str())
                .or_default()
                .push(format!(
                    "{} seq {}: {why}",
                    session.file_name().unwrap().to_string_lossy(),
                    event.seq
                ));
        }
    }
}

#[test]
fn every_line_real_sessions_write_fits_its_type() {
    let runs = [demo_adopted(), scripted_everything(), execs(), retried()];
    let mut by_kind = BTreeMap::new();
    let mut written = BTreeSet::new();
    let mut variants = BTreeSet::new();
    for (_world, sessions) in &runs {
        for session in sessions {
            for event in chock_log::read_events(session).unwrap() {
                written.insert(event.kind.as_str());
                for tag in ["about", "stage", "phase", "outcome"] {
                    if let Some(variant) = event.data.get(tag).and_then(|v| v.as_str()) {
                        variants.insert(format!("{}:{variant}", event.kind));
                    }
                }
            }
            misfits(session, &mut by_kind);
        }
    }
    let fit: Vec<&&str> = written
        .iter()
        .filter(|k| !by_kind.contains_key(*k))
        .collect();
    let unwritten: Vec<&str> = EventKind::ALL
        .iter()
        .map(|k| k.as_str())
        .filter(|k| !written.contains(k))
        .collect();
    eprintln!("kinds written: {written:?}");
    eprintln!("variants written: {variants:?}");
    eprintln!("kinds whose every line fits its type: {fit:?}");
    eprintln!("kinds no session here writes: {unwritten:?}");
    let mut report = String::new();
    for (kind, lines) in &by_kind {
        report.push_str(&format!(
            "`{kind}`: {} lines do not fit, e.g.\n",
            lines.len()
        ));
        for line in lines.iter().take(3) {
            report.push_str(&format!("    {line}\n"));
        }
    }
    assert!(
        by_kind.is_empty(),
        "lines that do not fit their type:\n{report}"
    );
}
