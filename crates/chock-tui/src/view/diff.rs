//! The diff screen: the session's files and hunks with a check box each, the hunk under the
//! cursor, and the digest of exactly the selection — what an apply from here is pinned to.
//!
//! Nothing selected applies nothing: an empty selection means "everything" to the workspace, so
//! the screen refuses to send one rather than let a slip apply the whole session.

use std::collections::BTreeSet;

use chock_protocol::rpc::{DiffFile, FileStatus, ReviewDiff, Selection};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::state::clean;

/// One selectable row: a file, or one of its hunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// File `n`.
    File(usize),
    /// Hunk `h` of file `f`.
    Hunk(usize, usize),
}

/// The diff screen's state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiffView {
    /// The whole diff, once loaded.
    pub diff: Option<ReviewDiff>,
    /// The rows, in order.
    pub rows: Vec<Row>,
    /// The row under the cursor.
    pub cursor: usize,
    /// Whole files selected, by id.
    pub files: BTreeSet<String>,
    /// Single hunks selected, by id.
    pub hunks: BTreeSet<String>,
    /// The digest of the selection now (None: being read, or nothing selected).
    pub digest: Option<String>,
    /// What the last apply or undo said.
    pub applied: Option<String>,
}

impl DiffView {
    /// Takes the whole diff (after an apply: what is left is still listed, the cursor kept).
    pub fn load(&mut self, diff: ReviewDiff) {
        self.rows = diff
            .files
            .iter()
            .enumerate()
            .flat_map(|(f, file)| {
                std::iter::once(Row::File(f))
                    .chain((0..file.hunks.len()).map(move |h| Row::Hunk(f, h)))
            })
            .collect();
        self.cursor = self.cursor.min(self.rows.len().saturating_sub(1));
        self.diff = Some(diff);
    }

    /// Takes the digest of the selection (ignored when the selection changed since it was asked).
    pub fn selected_digest(&mut self, diff: ReviewDiff) {
        let ids: BTreeSet<&str> = diff.files.iter().map(|f| f.id.as_str()).collect();
        let shown: BTreeSet<&str> = self
            .files
            .iter()
            .map(String::as_str)
            .chain(self.hunk_files())
            .collect();
        if ids == shown {
            self.digest = Some(diff.digest);
        }
    }

    fn hunk_files(&self) -> impl Iterator<Item = &str> {
        let files = self.diff.iter().flat_map(|d| d.files.iter());
        files
            .filter(|f| f.hunks.iter().any(|h| self.hunks.contains(&h.id)))
            .map(|f| f.id.as_str())
    }

    /// The selection, as the workspace names it.
    pub fn selection(&self) -> Selection {
        Selection {
            files: self.files.iter().cloned().collect(),
            hunks: self.hunks.iter().cloned().collect(),
        }
    }

    /// Whether anything is selected.
    pub fn any_selected(&self) -> bool {
        !self.files.is_empty() || !self.hunks.is_empty()
    }

    fn file(&self, f: usize) -> Option<&DiffFile> {
        self.diff.as_ref().and_then(|d| d.files.get(f))
    }

    /// Moves the cursor by `by` rows.
    pub fn step(&mut self, by: isize) {
        let last = self.rows.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
    }

    /// Selects or unselects the row under the cursor: a file whole, or one hunk (a hunk of a
    /// file selected whole turns the file into its other hunks). Returns whether it changed.
    pub fn toggle(&mut self) -> bool {
        let Some(row) = self.rows.get(self.cursor).copied() else {
            return false;
        };
        match row {
            Row::File(f) => {
                let Some(file) = self.file(f).cloned() else {
                    return false;
                };
                if !self.files.remove(&file.id) {
                    for h in &file.hunks {
                        self.hunks.remove(&h.id);
                    }
                    self.files.insert(file.id);
                }
            }
            Row::Hunk(f, h) => {
                let Some(file) = self.file(f).cloned() else {
                    return false;
                };
                let id = file.hunks[h].id.clone();
                if self.files.remove(&file.id) {
                    for other in file.hunks.iter().filter(|o| o.id != id) {
                        self.hunks.insert(other.id.clone());
                    }
                } else if !self.hunks.remove(&id) {
                    self.hunks.insert(id);
                }
            }
        }
        self.digest = None;
        true
    }

    fn checked(&self, row: Row) -> &'static str {
        match row {
            Row::File(f) => match self.file(f) {
                Some(file) if self.files.contains(&file.id) => "[x]",
                Some(file) if file.hunks.iter().any(|h| self.hunks.contains(&h.id)) => "[~]",
                _ => "[ ]",
            },
            Row::Hunk(f, h) => match self.file(f) {
                Some(file)
                    if self.files.contains(&file.id) || self.hunks.contains(&file.hunks[h].id) =>
                {
                    "[x]"
                }
                _ => "[ ]",
            },
        }
    }

    fn row_text(&self, row: Row) -> String {
        match row {
            Row::File(f) => self.file(f).map_or_else(String::new, |file| {
                let status = match file.status {
                    FileStatus::Added => "added",
                    FileStatus::Deleted => "deleted",
                    FileStatus::Modified => "modified",
                    FileStatus::Renamed => "renamed",
                    FileStatus::TypeChanged => "type changed",
                };
                let policy = if file.policy_file {
                    " (policy file: refused here)"
                } else {
                    ""
                };
                format!(
                    "{} {} {}  {status} +{} -{}{policy}",
                    self.checked(row),
                    clean(&file.id),
                    clean(&file.path),
                    file.added,
                    file.removed
                )
            }),
            Row::Hunk(f, h) => self.file(f).map_or_else(String::new, |file| {
                let hunk = &file.hunks[h];
                format!(
                    "    {} {}  @@ -{},{} +{},{} @@",
                    self.checked(row),
                    clean(&hunk.id),
                    hunk.old_start,
                    hunk.old_len,
                    hunk.new_start,
                    hunk.new_len
                )
            }),
        }
    }

    /// The lines shown for the row under the cursor: a hunk's, or every hunk of a file's.
    fn preview(&self) -> Vec<Line<'static>> {
        let Some(row) = self.rows.get(self.cursor).copied() else {
            return Vec::new();
        };
        let (f, only) = match row {
            Row::File(f) => (f, None),
            Row::Hunk(f, h) => (f, Some(h)),
        };
        let Some(file) = self.file(f) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if file.hunks.is_empty() {
            out.push(Line::styled(
                "(no hunks: the file is selected whole)",
                Style::new().add_modifier(Modifier::DIM),
            ));
        }
        for (i, hunk) in file.hunks.iter().enumerate() {
            if only.is_some_and(|h| h != i) {
                continue;
            }
            out.push(Line::styled(
                format!(
                    "@@ -{},{} +{},{} @@ {}",
                    hunk.old_start,
                    hunk.old_len,
                    hunk.new_start,
                    hunk.new_len,
                    clean(&hunk.id)
                ),
                Style::new().fg(Color::Cyan),
            ));
            for line in &hunk.lines {
                let style = match line.as_bytes().first() {
                    Some(b'+') => Style::new().fg(Color::Green),
                    Some(b'-') => Style::new().fg(Color::Red),
                    _ => Style::new(),
                };
                out.push(Line::styled(clean(line), style));
            }
        }
        out
    }
}

/// Draws the diff screen into `area`.
pub fn draw(frame: &mut Frame<'_>, area: Rect, view: &DiffView, session: &str) {
    let [title, list, preview, digest, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(40),
        Constraint::Min(3),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(area);
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let count = view.diff.as_ref().map_or(0, |d| d.files.len());
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!(
                "diff · session {} · {count} file(s) changed",
                clean(session)
            ),
            bold,
        )),
        title,
    );
    let rows: Vec<Line<'static>> = match &view.diff {
        None => vec![Line::raw("reading the session's changes…")],
        Some(d) if d.files.is_empty() => vec![Line::raw("the session changed nothing")],
        Some(_) => view
            .rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let style = if i == view.cursor {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Line::styled(view.row_text(*row), style)
            })
            .collect(),
    };
    let skip = view
        .cursor
        .saturating_sub(usize::from(list.height.saturating_sub(1)));
    let rows: Vec<Line<'static>> = rows.into_iter().skip(skip).collect();
    frame.render_widget(Paragraph::new(rows), list);
    frame.render_widget(
        Paragraph::new(view.preview())
            .block(Block::default().borders(Borders::TOP))
            .wrap(Wrap { trim: false }),
        preview,
    );
    let digest_line = match (&view.digest, view.any_selected()) {
        (_, false) => {
            "nothing selected: Space selects the file or hunk under the cursor".to_string()
        }
        (None, true) => "digest of the selection: reading…".to_string(),
        (Some(d), true) => format!("digest {d}"),
    };
    let mut lines = vec![Line::styled(digest_line, bold)];
    if let Some(said) = &view.applied {
        lines.push(Line::raw(said.clone()));
    }
    frame.render_widget(Paragraph::new(lines), digest);
    frame.render_widget(
        Paragraph::new(Line::styled(
            "↑↓ move · Space select · Enter apply the selection · u undo the last apply · Esc back",
            Style::new().add_modifier(Modifier::DIM),
        )),
        help,
    );
}
