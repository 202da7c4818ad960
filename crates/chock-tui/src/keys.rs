//! Keys: what each key does on each screen, as a typed [`Effect`] the loop carries out. Pure, so
//! the key map is tested without a terminal.
//!
//! Main screen: Enter sends the task (the first one makes the session), a follow-up once the task
//! ended, or a `/command`; with a question open, `y` / `a` / `n` answer it (a free question takes
//! a typed reply) once it has been up with no key pressed for [`crate::state::ARM_DELAY`]: a key
//! pressed before that (typing meant for something else) answers nothing and starts the wait
//! again. Ctrl-C interrupts a running turn; a second Ctrl-C (or one when idle with
//! nothing typed) leaves. Ctrl-\ (or `/detach`) hands the running session to the daemon. Diff
//! screen: arrows move, Space selects, Enter applies the selection
//! pinned to the digest shown, `u` undoes the last apply, Esc goes back. Sessions screen: arrows,
//! Enter resumes or attaches, `f` then a turn number and Enter forks at that turn, Esc back.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use chock_protocol::log::AnswerKind;

use crate::feed::Cmd;
use crate::state::{App, Kind, Phase, Screen};
use crate::view::sessions::Target;

/// What a key asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Nothing beyond the state change already made.
    None,
    /// Send this to the session's driver.
    Send(Cmd),
    /// Make a session and give it this first task.
    Start(String),
    /// Open the diff screen (and read the diff).
    OpenDiff,
    /// Open the sessions screen (and list them).
    OpenSessions,
    /// Back to the main screen.
    Back,
    /// Resume or attach to another session, or fork one and resume the fork.
    Take(Target),
    /// Hand the session to the daemon and leave (Ctrl-\, `/detach`); attached to the daemon
    /// already, leave it running there.
    Detach,
    /// Leave.
    Quit,
}

const HELP: &str = "/diff review and apply · /undo revert the last apply · /sessions resume, attach or fork · /detach (Ctrl-\\) hand the session to the daemon · /quit leave";

/// Handles one key on whatever screen is up, pressed now.
pub fn on_key(app: &mut App, key: KeyEvent) -> Effect {
    on_key_at(app, key, Instant::now())
}

/// Handles one key pressed at `now` (the time decides whether a question takes answers).
pub fn on_key_at(app: &mut App, key: KeyEvent, now: Instant) -> Effect {
    if key.kind == KeyEventKind::Release {
        return Effect::None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    // A question is answered from any screen: it is drawn on every one.
    if !ctrl
        && let Some(q) = app.question()
        && q.approval
    {
        let answer = match key.code {
            KeyCode::Char('y' | 'Y') => Some(AnswerKind::AllowOnce),
            KeyCode::Char('a' | 'A' | 's' | 'S') => Some(AnswerKind::AllowSession),
            KeyCode::Char('n' | 'N') => Some(AnswerKind::Deny),
            _ => None,
        };
        let answer = answer.filter(|a| q.answers().contains(a));
        let armed = app.question_armed(now);
        let id = q.id.clone();
        app.question_key_pressed(now);
        let answer = answer.filter(|_| armed);
        return match answer {
            Some(answer) => Effect::Send(Cmd::Answer {
                question: id,
                answer,
                reply: None,
            }),
            None if app.screen == Screen::Main => Effect::None,
            None => screen_key(app, key, ctrl),
        };
    }
    screen_key(app, key, ctrl)
}

fn screen_key(app: &mut App, key: KeyEvent, ctrl: bool) -> Effect {
    match &mut app.screen {
        Screen::Main => main_key(app, key, ctrl),
        Screen::Diff(view) => match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                view.step(-1);
                Effect::None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                view.step(1);
                Effect::None
            }
            KeyCode::PageUp => {
                view.step(-10);
                Effect::None
            }
            KeyCode::PageDown => {
                view.step(10);
                Effect::None
            }
            KeyCode::Char(' ') => {
                if view.toggle() && view.any_selected() {
                    Effect::Send(Cmd::Diff {
                        selection: view.selection(),
                        whole: false,
                    })
                } else {
                    Effect::None
                }
            }
            KeyCode::Enter => match (&view.digest, view.any_selected()) {
                (Some(digest), true) => Effect::Send(Cmd::Apply {
                    selection: view.selection(),
                    digest: digest.clone(),
                }),
                (None, true) => {
                    view.applied = Some("the selection's digest is being read: try again".into());
                    Effect::None
                }
                (_, false) => {
                    view.applied = Some("nothing selected: Space selects a file or hunk".into());
                    Effect::None
                }
            },
            KeyCode::Char('u') => match &app.last_apply {
                Some(id) => Effect::Send(Cmd::Undo(id.clone())),
                None => {
                    view.applied = Some("no apply made here to undo".into());
                    Effect::None
                }
            },
            KeyCode::Esc | KeyCode::Char('q') => Effect::Back,
            KeyCode::Char('c') if ctrl => Effect::Back,
            _ => Effect::None,
        },
        Screen::Sessions(view) if view.forking.is_some() => match key.code {
            KeyCode::Char(c) if !ctrl => {
                view.fork_digit(c);
                Effect::None
            }
            KeyCode::Backspace => {
                view.fork_back();
                Effect::None
            }
            KeyCode::Enter => view.finish_fork().map_or(Effect::None, Effect::Take),
            _ => {
                view.forking = None;
                Effect::None
            }
        },
        Screen::Sessions(view) => match key.code {
            KeyCode::Char('f') => {
                view.start_fork();
                Effect::None
            }
            KeyCode::Up | KeyCode::Char('k') => {
                view.step(-1);
                Effect::None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                view.step(1);
                Effect::None
            }
            KeyCode::Enter => view.choose().map_or(Effect::None, Effect::Take),
            KeyCode::Esc | KeyCode::Char('q') => Effect::Back,
            KeyCode::Char('c') if ctrl => Effect::Back,
            _ => Effect::None,
        },
    }
}

/// Empties `input`, overwriting its bytes first: what was typed for a secret question leaves no
/// copy in the input's buffer.
pub fn wipe(input: &mut String) {
    let mut bytes = std::mem::take(input).into_bytes();
    bytes.fill(0);
    // Keeps the writes from being optimised away as dead stores.
    std::hint::black_box(&bytes);
}

fn main_key(app: &mut App, key: KeyEvent, ctrl: bool) -> Effect {
    if ctrl {
        return match key.code {
            KeyCode::Char('c') => ctrl_c(app),
            KeyCode::Char('d') if app.input.is_empty() => Effect::Quit,
            // Ctrl-\ (a terminal's 0x1c, which crossterm reads as Ctrl-4).
            KeyCode::Char('\\' | '4') => Effect::Detach,
            KeyCode::Char('u') => {
                wipe(&mut app.input);
                Effect::None
            }
            _ => Effect::None,
        };
    }
    match key.code {
        KeyCode::Char(c) if !c.is_control() => {
            app.input.push(c);
            Effect::None
        }
        KeyCode::Backspace => {
            // Rewritten whole so the removed character's byte is not left behind.
            let mut kept: String = app.input.clone();
            kept.pop();
            wipe(&mut app.input);
            app.input = kept;
            Effect::None
        }
        KeyCode::Esc => {
            wipe(&mut app.input);
            Effect::None
        }
        KeyCode::Enter => enter(app),
        _ => Effect::None,
    }
}

fn ctrl_c(app: &mut App) -> Effect {
    if app.phase == Phase::Working {
        if app.interrupt_armed {
            return Effect::Quit;
        }
        app.interrupt_armed = true;
        app.status = Some((Kind::Note, "interrupting: Ctrl-C again leaves".into()));
        return Effect::Send(Cmd::Interrupt);
    }
    if !app.input.is_empty() {
        wipe(&mut app.input);
        return Effect::None;
    }
    Effect::Quit
}

fn enter(app: &mut App) -> Effect {
    let mut text = app.input.trim().to_string();
    if text.is_empty() {
        return Effect::None;
    }
    if let Some(q) = app.question() {
        let question = q.id.clone();
        // A secret is sent as typed (a password's spaces are its own) and the input wiped.
        let reply = if q.secret {
            wipe(&mut text);
            app.input.clone()
        } else {
            text
        };
        wipe(&mut app.input);
        return Effect::Send(Cmd::Answer {
            question,
            answer: AnswerKind::Reply,
            reply: Some(reply),
        });
    }
    if text.starts_with('/') {
        app.input.clear();
        return match text.as_str() {
            "/quit" | "/exit" => Effect::Quit,
            "/detach" => Effect::Detach,
            "/sessions" | "/resume" => Effect::OpenSessions,
            "/diff" | "/review" if app.session.is_some() => Effect::OpenDiff,
            "/undo" if app.session.is_some() => match &app.last_apply {
                Some(id) => Effect::Send(Cmd::Undo(id.clone())),
                None => {
                    app.status = Some((Kind::Error, "no apply made here to undo".into()));
                    Effect::None
                }
            },
            "/diff" | "/review" | "/undo" => {
                app.status = Some((Kind::Error, "no session yet: give a task first".into()));
                Effect::None
            }
            _ => {
                app.status = Some((Kind::Note, HELP.into()));
                Effect::None
            }
        };
    }
    match app.phase {
        Phase::NoSession => {
            app.input.clear();
            app.submitted(&text);
            Effect::Start(text)
        }
        Phase::Idle => {
            app.input.clear();
            app.submitted(&text);
            Effect::Send(Cmd::Input(text))
        }
        Phase::Working => {
            app.status = Some((
                Kind::Note,
                "a task runs: wait for it to end, or Ctrl-C to interrupt it".into(),
            ));
            Effect::None
        }
        Phase::Ended => {
            app.status = Some((
                Kind::Error,
                "the session ended: /sessions resumes one, Ctrl-C leaves".into(),
            ));
            Effect::None
        }
    }
}
