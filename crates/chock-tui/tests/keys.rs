//! The key map without a terminal: Ctrl-C interrupts a running turn and a second one leaves; a
//! question is answered by id from any screen, and only after it was up a quiet moment (typing
//! meant for something else never answers it); the first task makes the session; an apply is
//! sent only with the digest of exactly the selection shown.

use std::time::Duration;

use chock_protocol::live::Ended;
use chock_protocol::log::AnswerKind;
use chock_tui::feed::{Asked, Cmd, Feed, TaskOutcome};
use chock_tui::keys::{Effect, on_key, on_key_at};
use chock_tui::state::{ARM_DELAY, App, Phase, Screen};
use chock_tui::view::diff::DiffView;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl_c() -> KeyEvent {
    KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
}

fn typed(app: &mut App, text: &str) -> Effect {
    for c in text.chars() {
        assert_eq!(on_key(app, key(KeyCode::Char(c))), Effect::None);
    }
    on_key(app, key(KeyCode::Enter))
}

#[test]
fn the_first_task_makes_the_session_and_a_follow_up_goes_to_it() {
    let mut app = App::new();
    assert_eq!(typed(&mut app, "fix it"), Effect::Start("fix it".into()));
    assert_eq!(app.phase, Phase::Working);
    assert_eq!(
        typed(&mut app, "more"),
        Effect::None,
        "not while a task runs"
    );
    app.apply(Feed::TaskEnded(TaskOutcome::Ended(Ended::Done)));
    app.input.clear();
    assert_eq!(
        typed(&mut app, "more"),
        Effect::Send(Cmd::Input("more".into()))
    );
}

#[test]
fn ctrl_c_interrupts_then_leaves() {
    let mut app = App::new();
    typed(&mut app, "fix it");
    assert_eq!(on_key(&mut app, ctrl_c()), Effect::Send(Cmd::Interrupt));
    app.apply(Feed::TaskEnded(TaskOutcome::Ended(Ended::Interrupted)));
    assert_eq!(on_key(&mut app, ctrl_c()), Effect::Quit);
    // Idle with something typed: Ctrl-C clears it first.
    let mut idle = App::new();
    idle.input = "half a task".into();
    assert_eq!(on_key(&mut idle, ctrl_c()), Effect::None);
    assert!(idle.input.is_empty());
    assert_eq!(on_key(&mut idle, ctrl_c()), Effect::Quit);
}

fn asked(app: &mut App, id: &str) {
    app.apply(Feed::Asked(Asked {
        id: id.into(),
        approval: true,
        action: Some("workspace.apply".into()),
        what: "apply: write 1 path(s)".into(),
        decided_by: None,
        context: Vec::new(),
        secret: false,
    }));
}

fn answer(id: &str, answer: AnswerKind) -> Effect {
    Effect::Send(Cmd::Answer {
        question: id.into(),
        answer,
        reply: None,
    })
}

#[test]
fn a_question_is_answered_by_its_id_on_any_screen_once_it_was_up_a_quiet_moment() {
    let mut app = App::new();
    typed(&mut app, "fix it");
    asked(&mut app, "q-7");
    let opened = app
        .question_quiet_since
        .expect("the wait starts when it opens");
    app.screen = Screen::Diff(DiffView::default());
    let later = opened + ARM_DELAY;
    // An apply takes yes once or no: `a` (yes for the session) answers nothing.
    assert_eq!(
        on_key_at(&mut app, key(KeyCode::Char('a')), later),
        Effect::None
    );
    let later = later + ARM_DELAY;
    assert_eq!(
        on_key_at(&mut app, key(KeyCode::Char('y')), later),
        answer("q-7", AnswerKind::AllowOnce)
    );
    assert_eq!(on_key_at(&mut app, key(KeyCode::Esc), later), Effect::Back);
}

#[test]
fn another_act_may_be_allowed_for_the_session_and_an_apply_never() {
    let mut app = App::new();
    app.apply(Feed::Asked(Asked {
        id: "q-3".into(),
        approval: true,
        action: Some("exec.system.sh".into()),
        what: "run `sh`".into(),
        decided_by: None,
        context: Vec::new(),
        secret: false,
    }));
    assert_eq!(
        app.question().unwrap().answers(),
        [
            AnswerKind::AllowOnce,
            AnswerKind::AllowSession,
            AnswerKind::Deny
        ]
    );
    let later = app.question_quiet_since.unwrap() + ARM_DELAY;
    assert_eq!(
        on_key_at(&mut app, key(KeyCode::Char('a')), later),
        answer("q-3", AnswerKind::AllowSession)
    );
    let mut app = App::new();
    asked(&mut app, "q-4");
    assert_eq!(
        app.question().unwrap().answers(),
        [AnswerKind::AllowOnce, AnswerKind::Deny]
    );
}

#[test]
fn typing_that_goes_on_when_a_question_opens_never_answers_it() {
    let mut app = App::new();
    typed(&mut app, "fix it");
    // The person is typing a follow-up ("please also add tests") when the question opens after
    // "ple": every key comes well within the wait of the one before, so none of `a`, `s`, `y`
    // answers, and the letters go nowhere.
    asked(&mut app, "q-8");
    let mut at = app.question_quiet_since.unwrap();
    for c in "ase also add tests, yes".chars() {
        at += Duration::from_millis(120);
        assert_eq!(
            on_key_at(&mut app, key(KeyCode::Char(c)), at),
            Effect::None,
            "{c}"
        );
    }
    assert_eq!(app.question().map(|q| q.id.as_str()), Some("q-8"));
    assert!(!app.question_armed(at + ARM_DELAY / 2));
    // Once the person stops and reads, the answer counts.
    assert_eq!(
        on_key_at(&mut app, key(KeyCode::Char('n')), at + ARM_DELAY),
        answer("q-8", AnswerKind::Deny)
    );
}

#[test]
fn the_next_question_waits_its_own_quiet_moment() {
    let mut app = App::new();
    typed(&mut app, "fix it");
    asked(&mut app, "q-1");
    asked(&mut app, "q-2");
    let first = app.question_quiet_since.unwrap();
    // q-1 is resolved (answered elsewhere): q-2 comes on screen and starts its own wait, so a `y`
    // pressed a moment later, meant for q-1, does not answer q-2.
    app.apply(Feed::Resolved {
        question: "q-1".into(),
        by: Some("web".into()),
        answer: Some(AnswerKind::AllowOnce),
    });
    let second = app.question_quiet_since.unwrap();
    assert!(second >= first);
    assert_eq!(
        on_key_at(&mut app, key(KeyCode::Char('y')), second + ARM_DELAY / 3),
        Effect::None
    );
}

#[test]
fn enter_on_the_diff_applies_nothing_unselected_nor_an_unread_digest() {
    let mut app = App::new();
    app.screen = Screen::Diff(DiffView::default());
    assert_eq!(on_key(&mut app, key(KeyCode::Enter)), Effect::None);
    let Screen::Diff(view) = &mut app.screen else {
        unreachable!()
    };
    view.hunks.insert("f1:h2".into());
    assert_eq!(
        on_key(&mut app, key(KeyCode::Enter)),
        Effect::None,
        "no digest yet"
    );
    let Screen::Diff(view) = &mut app.screen else {
        unreachable!()
    };
    view.digest = Some("c".repeat(64));
    let Effect::Send(Cmd::Apply { selection, digest }) = on_key(&mut app, key(KeyCode::Enter))
    else {
        panic!("an apply")
    };
    assert_eq!(selection.hunks, ["f1:h2"]);
    assert!(selection.files.is_empty());
    assert_eq!(digest, "c".repeat(64));
}

#[test]
fn f_a_turn_and_enter_fork_the_session_under_the_cursor() {
    use chock_tui::view::sessions::{SessionRow, SessionsView, Target, Where};
    let row = SessionRow {
        id: "20260101T000000Z-000001".into(),
        dir: "/s/20260101T000000Z-000001".into(),
        at: Where::Ended,
        project: None,
        last_ts: None,
    };
    let mut app = App::new();
    app.screen = Screen::Sessions(SessionsView {
        rows: vec![row],
        ..SessionsView::default()
    });
    assert_eq!(on_key(&mut app, key(KeyCode::Char('f'))), Effect::None);
    // Only digits are the turn; Backspace takes one back.
    for c in ['1', 'q', '3'] {
        assert_eq!(on_key(&mut app, key(KeyCode::Char(c))), Effect::None);
    }
    assert_eq!(on_key(&mut app, key(KeyCode::Backspace)), Effect::None);
    assert_eq!(
        on_key(&mut app, key(KeyCode::Enter)),
        Effect::Take(Target::Fork {
            dir: "/s/20260101T000000Z-000001".into(),
            turn: 1
        })
    );
    // No number: nothing is forked, and the screen says why; Esc leaves the prompt.
    on_key(&mut app, key(KeyCode::Char('f')));
    assert_eq!(on_key(&mut app, key(KeyCode::Enter)), Effect::None);
    let Screen::Sessions(view) = &app.screen else {
        panic!("left the sessions screen")
    };
    assert!(view.refused.as_deref().unwrap().contains("type the turn"));
    on_key(&mut app, key(KeyCode::Char('f')));
    on_key(&mut app, key(KeyCode::Esc));
    let Screen::Sessions(view) = &app.screen else {
        panic!("left the sessions screen")
    };
    assert_eq!(view.forking, None);
}

/// Ctrl-\ as a terminal sends it (0x1c, which crossterm reads as Ctrl-4) and as a terminal with
/// the kitty keyboard protocol names it.
fn ctrl_backslash() -> [KeyEvent; 2] {
    [
        KeyEvent::new(KeyCode::Char('4'), KeyModifiers::CONTROL),
        KeyEvent::new(KeyCode::Char('\\'), KeyModifiers::CONTROL),
    ]
}

#[test]
fn ctrl_backslash_and_slash_detach_hand_the_session_over_even_with_a_question_open() {
    for press in ctrl_backslash() {
        let mut app = App::new();
        typed(&mut app, "fix it");
        assert_eq!(on_key(&mut app, press), Effect::Detach);
        assert_eq!(
            app.phase,
            Phase::Working,
            "nothing changes until it is handed over"
        );
        // A question open does not take the key as an answer: it is handed over with it.
        app.apply(Feed::Asked(Asked {
            id: "q-1".into(),
            approval: true,
            action: Some("exec.system.sh".into()),
            what: "sh -c true".into(),
            decided_by: None,
            context: Vec::new(),
            secret: false,
        }));
        assert_eq!(on_key(&mut app, press), Effect::Detach);
        assert_eq!(app.questions.len(), 1);
    }
    let mut app = App::new();
    typed(&mut app, "fix it");
    app.input = "/detach".into();
    assert_eq!(on_key(&mut app, key(KeyCode::Enter)), Effect::Detach);
    // The help a mistyped command shows names it.
    app.input = "/help".into();
    on_key(&mut app, key(KeyCode::Enter));
    let help = app.status.clone().unwrap().1;
    assert!(
        help.contains("/detach (Ctrl-\\) hand the session to the daemon"),
        "{help}"
    );
}

#[test]
fn handed_over_the_interface_leaves_without_ending_the_session() {
    let mut app = App::new();
    app.apply(Feed::Started {
        session: "S1".into(),
        provider: "demo".into(),
        model: "m".into(),
    });
    typed(&mut app, "fix it");
    app.apply(Feed::HandedOver {
        follow: "chock attach S1".into(),
    });
    assert!(app.quit && app.handed_over);
    assert_eq!(app.phase, Phase::Ended);
    let said: Vec<String> = app.take_lines().into_iter().map(|l| l.text).collect();
    assert!(
        said.iter().any(|l| l
            == "── session S1 was handed over to the daemon; follow it: chock attach S1"),
        "{said:?}"
    );
}

/// An idle session (its task ended, waiting for a follow-up) is handed over as a working one:
/// the key and `/detach` give `Effect::Detach`, and the interface asks the daemon to take the
/// session now — whether it is let go at once is the runtime's to decide. Only a session that
/// has ended, or none, has nothing to hand over.
#[test]
fn an_idle_session_is_handed_over_by_the_key_and_an_ended_one_is_not() {
    let idle = || {
        let mut app = App::new();
        app.apply(Feed::Started {
            session: "S1".into(),
            provider: "demo".into(),
            model: "m".into(),
        });
        typed(&mut app, "fix it");
        app.apply(Feed::TaskEnded(TaskOutcome::Ended(Ended::Done)));
        assert_eq!(app.phase, Phase::Idle);
        app
    };
    for press in ctrl_backslash() {
        let mut app = idle();
        assert_eq!(on_key(&mut app, press), Effect::Detach);
        assert_eq!(app.detach_asked().as_deref(), Some("S1"));
        let (_, status) = app.status.clone().unwrap();
        assert_eq!(status, "handing the idle session to the daemon now");
        assert_eq!(
            app.phase,
            Phase::Idle,
            "nothing changes until it is handed over"
        );
        app.apply(Feed::HandedOver {
            follow: "chock attach S1".into(),
        });
        assert!(app.quit && app.handed_over);
        let said: Vec<String> = app.take_lines().into_iter().map(|l| l.text).collect();
        assert!(
            said.iter()
                .any(|l| l
                    == "── session S1 was handed over to the daemon; follow it: chock attach S1"),
            "{said:?}"
        );
    }
    let mut app = idle();
    app.input = "/detach".into();
    assert_eq!(on_key(&mut app, key(KeyCode::Enter)), Effect::Detach);
    assert_eq!(app.detach_asked().as_deref(), Some("S1"));
    // Working, it is handed over at the end of the turn.
    typed(&mut app, "more");
    assert_eq!(app.phase, Phase::Working);
    assert_eq!(app.detach_asked().as_deref(), Some("S1"));
    let (_, status) = app.status.clone().unwrap();
    assert_eq!(
        status,
        "handing the session to the daemon (at the end of this turn)"
    );
    // Ended, or never started: nothing to hand over, and nothing is asked of the daemon.
    app.apply(Feed::Ended(None));
    assert_eq!(app.detach_asked(), None);
    let (_, status) = app.status.clone().unwrap();
    assert_eq!(
        status,
        "session S1 has ended, so there is nothing to hand over"
    );
    let mut none = App::new();
    assert_eq!(none.detach_asked(), None);
}
