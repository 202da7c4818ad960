//! The key map without a terminal: Ctrl-C interrupts a running turn and a second one leaves; a
//! question is answered by id from any screen; the first task makes the session; an apply is
//! sent only with the digest of exactly the selection shown.

use chock_agent::agent::TaskEnd;
use chock_protocol::log::AnswerKind;
use chock_tui::feed::{Asked, Cmd, Feed, TaskOutcome};
use chock_tui::keys::{Effect, on_key};
use chock_tui::state::{App, Phase, Screen};
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
    app.apply(Feed::TaskEnded(TaskOutcome::Ended(TaskEnd::Done)));
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
    app.apply(Feed::TaskEnded(TaskOutcome::Ended(TaskEnd::Interrupted)));
    assert_eq!(on_key(&mut app, ctrl_c()), Effect::Quit);
    // Idle with something typed: Ctrl-C clears it first.
    let mut idle = App::new();
    idle.input = "half a task".into();
    assert_eq!(on_key(&mut idle, ctrl_c()), Effect::None);
    assert!(idle.input.is_empty());
    assert_eq!(on_key(&mut idle, ctrl_c()), Effect::Quit);
}

#[test]
fn a_question_is_answered_by_its_id_on_any_screen() {
    let mut app = App::new();
    typed(&mut app, "fix it");
    app.apply(Feed::Asked(Asked {
        id: "q-7".into(),
        approval: true,
        action: Some("workspace.apply".into()),
        what: "apply: write 1 path(s)".into(),
        decided_by: None,
        context: Vec::new(),
    }));
    app.screen = Screen::Diff(DiffView::default());
    assert_eq!(
        on_key(&mut app, key(KeyCode::Char('a'))),
        Effect::Send(Cmd::Answer {
            question: "q-7".into(),
            answer: AnswerKind::AllowSession,
            reply: None
        })
    );
    assert_eq!(on_key(&mut app, key(KeyCode::Esc)), Effect::Back);
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
