//! `chock run --resume SESSION`: a session that ended goes on, through the binary, with its
//! conversation rebuilt from the log and its workspace as it was.

mod run_support;

use run_support::World;

#[test]
fn a_finished_session_goes_on_with_a_follow_up_in_the_same_log_and_workspace() {
    let w = World::with_git_project();
    let script = w.script(
        r#"
[[turn]]
text = "writing a note"
[[turn.call]]
tool = "write_file"
input = { path = "note.txt", content = "first\n" }

[[turn]]
text = "first task done"

[[turn]]
text = "the follow-up sees the note"
[[turn.call]]
tool = "read_file"
input = { path = "note.txt" }
expect = { contains = "first" }

[[turn]]
text = "second task done"
"#,
    );
    let first = w.chock(&["run", "--provider", &script, "write a note"]);
    assert!(
        first.status.success(),
        "{}",
        run_support::text(&first.stderr)
    );
    let id = w.session_id();
    let second = w.chock(&[
        "run",
        "--provider",
        &script,
        "--resume",
        &id,
        "now read it back",
    ]);
    assert!(
        second.status.success(),
        "{}{}",
        run_support::text(&second.stdout),
        run_support::text(&second.stderr)
    );
    assert_eq!(w.sessions().len(), 1, "no second session was made");
    let events = w.events();
    let inputs: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(kind, _, _)| kind == "turn.start")
        .filter_map(|(_, _, data)| data.get("input"))
        .collect();
    assert_eq!(inputs, ["write a note", "now read it back"]);
    let ends = events
        .iter()
        .filter(|(kind, _, _)| kind == "session.end")
        .count();
    assert_eq!(ends, 2, "each run closes its part of the record");
    w.assert_log_verifies();
}

#[test]
fn resuming_an_unknown_session_is_bad_input() {
    let w = World::with_git_project();
    let out = w.chock(&[
        "run",
        "--provider",
        "demo",
        "--resume",
        "20990101T000000Z-nope",
        "go",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        run_support::text(&out.stderr)
    );
}
