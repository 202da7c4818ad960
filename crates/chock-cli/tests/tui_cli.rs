//! Bare `chock` at a real terminal (tmux, on its own socket in the world): the task asked for, an
//! approval answered in place, one hunk of two selected on the diff screen and applied (the real
//! project file checked on disk) and undone, a follow-up whose long command is interrupted with
//! Ctrl-C while the window is resized, a second Ctrl-C to leave, and the transcript left in the
//! scrollback.

mod run_support;

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use run_support::*;

/// A tmux server of the world's own (its socket in the world), running one 80×24 shell.
struct Tmux<'w> {
    w: &'w World,
    socket: PathBuf,
}

impl<'w> Tmux<'w> {
    fn start(w: &'w World) -> Tmux<'w> {
        let t = Tmux {
            w,
            socket: w.base.join("tmux.sock"),
        };
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "80",
            "-y",
            "24",
            "env",
            "PS1=$ ",
            "sh",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        t
    }

    fn run(&self, args: &[&str]) -> Output {
        self.w
            .program("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    /// The screen now.
    fn screen(&self) -> String {
        text(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout)
    }

    /// The scrollback and the screen.
    fn history(&self) -> String {
        text(
            &self
                .run(&["capture-pane", "-p", "-t", "t", "-S", "-"])
                .stdout,
        )
    }

    /// Waits until the screen shows `what`.
    fn wait_for(&self, what: &str) -> String {
        self.wait_until(what, |screen| screen.contains(what))
    }

    /// Waits until `done` says yes to the screen (`what` names it in the failure).
    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "waited 60 s for {what:?}; the screen:\n{screen}\nthe history:\n{}",
                self.history()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

const SCRIPT: &str = r#"
[[turn]]
text = "I'll greet from the sandbox."
[[turn.call]]
tool = "run_command"
input = { command = "echo hello-from-the-sandbox" }
expect = { is_error = false }

[[turn]]
text = "Now both ends of notes.txt change."
[[turn.call]]
tool = "write_file"
input = { path = "notes.txt", content = "TOP CHANGED\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\nBOTTOM CHANGED\n" }
expect = { is_error = false }

[[turn]]
text = "First task done."

[[turn]]
text = "This one takes a while."
[[turn.call]]
tool = "run_command"
input = { command = "echo long-start; sleep 60; echo long-end", timeout_secs = 120 }

[[turn]]
text = "never reached"
"#;

const NOTES: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n";

#[test]
#[cfg_attr(
    not(feature = "tmux"),
    ignore = "needs tmux: the `tmux` feature (.ci/run tests with --all-features)"
)]
fn bare_chock_at_a_terminal_asks_applies_one_hunk_interrupts_and_leaves_the_transcript() {
    if !chock_test_support::requires(
        on_path("tmux"),
        "tmux is not installed (apt-get install tmux, as .ci/run does)",
    ) {
        return;
    }
    let w = World::with_git();
    w.write("notes.txt", NOTES);
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"exec.*\"\ndecision = \"ask\"\n",
    );
    w.git(&["add", "-A"]);
    w.git(&["commit", "-q", "-m", "start"]);
    let provider = w.script(SCRIPT);
    w.config_toml(&format!("default_provider = \"{provider}\"\n"));
    let t = Tmux::start(&w);
    t.wait_for("$");
    t.keys(&[CHOCK, "Enter"]);
    t.wait_for("What should chock do?");
    t.keys(&["do the work", "Enter"]);

    // The approval, in place: the act, its exact detail, the three answers (drawn once it has been
    // up a quiet moment: keys before that answer nothing).
    let asked = t.wait_until("the question with its answer keys", |s| {
        s.contains("chock asks") && s.contains("[y] yes once")
    });
    assert!(asked.contains("echo hello-from-the-sandbox"), "{asked}");
    assert!(asked.contains("[y] yes once"), "{asked}");
    assert!(asked.contains("[a] yes for this session"), "{asked}");
    t.keys(&["y"]);
    t.wait_for("task ended");
    let screen = t.screen();
    assert!(screen.contains("allowed once by tui"), "{screen}");
    assert!(screen.contains("hello-from-the-sandbox"), "{screen}");

    // The diff: two hunks in notes.txt; the second (the bottom line) is selected and applied.
    t.keys(&["/diff", "Enter"]);
    t.wait_for("notes.txt");
    // The cursor on the file previews both hunks; on a hunk, that hunk alone.
    const BOTTOM: &str = "@@ -10,4 +10,4 @@ e";
    t.wait_until("both hunks", |s| {
        s.contains("+TOP CHANGED") && s.contains(BOTTOM)
    });
    t.keys(&["Down"]);
    t.wait_until("the first hunk", |s| {
        s.contains("+TOP CHANGED") && !s.contains(BOTTOM)
    });
    t.keys(&["Down"]);
    t.wait_until("the second hunk", |s| {
        s.contains("+BOTTOM CHANGED") && !s.contains("+TOP")
    });
    t.keys(&["Space"]);
    // Enter applies only once the digest of exactly this selection is shown (it pins the apply).
    let selected = t.wait_until("the selection's digest", |s| {
        s.lines().any(|l| {
            l.strip_prefix("digest ").is_some_and(|d| {
                d.trim().len() == 64 && d.trim().bytes().all(|b| b.is_ascii_hexdigit())
            })
        })
    });
    assert!(
        selected.contains("[~]"),
        "the file is partly selected: {selected}"
    );
    t.keys(&["Enter"]);
    let asked = t.wait_for("workspace.apply");
    assert!(asked.contains("chock asks"), "{asked}");
    t.wait_for("[y] yes once");
    t.keys(&["y"]);
    t.wait_for("applied as");
    let notes = w.read("notes.txt");
    assert!(notes.contains("BOTTOM CHANGED"), "{notes}");
    assert!(
        !notes.contains("TOP CHANGED"),
        "only the selected hunk lands: {notes}"
    );
    // Undo puts the project back, asked and decided like the apply.
    t.keys(&["u"]);
    t.wait_for("chock asks");
    t.wait_for("[y] yes once");
    t.keys(&["y"]);
    t.wait_for("undone as");
    assert_eq!(w.read("notes.txt"), NOTES);
    t.keys(&["Escape"]);

    // A follow-up in the same session; its long command is interrupted while the window resizes.
    t.wait_for(" idle ");
    t.keys(&["now wait", "Enter"]);
    t.wait_for("chock asks");
    t.wait_for("[y] yes once");
    t.keys(&["y"]);
    t.wait_for("long-start");
    let started = Instant::now();
    assert!(
        t.run(&["resize-window", "-t", "t", "-x", "100", "-y", "30"])
            .status
            .success()
    );
    t.wait_for("working");
    assert!(
        t.run(&["resize-window", "-t", "t", "-x", "80", "-y", "24"])
            .status
            .success()
    );
    t.keys(&["C-c"]);
    t.wait_for("interrupted");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the sleep was killed, not waited for"
    );
    t.keys(&["C-c"]);
    t.wait_for("session 20260101T000000Z-000001 ended");
    // The shell's prompt is back, below the transcript.
    t.wait_until("the shell's prompt", |screen| {
        screen
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::trim)
            == Some("$")
    });

    // What stays: the conversation, in the terminal's own scrollback, after chock left.
    let history = t.history();
    for line in [
        "› do the work",
        "→ run_command command=echo hello-from-the-sandbox",
        "q-1 exec.",
        "allowed once by tui",
        "I'll greet from the sandbox.",
        "chock: applied as",
        "chock: undone as",
        "› now wait",
        "long-start",
        "── interrupted",
    ] {
        assert!(
            history.contains(line),
            "{line:?} is not in the scrollback:\n{history}"
        );
    }
    assert!(
        !history.contains("\n    long-end"),
        "the command was killed before it printed its end:\n{history}"
    );
    let kinds: Vec<String> = w.events().into_iter().map(|(k, _, _)| k).collect();
    assert!(kinds.contains(&"workspace.apply".to_string()), "{kinds:?}");
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("session.end"),
        "{kinds:?}"
    );
}

/// `echo TASK | chock` and `chock -- TASK` stay as they were: no interface without a terminal.
#[test]
fn a_piped_task_is_still_a_plain_run() {
    let w = World::with_git_project();
    let provider = w.script("[[turn]]\ntext = \"done\"\n");
    w.config_toml(&format!("default_provider = \"{provider}\"\n"));
    let piped = w.chock_with_input(&[], b"say done");
    assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
    assert!(
        text(&piped.stdout).contains("── session"),
        "{}",
        text(&piped.stdout)
    );
    let words = w.chock(&["--", "say", "done"]);
    assert_eq!(words.status.code(), Some(0), "{}", text(&words.stderr));
    assert!(
        text(&words.stdout).contains("── session"),
        "{}",
        text(&words.stdout)
    );
}
