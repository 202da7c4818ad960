//! The person at the terminal, as an [`Answerer`].
//!
//! The prompt goes to standard error (standard output may be a JSON stream) and the answer is read from
//! standard input, which must be a terminal: a pipe is not a person. Only one question is on screen at a
//! time. End of input is "no answer", which the broker turns into a refusal.
//!
//! This is the one terminal prompt: `chock run` puts the agent's acts to it, and `chock exec` puts a
//! command's act and its asked connections to it (over `/dev/tty`, drawn [`PROMPT_RESET`] first,
//! because there the command's raw output shares the screen).
//!
//! What it shows of a question that came from outside (an action, a reason, the agent's text) goes
//! through the one escaper, [`chock_protocol::text`], which every other surface uses too. A crate of
//! its own so that asking a person (`chock apply`, `chock exec`, `chock attach`) does not depend on
//! the agent's loop.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

use std::io::{BufRead, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use chock_decide::broker::{Answer, AnswerFuture, Answerer, Question, QuestionKind, Role};
use chock_protocol::log::AnswerKind;
use chock_protocol::text::{self, Layout};

/// The line source answers come from, the sink prompts go to, and the terminal the line source
/// reads (whose echo a secret's answer is read without), when it is one.
type Console = Mutex<(
    Box<dyn BufRead + Send>,
    Box<dyn Write + Send>,
    Option<Box<dyn AsFd + Send>>,
)>;

/// What a prompt is drawn after when other programs' raw output reaches the same terminal
/// ([`TerminalAnswerer::over_raw_output`]), so that nothing written before can overwrite, hide or
/// reword the question. In order:
///
/// - `CAN` (0x18) aborts an escape or control sequence in progress (a `CSI` waiting for its final
///   byte would eat the question's first characters) and, in DEC-style parsers, an `OSC`, `DCS`,
///   `APC`, `PM` or `SOS` string too; `ESC \` (`ST`) then ends such a string where `CAN` does not
///   (an unterminated `ESC ]0;` would otherwise swallow the whole question into the window title).
/// - `ESC 7`, `CSI ? 1049 l` leaves the alternate screen, so the question is on the screen the
///   person's history is on, not on a screen the program may clear or repaint later. Leaving
///   restores the cursor saved when the screen was entered, and some terminals restore a saved
///   cursor even when no alternate screen is in use (home, if none was saved); the `ESC 7` just
///   before makes that restore put the cursor back where it already is.
/// - `CSI ! p` (`DECSTR`, soft reset) restores the modes that change how text lands: insert mode,
///   origin mode, the scroll margins, the character sets and `SGR`; it keeps the screen and the
///   cursor's place. Then, for terminals without it (tmux, screen) or whose soft reset leaves some:
///   `SGR 0` (no conceal, no same-colour-on-same-colour, no blink), `ESC ( B` and `SI` (ASCII in
///   use, not line drawing), `CSI 4 l` (replace, not insert), `CSI ? 6 l` (absolute cursor),
///   `CSI ? 69 l` (no left/right margins), `CSI ? 7 h` (autowrap on, whatever the soft reset
///   restored it to: a long host must wrap onto the next line, never be cut at the right margin),
///   `CSI ? 25 h` (cursor visible) and `CSI ? 2026 l` (end a synchronized update, which would
///   freeze what is shown).
/// - `ESC 7`, `CSI r`, `ESC 8`: the scroll region becomes the whole screen (a region ending above
///   the cursor would make every line of the question overwrite the same line), with the cursor
///   kept where the output left it (`CSI r` alone moves it home).
/// - `CR LF` and `CSI J`: the question starts at column one of a fresh line, and whatever the
///   program placed below the cursor (a forged answer line, text meant to sit beside the question)
///   is erased.
///
/// Not a full reset (`RIS`): that would clear the screen and take away what the person was reading.
/// Text above the question stays; the question is always the last thing drawn, with the cursor at
/// its end, and nothing else is drawn while it is open (the caller holds the program's output
/// back).
pub const PROMPT_RESET: &str = concat!(
    "\u{18}\u{1b}\\",
    "\u{1b}7\u{1b}[?1049l",
    "\u{1b}[!p\u{1b}[0m\u{1b}(B\u{0f}\u{1b}[4l\u{1b}[?6l\u{1b}[?69l\u{1b}[?7h\u{1b}[?25h\u{1b}[?2026l",
    "\u{1b}7\u{1b}[r\u{1b}8",
    "\r\n\u{1b}[J",
);

/// Reads answers from a line source and writes prompts to a sink (stdin/stderr for the CLI).
pub struct TerminalAnswerer {
    io: Arc<Console>,
    reset: bool,
}

impl std::fmt::Debug for TerminalAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TerminalAnswerer")
    }
}

impl TerminalAnswerer {
    /// The process's own terminal, if standard input is one; `None` otherwise (nobody to ask).
    pub fn stdin_if_terminal() -> Option<Self> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            return None;
        }
        Some(
            Self::new(
                Box::new(std::io::BufReader::new(std::io::stdin())),
                Box::new(std::io::stderr()),
            )
            .reading_terminal(std::io::stdin()),
        )
    }

    /// Says that the line source reads the terminal `tty`: a secret's answer (a password) is then
    /// read with `tty`'s echo off, restored once the line is read.
    #[must_use]
    pub fn reading_terminal(self, tty: impl AsFd + Send + 'static) -> Self {
        if let Ok(mut io) = self.io.lock() {
            io.2 = Some(Box::new(tty));
        }
        self
    }

    /// An answerer over any line source and prompt sink.
    pub fn new(input: Box<dyn BufRead + Send>, output: Box<dyn Write + Send>) -> Self {
        Self {
            io: Arc::new(Mutex::new((input, output, None))),
            reset: false,
        }
    }

    /// For a terminal that other programs' raw output reaches too (`chock exec`): every question is
    /// drawn after [`PROMPT_RESET`]. The caller must hold that output back while a question is open.
    #[must_use]
    pub fn over_raw_output(mut self) -> Self {
        self.reset = true;
        self
    }

    /// Puts `question` and waits for the answer on this thread (for callers with no async runtime);
    /// `None` when nobody answered. One question at a time, as [`Answerer::answer`].
    pub fn ask_now(&self, question: &Question) -> Option<Answer> {
        ask_blocking(&self.io, question, self.reset)
    }
}

/// The question's text with its own lines kept, each indented under the question's first; every
/// other control, bidi or invisible character escaped by the one escaper
/// ([`chock_protocol::text`]), so the person approves exactly what runs.
fn question_block(text: &str) -> String {
    text::escaped(text, Layout::Block).replace('\n', "\n  ")
}

fn prompt_text(q: &Question) -> String {
    let mut s = String::new();
    match q.kind {
        QuestionKind::Approval => {
            s.push_str("\nchock: approval needed");
            if let Some(action) = &q.action {
                s.push_str(&format!(" for {}", text::line(action)));
            }
            if let Some(by) = &q.decided_by {
                s.push_str(&format!(" ({})", text::line(by)));
            }
            for line in &q.context {
                s.push_str(&format!("\n  {}", text::line(line)));
            }
            s.push_str(&format!("\n  {}\n", text::line(&q.text)));
            if let Some(r) = &q.reviewer {
                s.push_str(&format!(
                    "  reviewer model: {} — {}\n",
                    if r.allow { "allow" } else { "deny" },
                    text::line(&r.reasons)
                ));
            }
            s.push_str(&format!("  {} > ", approval_keys(q)));
        }
        QuestionKind::Question => {
            let who = if q.secret {
                "git asks (not shown as typed)"
            } else {
                "the agent asks"
            };
            s.push_str(&format!(
                "\nchock: {who}:\n  {}\n  your answer > ",
                question_block(&q.text)
            ));
        }
    }
    s
}

/// The answer keys `q` takes ([`Question::answers`]: an apply is never allowed for the session).
fn approval_keys(q: &Question) -> String {
    let offered = q.answers();
    [
        (AnswerKind::AllowOnce, "[y] yes once"),
        (
            AnswerKind::AllowSession,
            "[a] yes to this exact act for the session",
        ),
        (AnswerKind::Deny, "[n] no"),
    ]
    .iter()
    .filter(|(a, _)| offered.contains(a))
    .map(|(_, words)| *words)
    .collect::<Vec<_>>()
    .join("  ")
}

/// Reads an approval to `q` from `line`; `None` (an answer it does not take) asks again.
fn parse_approval(q: &Question, line: &str) -> Option<Answer> {
    let answer = parse_any_approval(line)?;
    q.answers().contains(&answer.kind()).then_some(answer)
}

fn parse_any_approval(line: &str) -> Option<Answer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
        "a" | "always" | "s" | "session" => Some(Answer::AllowSession),
        "n" | "no" => Some(Answer::Deny {
            reasons: String::new(),
        }),
        _ => None,
    }
}

fn ask_blocking(io: &Console, q: &Question, reset: bool) -> Option<Answer> {
    let mut guard = io.lock().ok()?;
    let (input, output, tty) = &mut *guard;
    let mut prompt = prompt_text(q);
    if reset {
        prompt.insert_str(0, PROMPT_RESET);
    }
    loop {
        output.write_all(prompt.as_bytes()).ok()?;
        output.flush().ok()?;
        let mut line = String::new();
        let read = if q.secret {
            // Not echoed: restored whatever the read gave. A terminal whose echo cannot be turned
            // off is not asked for a secret (it would show it).
            let tty = tty.as_ref()?;
            let was = rustix::termios::tcgetattr(tty.as_fd()).ok()?;
            let mut quiet = was.clone();
            quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
            rustix::termios::tcsetattr(tty.as_fd(), rustix::termios::OptionalActions::Now, &quiet)
                .ok()?;
            let read = input.read_line(&mut line);
            let _ = rustix::termios::tcsetattr(
                tty.as_fd(),
                rustix::termios::OptionalActions::Now,
                &was,
            );
            let _ = output.write_all(b"\n");
            read
        } else {
            input.read_line(&mut line)
        };
        if read.ok()? == 0 {
            let _ = output.write_all(b"\n");
            return None;
        }
        match q.kind {
            QuestionKind::Question => {
                return Some(Answer::Reply {
                    text: line.trim_end().to_string(),
                });
            }
            QuestionKind::Approval => {
                if let Some(answer) = parse_approval(q, &line) {
                    return Some(answer);
                }
                prompt = format!("  please answer: {} > ", approval_keys(q));
            }
        }
    }
}

impl Answerer for TerminalAnswerer {
    fn name(&self) -> String {
        "terminal".to_string()
    }

    fn role(&self) -> Role {
        Role::Human
    }

    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a> {
        let io = Arc::clone(&self.io);
        let q = question.clone();
        let reset = self.reset;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ask_blocking(&io, &q, reset))
                .await
                .ok()
                .flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(kind: QuestionKind) -> Question {
        Question {
            secret: false,
            id: "q-1".into(),
            kind,
            context: Vec::new(),
            call_id: None,
            action: Some("exec.cargo.test".into()),
            decided_by: Some("shipped default `exec.*`: ask".into()),
            text: "run `cargo test`".into(),
            reviewer: None,
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    async fn answer(input: &str, kind: QuestionKind) -> (Option<Answer>, String) {
        let sink = Sink::default();
        let t = TerminalAnswerer::new(
            Box::new(std::io::Cursor::new(input.to_string())),
            Box::new(sink.clone()),
        );
        let q = question(kind);
        let a = t.answer(&q).await;
        let shown = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        (a, shown)
    }

    #[tokio::test]
    async fn answers_are_read_and_nonsense_is_asked_again() {
        let (a, shown) = answer("maybe\na\n", QuestionKind::Approval).await;
        assert_eq!(a, Some(Answer::AllowSession));
        assert!(
            shown.contains("approval needed for exec.cargo.test"),
            "{shown}"
        );
        assert!(
            shown.contains(
                "please answer: [y] yes once  [a] yes to this exact act for the session  [n] no"
            ),
            "{shown}"
        );
        assert_eq!(
            answer("n\n", QuestionKind::Approval).await.0,
            Some(Answer::Deny {
                reasons: String::new()
            })
        );
        assert_eq!(answer("", QuestionKind::Approval).await.0, None);
        assert_eq!(
            answer("use tabs\n", QuestionKind::Question).await.0,
            Some(Answer::Reply {
                text: "use tabs".into()
            })
        );
    }

    /// An apply is offered yes once or no: `a` is not an answer to it, and is asked again.
    #[tokio::test]
    async fn an_apply_is_never_allowed_for_the_session() {
        let sink = Sink::default();
        let t = TerminalAnswerer::new(
            Box::new(std::io::Cursor::new("a\ny\n".to_string())),
            Box::new(sink.clone()),
        );
        let q = Question {
            secret: false,
            action: Some("workspace.apply".into()),
            ..question(QuestionKind::Approval)
        };
        assert_eq!(
            t.answer(&q).await,
            Some(Answer::AllowOnce {
                reasons: String::new()
            })
        );
        let shown = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(!shown.contains("[a]"), "{shown}");
        assert!(
            shown.contains("please answer: [y] yes once  [n] no"),
            "{shown}"
        );
    }

    /// Over raw output (`chock exec`), every question, and only the question, is drawn after the
    /// reset preamble; a question asked again is not (nothing else was drawn in between).
    #[test]
    fn over_raw_output_each_question_starts_with_the_reset() {
        let sink = Sink::default();
        let t = TerminalAnswerer::new(
            Box::new(std::io::Cursor::new("maybe\ny\n".to_string())),
            Box::new(sink.clone()),
        )
        .over_raw_output();
        let answer = t.ask_now(&question(QuestionKind::Approval));
        assert!(matches!(answer, Some(Answer::AllowOnce { .. })));
        let shown = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(shown.starts_with(PROMPT_RESET), "{shown:?}");
        assert_eq!(shown.matches(PROMPT_RESET).count(), 1, "{shown:?}");
        let after = &shown[PROMPT_RESET.len()..];
        assert!(
            after.starts_with("\nchock: approval needed for exec.cargo.test"),
            "{after:?}"
        );
    }

    /// What the agent wrote cannot rewrite the prompt a person decides on: an escape sequence, a
    /// carriage return, a forged newline or a bidi override is shown escaped.
    #[test]
    fn the_agents_text_cannot_forge_the_prompt() {
        let q = Question {
            secret: false,
            text: "run `rm -rf ~ \u{1b}[2K\r# harmless`\n  [y] yes once\u{202e}txt.exe".into(),
            ..question(QuestionKind::Approval)
        };
        let text = prompt_text(&q);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(text.contains("\\u{1b}[2K\\r# harmless"), "{text:?}");
        // The forged answer line stays inside the act's line: one line of the prompt offers answers.
        let offers = text
            .lines()
            .filter(|l| l.trim_start().starts_with("[y] yes once"))
            .count();
        assert_eq!(offers, 1, "{text:?}");
        let asked = Question {
            secret: false,
            text: "which one?\nA or B".into(),
            ..question(QuestionKind::Question)
        };
        assert!(prompt_text(&asked).contains("which one?\n  A or B"));
    }
}
