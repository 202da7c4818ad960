//! Drawing: the main viewport (live area or question, status line, input), the transcript's
//! lines as they go into the scrollback, and the diff and sessions screens.
//!
//! The question owns the live area while it is open: the model's unfinished text and a command's
//! output are not drawn then, and the transcript goes above the viewport, never into it. Its frame
//! is a double border on a yellow background ([`QUESTION_FRAME`]): no transcript or live text is
//! ever drawn with a background colour, and escaped text cannot set one.

pub mod diff;
pub mod sessions;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line as TextLine, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use chock_protocol::live::StepStatus;
use chock_protocol::log::AnswerKind;

use crate::feed::Asked;
use crate::state::{App, Kind, Line, Phase, clean};

/// The style of the question's frame and title: nothing else on screen has a background colour.
pub const QUESTION_FRAME: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);

/// The viewport's height on a terminal `rows` high: up to 12 rows, leaving the rest to the
/// transcript above it.
pub fn viewport_height(rows: u16) -> u16 {
    rows.clamp(6, 12)
}

/// The style of a transcript line of `kind` (foreground colours only; see [`QUESTION_FRAME`]).
pub fn style(kind: Kind) -> Style {
    match kind {
        Kind::User => Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
        Kind::Model => Style::new(),
        Kind::Tool => Style::new().fg(Color::Blue),
        Kind::Decision => Style::new().fg(Color::Magenta),
        Kind::Output => Style::new().fg(Color::DarkGray),
        Kind::Result { ok: true } => Style::new().fg(Color::Green),
        Kind::Result { ok: false } | Kind::Error => Style::new().fg(Color::Red),
        Kind::Plan => Style::new().fg(Color::Cyan),
        Kind::Note => Style::new().add_modifier(Modifier::DIM),
    }
}

/// Transcript lines as a wrapped paragraph, and how many rows it takes at `width`.
pub fn transcript(lines: &[Line], width: u16) -> (Paragraph<'static>, u16) {
    let text: Vec<TextLine<'static>> = lines
        .iter()
        .map(|l| TextLine::styled(l.text.clone(), style(l.kind)))
        .collect();
    let paragraph = Paragraph::new(text).wrap(Wrap { trim: false });
    let rows = paragraph.line_count(width.max(1));
    (paragraph, u16::try_from(rows).unwrap_or(u16::MAX))
}

/// Draws the main viewport into `area`.
pub fn draw_main(frame: &mut Frame<'_>, area: Rect, app: &App) {
    frame.render_widget(Clear, area);
    let input_rows = 2;
    let [live, status, input] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(input_rows),
    ])
    .areas(area);
    match app.question() {
        Some(_) => draw_question(frame, live, app),
        None => draw_live(frame, live, app),
    }
    draw_status(frame, status, app);
    draw_input(frame, input, app);
}

fn draw_live(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let mut lines: Vec<TextLine<'static>> = Vec::new();
    if app.phase == Phase::NoSession && app.live_text.is_empty() {
        lines.push(TextLine::styled(
            "What should chock do? Type a task and press Enter.",
            Style::new().add_modifier(Modifier::BOLD),
        ));
        lines.push(TextLine::styled(
            "/sessions resumes a session or attaches to the daemon's; Ctrl-C leaves.",
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    for line in app.live_text.split('\n').filter(|l| !l.is_empty()) {
        lines.push(TextLine::raw(clean(line)));
    }
    if !app.live_output.is_empty() || !app.live_partial().is_empty() {
        lines.push(TextLine::styled(
            "  running:",
            Style::new().add_modifier(Modifier::DIM),
        ));
        for line in &app.live_output {
            lines.push(TextLine::styled(format!("    {line}"), style(Kind::Output)));
        }
        if !app.live_partial().is_empty() {
            lines.push(TextLine::styled(
                format!("    {}", clean(app.live_partial())),
                style(Kind::Output),
            ));
        }
    }
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    // The newest lines stay in view: scroll past what does not fit.
    let rows = u16::try_from(paragraph.line_count(area.width.max(1))).unwrap_or(u16::MAX);
    let skip = rows.saturating_sub(area.height);
    frame.render_widget(paragraph.scroll((skip, 0)), area);
}

fn draw_question(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let Some(q) = app.question() else { return };
    let more = app.questions.len().saturating_sub(1);
    let title = if more > 0 {
        format!(" chock asks · {} · {more} more waiting ", clean(&q.id))
    } else {
        format!(" chock asks · {} ", clean(&q.id))
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(QUESTION_FRAME)
        .title(Span::styled(title, QUESTION_FRAME));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let label = Style::new().add_modifier(Modifier::BOLD);
    if !q.approval {
        let who = if q.secret {
            "git asks (what you type is not shown, and not kept):"
        } else {
            "the agent asks:"
        };
        let lines = vec![TextLine::styled(who, label), TextLine::raw(clean(&q.what))];
        frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
        return;
    }
    let act = TextLine::from(vec![
        Span::styled("act     ", label),
        Span::raw(clean(q.action.as_deref().unwrap_or("-"))),
    ]);
    let mut tail = Vec::new();
    if let Some(by) = &q.decided_by {
        tail.push(TextLine::from(vec![
            Span::styled("rule    ", label),
            Span::raw(clean(by)),
        ]));
    }
    for line in &q.context {
        tail.push(TextLine::styled(
            format!("        {}", clean(line)),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    let tail_rows = u16::try_from(tail.len())
        .unwrap_or(u16::MAX)
        .min(inner.height.saturating_sub(2));
    let [act_area, detail_area, tail_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(tail_rows),
    ])
    .areas(inner);
    frame.render_widget(Paragraph::new(act), act_area);
    draw_detail(frame, detail_area, &clean(&q.what));
    frame.render_widget(Paragraph::new(tail).wrap(Wrap { trim: false }), tail_area);
}

/// An act's detail in the rows it has. One too long for them shows its END (where a hostile
/// command would hide what it really does, after a screenful of harmless text), under a line
/// saying it was cut and where the whole of it is: the transcript, written when it opened.
fn draw_detail(frame: &mut Frame<'_>, area: Rect, detail: &str) {
    let label = Style::new().add_modifier(Modifier::BOLD);
    let paragraph = Paragraph::new(TextLine::from(vec![
        Span::styled("detail  ", label),
        Span::raw(detail.to_string()),
    ]))
    .wrap(Wrap { trim: false });
    let rows = u16::try_from(paragraph.line_count(area.width.max(1))).unwrap_or(u16::MAX);
    if rows <= area.height {
        frame.render_widget(paragraph, area);
        return;
    }
    let [marker, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    frame.render_widget(
        Paragraph::new(TextLine::from(vec![
            Span::styled("detail  ", label),
            Span::styled(
                "… too long for this frame: its end is below, the whole of it in the transcript above",
                Style::new().add_modifier(Modifier::DIM),
            ),
        ])),
        marker,
    );
    frame.render_widget(paragraph.scroll((rows - rest.height, 0)), rest);
}

/// The question drawn at the foot of the diff or sessions screen (`area`): the same frame and
/// lines as on the main screen, with the answers inside the frame.
pub fn draw_question_panel(frame: &mut Frame<'_>, area: Rect, app: &App) {
    frame.render_widget(Clear, area);
    let [question, answers] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    draw_question(frame, question, app);
    frame.render_widget(Paragraph::new(answer_keys(app)), answers);
}

/// The answer keys, once the question takes them; until then, that it will (see
/// [`App::question_armed`]).
fn answer_keys(app: &App) -> TextLine<'static> {
    let key = Style::new().add_modifier(Modifier::BOLD);
    if !app.question_armed(std::time::Instant::now()) {
        return TextLine::styled(
            "  read the question: its answer keys open once no key is pressed for a moment",
            Style::new().add_modifier(Modifier::DIM),
        );
    }
    let offered = app.question().map(Asked::answers).unwrap_or_default();
    let mut spans = Vec::new();
    for (answer, k, words) in [
        (AnswerKind::AllowOnce, "[y]", " yes once   "),
        (AnswerKind::AllowSession, "[a]", " yes for this session   "),
        (AnswerKind::Deny, "[n]", " no"),
    ] {
        if offered.contains(&answer) {
            spans.push(Span::styled(k, key));
            spans.push(Span::raw(words));
        }
    }
    TextLine::from(spans)
}

/// How many rows the question takes at the foot of the diff or sessions screen.
pub const QUESTION_PANEL: u16 = 9;

fn draw_status(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let phase = match app.phase {
        Phase::NoSession => "no session",
        Phase::Idle => "idle",
        Phase::Working if app.interrupt_armed => "interrupting",
        Phase::Working => "working",
        Phase::Ended => "ended",
    };
    let cost = chock_protocol::live::cost_text(app.cost);
    let mut spans = vec![
        Span::styled(
            format!(" {phase} "),
            Style::new().add_modifier(Modifier::REVERSED),
        ),
        Span::raw(format!(
            " turn {} · {cost} · {}/{} tok",
            app.turn, app.tokens.0, app.tokens.1
        )),
    ];
    if let Some((kind, text)) = &app.status {
        spans.push(Span::styled(format!(" · {text}"), style(*kind)));
    } else if !app.plan.is_empty() {
        let done = app
            .plan
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .count();
        let current = app
            .plan
            .iter()
            .find(|s| s.status == StepStatus::InProgress)
            .or_else(|| app.plan.iter().find(|s| s.status != StepStatus::Done));
        let step = current.map_or("all done".to_string(), |s| clean(&s.step));
        spans.push(Span::styled(
            format!(" · plan {done}/{}: {step}", app.plan.len()),
            style(Kind::Plan),
        ));
    }
    if let Some((id, _, _)) = &app.session {
        spans.push(Span::styled(
            format!(" · {id}"),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    frame.render_widget(Paragraph::new(TextLine::from(spans)), area);
}

fn draw_input(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let [rule, line] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
    frame.render_widget(
        Paragraph::new("─".repeat(usize::from(area.width)))
            .style(Style::new().add_modifier(Modifier::DIM)),
        rule,
    );
    let key = Style::new().add_modifier(Modifier::BOLD);
    let text = match app.question() {
        Some(q) if q.approval => answer_keys(app),
        // A secret is never drawn: one bullet a character, so only its length shows.
        Some(q) if q.secret => TextLine::from(vec![
            Span::styled("password (not shown) › ", key),
            Span::raw("•".repeat(app.input.chars().count())),
        ]),
        Some(_) => TextLine::from(vec![
            Span::styled("reply › ", key),
            Span::raw(clean(&app.input)),
        ]),
        None => {
            let prompt = match app.phase {
                Phase::Working => "  (working: Ctrl-C interrupts, Ctrl-\\ detaches) › ",
                Phase::Ended => "  (session ended: Ctrl-C leaves) › ",
                _ => "› ",
            };
            TextLine::from(vec![
                Span::styled(prompt, key),
                Span::raw(clean(&app.input)),
            ])
        }
    };
    let width = text.width();
    frame.render_widget(Paragraph::new(text), line);
    if app.question().is_none_or(|q| !q.approval) {
        let x = u16::try_from(width)
            .unwrap_or(u16::MAX)
            .min(line.width.saturating_sub(1));
        frame.set_cursor_position((line.x + x, line.y));
    }
}
