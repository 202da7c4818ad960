//! What reaches the person's terminal from outside goes through the one escaper: a session title
//! the model set (OSC 52 would write the clipboard, a carriage return rewrite the line), a path
//! and a changed line holding a bidi override in `chock diff` and `chock apply`; an ended session
//! that was applied afterwards still lists as ended; a reader that closes its pipe early ends a
//! command quietly.

mod run_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use run_support::*;

/// The model's title: an OSC 52 clipboard write, a carriage return that would draw over the
/// line, and a right-to-left override.
const TITLE: &str = r#"fix\u001B]52;c;ZXZpbA==\u0007\rall good\u202Etxt"#;

/// A file named to read as `harmexe.txt` and a line that reads otherwise than it is applied.
const NAME: &str = "harm\u{202e}txt.exe";
const LINE: &str = "ok = \"\u{202e}eurt\" # admin";

/// Every character the escaper names that `text` holds (none is the pass).
fn raw(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| chock_protocol::text::must_escape(c) && c != '\n')
        .collect()
}

/// A session whose model sets [`TITLE`] and writes [`NAME`] holding [`LINE`], then ends done.
fn session(w: &World) -> std::process::Output {
    let content = LINE.replace('"', "\\\"").replace('\u{202e}', "\\u202E");
    let provider = w.script(&format!(
        r#"
[[turn]]
[[turn.call]]
tool = "set_title"
input = {{ title = "{TITLE}" }}
[[turn.call]]
tool = "write_file"
input = {{ path = "harm\u202Etxt.exe", content = "{content}\n" }}
expect = {{ is_error = false }}

[[turn]]
text = "Done."
"#
    ));
    w.chock(&["run", "--provider", &provider, "write the file"])
}

#[test]
fn the_models_title_in_the_summary_cannot_drive_the_terminal() {
    let w = World::with_git_project();
    let out = session(&w);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(raw(&stdout), Vec::<char>::new(), "{stdout:?}");
    let title = stdout
        .lines()
        .find(|l| l.starts_with("title "))
        .expect("a title line");
    insta::assert_snapshot!(title, @r"title       fix\u{1b}]52;c;ZXZpbA==\u{7}\rall good\u{202e}txt");
}

#[test]
fn diff_and_apply_show_a_bidi_override_in_a_path_and_a_line_escaped() {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
    ));
    let run = session(&w);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let id = w.session_id();

    let names = w.chock(&["diff", &id, "--name-only"]);
    let names = text(&names.stdout);
    assert_eq!(raw(&names), Vec::<char>::new(), "{names:?}");
    insta::assert_snapshot!(names.trim_end(), @r"harm\u{202e}txt.exe");

    let patch = w.chock(&["diff", &id, "--color", "never"]);
    let patch = text(&patch.stdout);
    assert_eq!(raw(&patch), Vec::<char>::new(), "{patch:?}");
    assert!(
        patch.contains("+++ b/harm\\u{202e}txt.exe"),
        "the path as applied: {patch}"
    );
    assert!(
        patch.contains("+ok = \"\\u{202e}eurt\" # admin"),
        "the line as applied: {patch}"
    );

    let apply = w.chock(&["apply", &id]);
    let shown = text(&apply.stdout);
    assert_eq!(
        apply.status.code(),
        Some(0),
        "{shown}{}",
        text(&apply.stderr)
    );
    assert_eq!(raw(&shown), Vec::<char>::new(), "{shown:?}");
    assert!(shown.contains("  harm\\u{202e}txt.exe\n"), "{shown}");
    // What was applied is the file the person was shown, byte for byte.
    assert_eq!(w.read(NAME), format!("{LINE}\n"));

    // The session ended `done` before the apply, and it is still listed as ended.
    let list = w.chock(&["sessions", "list"]);
    let list = text(&list.stdout);
    let row = list
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} listed: {list}"));
    assert_eq!(
        row.split_whitespace().nth(1),
        Some("ended"),
        "an apply after session.end does not make it interrupted: {row}"
    );
}

/// `chock sessions verify S | head -2`: a reader that goes away before chock is done writing.
/// Its pipe's read end is closed before chock writes a byte, so every command meets the broken
/// pipe on its first write, whatever the timing; and once more reading one line first, as `head`
/// does. Each ends quietly with status 0, with no panic and nothing said on stderr.
#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_quietly() {
    let w = World::with_git_project();
    let run = session(&w);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let id = w.session_id();
    let commands = [
        vec!["sessions", "verify", id.as_str()],
        vec!["sessions", "show", id.as_str()],
        vec!["sessions", "list"],
        vec!["diff", id.as_str(), "--color", "never"],
        vec!["policy", "catalogue"],
    ];
    for args in &commands {
        for read_first in [false, true] {
            let mut child = w
                .command(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn chock");
            let out = child.stdout.take().expect("stdout");
            if read_first {
                let mut first = String::new();
                BufReader::new(out)
                    .read_line(&mut first)
                    .expect("a first line");
            } else {
                drop(out);
            }
            let done = child.wait_with_output().expect("chock ends");
            let stderr = text(&done.stderr);
            assert_eq!(done.status.code(), Some(0), "{args:?}: {stderr}");
            assert_eq!(stderr, "", "{args:?}: nothing said of the closed pipe");
        }
    }
}
