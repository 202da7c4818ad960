//! `chock memory list|show|edit|rm` in the hermetic world: a note the agent kept in one `chock run`
//! is listed, shown, edited in $EDITOR, found by the next run of the same project, and removed;
//! bad input is refused by name (exit 2) and a failed editor changes nothing.

mod run_support;

use run_support::{World, text};

const ALLOW_WRITE: &str = "[[rule]]\naction = \"memory.write\"\ndecision = \"allow\"\n";

/// One `chock` run: its arguments and the extra environment it gets.
type Run<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

fn transcript(w: &World, runs: &[Run<'_>]) -> String {
    let mut shown = String::new();
    for (args, vars) in runs {
        let out = w.chock_with_env(args, vars);
        shown.push_str(&format!(
            "$ chock {}\nstatus: {:?}\n{}{}\n",
            args.join(" "),
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr)
        ));
    }
    shown
}

#[test]
fn the_person_lists_shows_edits_and_removes_the_agents_notes() {
    let w = World::new();
    w.write("chock.toml", ALLOW_WRITE);
    let keep = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "memory_write"
input = { name = "tests", text = "run the tests with `make check`\n" }
expect = { is_error = false }

[[turn]]
text = "noted"
"#,
    );
    let run = w.chock(&["run", "--provider", &keep, "remember how to test"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let editor = w.base.join("edit.sh");
    std::fs::write(&editor, "printf 'and `make lint` first\\n' >> \"$1\"\n").unwrap();
    let editor = format!("sh {}", editor.display());
    let shown = transcript(
        &w,
        &[
            (&["memory", "list"], &[]),
            (&["memory", "show", "tests"], &[]),
            (&["memory", "edit", "tests"], &[("EDITOR", &editor)]),
            (&["memory", "edit", "tests"], &[("EDITOR", "false")]),
            (&["memory", "show", "tests"], &[]),
        ],
    );
    w.settings()
        .bind(|| insta::assert_snapshot!("memory_list_show_edit", shown));

    // The next session of the project finds the edited note.
    let read = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "memory_read"
input = { query = "lint" }
expect = { is_error = false, contains = "| and `make lint` first" }

[[turn]]
text = "found"
"#,
    );
    let run = w.chock(&["run", "--provider", &read, "how do I test?"]);
    assert!(
        run.status.success(),
        "{}{}",
        text(&run.stdout),
        text(&run.stderr)
    );

    let shown = transcript(
        &w,
        &[
            (&["memory", "rm", "tests"], &[]),
            (&["memory", "list"], &[]),
            (&["memory", "show", "tests"], &[]),
            (&["memory", "rm", "../chock.toml"], &[]),
            (
                &["memory", "list", "--project", "/nonexistent/project"],
                &[],
            ),
        ],
    );
    w.settings()
        .bind(|| insta::assert_snapshot!("memory_rm_and_bad_input", shown));
    assert!(w.project.join("chock.toml").exists());
}
