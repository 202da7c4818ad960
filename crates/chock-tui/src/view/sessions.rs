//! The sessions screen: every session under the sessions root, newest first, with where it is —
//! ended or stopped (Enter resumes it here, `SessionBuilder::resume`), running in the daemon
//! (Enter attaches to it), or written by another process (not taken). `f`, a turn number and Enter
//! fork any listed session at the end of that completed turn (the runtime's `Op::Fork` flow) and take the
//! fork up here (docs/forks.md).

use std::path::PathBuf;

use chock_protocol::rpc::SessionState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use crate::state::clean;

/// Where a listed session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// Its log says it ended.
    Ended,
    /// Its writer is gone without an end (crashed, or its daemon stopped).
    Stopped,
    /// Another process writes it.
    Elsewhere,
    /// The running daemon runs it.
    Daemon(SessionState),
}

/// One listed session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// Its id.
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Where it is.
    pub at: Where,
    /// Its project.
    pub project: Option<String>,
    /// When it last wrote.
    pub last_ts: Option<String>,
}

/// What Enter on a row does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Resume it in this process.
    Resume(PathBuf),
    /// Attach to it in the daemon.
    Attach(String),
    /// Fork it at the end of completed turn `turn`, and resume the fork here.
    Fork {
        /// The session's directory.
        dir: PathBuf,
        /// The completed turn the fork starts after.
        turn: u32,
    },
}

impl SessionRow {
    /// What taking this session means (None: another process holds it).
    pub fn target(&self) -> Option<Target> {
        match self.at {
            Where::Ended | Where::Stopped => Some(Target::Resume(self.dir.clone())),
            Where::Daemon(SessionState::Working | SessionState::Idle) => {
                Some(Target::Attach(self.id.clone()))
            }
            Where::Daemon(SessionState::Ended) => Some(Target::Resume(self.dir.clone())),
            Where::Daemon(_) | Where::Elsewhere => None,
        }
    }
}

/// The sessions screen's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionsView {
    /// The sessions, newest first.
    pub rows: Vec<SessionRow>,
    /// The row under the cursor.
    pub cursor: usize,
    /// Whether a daemon answered.
    pub daemon: bool,
    /// Why the last Enter did nothing.
    pub refused: Option<String>,
    /// The turn number being typed after `f` (None: not forking).
    pub forking: Option<String>,
}

impl SessionsView {
    /// Moves the cursor by `by` rows.
    pub fn step(&mut self, by: isize) {
        let last = self.rows.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
    }

    /// The row under the cursor's target; says why not when there is none.
    pub fn choose(&mut self) -> Option<Target> {
        let row = self.rows.get(self.cursor)?;
        let target = row.target();
        if target.is_none() {
            self.refused = Some(format!(
                "session {} is written by another process: it cannot be taken here",
                clean(&row.id)
            ));
        }
        target
    }
}

impl SessionsView {
    /// `f`: starts typing the turn to fork the row under the cursor at.
    pub fn start_fork(&mut self) {
        if self.rows.get(self.cursor).is_some() {
            self.refused = None;
            self.forking = Some(String::new());
        }
    }

    /// A key while the turn is typed: a digit, Backspace; anything else is ignored.
    pub fn fork_digit(&mut self, c: char) {
        if let Some(turn) = &mut self.forking
            && c.is_ascii_digit()
            && turn.len() < 9
        {
            turn.push(c);
        }
    }

    /// Backspace while the turn is typed.
    pub fn fork_back(&mut self) {
        if let Some(turn) = &mut self.forking {
            turn.pop();
        }
    }

    /// Enter while the turn is typed: the fork to make, or why not (no number typed).
    pub fn finish_fork(&mut self) -> Option<Target> {
        let typed = self.forking.take()?;
        let row = self.rows.get(self.cursor)?;
        match typed.parse::<u32>() {
            Ok(turn) if turn > 0 => Some(Target::Fork {
                dir: row.dir.clone(),
                turn,
            }),
            _ => {
                self.refused = Some("type the turn to fork at (1 or more), then Enter".into());
                None
            }
        }
    }
}

fn where_word(at: Where) -> &'static str {
    match at {
        Where::Ended => "ended",
        Where::Stopped => "stopped",
        Where::Elsewhere => "elsewhere",
        Where::Daemon(SessionState::Working) => "daemon: working",
        Where::Daemon(SessionState::Idle) => "daemon: idle",
        Where::Daemon(SessionState::Ended) => "daemon: ended",
        Where::Daemon(SessionState::Stopped) => "daemon: stopped",
        Where::Daemon(SessionState::Elsewhere) => "elsewhere",
    }
}

/// Draws the sessions screen into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, view: &SessionsView) {
    let [title, list, note, help] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let daemon = if view.daemon {
        "a daemon runs"
    } else {
        "no daemon running"
    };
    frame.render_widget(
        Paragraph::new(vec![
            Line::styled(
                format!("sessions · {} · {daemon}", view.rows.len()),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Line::styled(
                format!(
                    "{:<24} {:<16} {:<20} project",
                    "session", "where", "last written"
                ),
                Style::new().add_modifier(Modifier::DIM),
            ),
        ]),
        title,
    );
    let skip = view
        .cursor
        .saturating_sub(usize::from(list.height.saturating_sub(1)));
    let rows: Vec<Line<'static>> = view
        .rows
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(i, row)| {
            let style = if i == view.cursor {
                Style::new().add_modifier(Modifier::REVERSED)
            } else {
                Style::new()
            };
            let ts = row.last_ts.as_deref().map_or(String::new(), |t| {
                clean(t).chars().take(19).collect::<String>()
            });
            Line::styled(
                format!(
                    "{:<24} {:<16} {:<20} {}",
                    clean(&row.id),
                    where_word(row.at),
                    ts,
                    clean(row.project.as_deref().unwrap_or("-"))
                ),
                style,
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        vec![Line::raw("no sessions yet")]
    } else {
        rows
    };
    frame.render_widget(Paragraph::new(rows), list);
    if let (Some(turn), Some(row)) = (&view.forking, view.rows.get(view.cursor)) {
        frame.render_widget(
            Paragraph::new(format!(
                "fork {} at the end of turn: {turn}_  (Enter forks, Esc cancels)",
                clean(&row.id)
            )),
            note,
        );
    } else if let Some(why) = &view.refused {
        frame.render_widget(Paragraph::new(why.clone()), note);
    }
    frame.render_widget(
        Paragraph::new(Line::styled(
            "↑↓ move · Enter resume or attach (daemon) · f fork at a turn · Esc back",
            Style::new().add_modifier(Modifier::DIM),
        )),
        help,
    );
}
