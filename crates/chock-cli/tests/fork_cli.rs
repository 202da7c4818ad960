//! `chock sessions fork SESSION --turn N` through the binary, in the hermetic world: it prints the
//! new session's id, the fork is taken up with `chock run --resume`, and bad input is refused by
//! name (exit 2) with nothing made.

mod run_support;

use run_support::{World, text};

const THREE_TURNS: &str = r#"
[[turn]]
text = "turn one writes"
[[turn.call]]
tool = "write_file"
input = { path = "a.txt", content = "one\n" }

[[turn]]
text = "turn two rewrites"
[[turn.call]]
tool = "write_file"
input = { path = "a.txt", content = "two\n" }

[[turn]]
text = "done"
"#;

/// The fork's model: its conversation holds turn 1's reply, so the player plays from its second
/// turn on; the read must see turn 1's file.
const FORK_GOES_ON: &str = r#"
[[turn]]
text = "never played: the fork already has this reply"

[[turn]]
text = "the fork reads what turn one left"
[[turn.call]]
tool = "read_file"
input = { path = "a.txt" }
expect = { contains = "one" }

[[turn]]
text = "fork done"
"#;

#[test]
fn a_fork_prints_its_id_and_goes_on_from_the_turn() {
    let w = World::new();
    let script = w.script(THREE_TURNS);
    let run = w.chock(&["run", "--provider", &script, "write a"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let parent = w.session_id();

    let out = w.chock(&["sessions", "fork", &parent, "--turn", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = format!(
        "status: {:?}\nstdout:\n{}stderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    w.settings()
        .bind(|| insta::assert_snapshot!("fork_prints_the_new_id", shown));
    let fork = text(&out.stdout).trim().to_string();
    assert_ne!(fork, parent);

    let goes_on = w.script(FORK_GOES_ON);
    let resumed = w.chock(&["run", "--provider", &goes_on, "--resume", &fork, "go on"]);
    assert!(
        resumed.status.success(),
        "{}{}",
        text(&resumed.stdout),
        text(&resumed.stderr)
    );
    let verify = w.chock(&["sessions", "verify", &fork]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stdout));
    let diff = w.chock(&["diff", &fork, "--name-only"]);
    assert_eq!(text(&diff.stdout), "a.txt\n");
    let parent_diff = w.chock(&["diff", &parent]);
    assert!(text(&parent_diff.stdout).contains("+two"));
}

#[test]
fn forking_a_turn_or_session_that_is_not_there_is_bad_input() {
    let w = World::new();
    let script = w.script(THREE_TURNS);
    let run = w.chock(&["run", "--provider", &script, "write a"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let parent = w.session_id();
    let mut shown = String::new();
    for args in [
        vec!["sessions", "fork", &parent, "--turn", "7"],
        vec!["sessions", "fork", "20990101T000000Z-000000", "--turn", "1"],
        vec!["sessions", "fork", &parent],
    ] {
        let out = w.chock(&args);
        shown.push_str(&format!(
            "$ chock {}\nstatus: {:?}\nstdout: {}\nstderr:\n{}\n",
            args.join(" "),
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr)
        ));
    }
    w.settings()
        .bind(|| insta::assert_snapshot!("fork_bad_input", shown));
    assert_eq!(w.sessions().len(), 1, "nothing was made");
}
