//! The terminal: raw mode, the inline viewport with the transcript inserted above it, the
//! alternate screen for the diff and the sessions list, and the loop that takes keys and feeds.
//!
//! The terminal is always put back (raw mode off, the alternate screen left, the cursor shown) on
//! the way out, a panic included, and the viewport is cleared, so what stays on the screen and in
//! the scrollback is the transcript.

use std::io::Stdout;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, Event, EventStream};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use futures_util::StreamExt;
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Widget;
use ratatui::{Terminal, TerminalOptions, Viewport};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use chock_runtime::Opening;

use crate::TuiError;
use crate::backend::Kept;
use crate::driver::local::{self, LocalOptions};
use crate::driver::{daemon, list_sessions};
use crate::feed::{Cmd, Feed};
use crate::keys::{Effect, on_key};
use crate::state::{App, Kind, Phase, Screen};
use crate::view::diff::DiffView;
use crate::view::sessions::Target;
use crate::view::{self, draw_main, viewport_height};

/// What session the interface opens with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// None: the first task makes one.
    Fresh,
    /// Resume this session directory here.
    Resume(PathBuf),
    /// Attach to this session of the daemon.
    Attach(String),
}

/// How the interface was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How sessions here are made.
    pub local: LocalOptions,
    /// What it opens with.
    pub start: Start,
}

type Term = Terminal<Kept>;
type Full = Terminal<CrosstermBackend<Stdout>>;

/// Puts the terminal back however the interface ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
        let _ = crossterm::execute!(
            std::io::stdout(),
            DisableBracketedPaste,
            LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Runs the interface on this terminal until the person leaves (the session it drives is ended
/// first, or left running in the daemon).
#[allow(
    clippy::disallowed_methods,
    reason = "the terminal interface's entry: its runtime, made and driven at the binary's edge"
)]
pub fn run(opts: Options) -> Result<(), TuiError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(run_async(opts));
    runtime.shutdown_timeout(Duration::from_millis(200));
    outcome
}

async fn run_async(opts: Options) -> Result<(), TuiError> {
    let rows = crossterm::terminal::size()?.1;
    crossterm::terminal::enable_raw_mode()?;
    let restore = Restore;
    crossterm::execute!(std::io::stdout(), EnableBracketedPaste)?;
    let mut inline = Terminal::with_options(
        Kept::new()?,
        TerminalOptions {
            viewport: Viewport::Inline(viewport_height(rows)),
        },
    )?;
    let mut ui = Ui {
        app: App::new(),
        opts: opts.local.clone(),
        driver: None,
        feed_tx: unbounded_channel().0,
        full: None,
        shown: Vec::new(),
        size: None,
        attached: false,
    };
    let (feed_tx, mut feeds) = unbounded_channel();
    ui.feed_tx = feed_tx;
    match opts.start {
        Start::Fresh => {}
        Start::Resume(dir) => ui.take(Target::Resume(dir), &mut feeds).await,
        Start::Attach(id) => ui.take(Target::Attach(id), &mut feeds).await,
    }
    let mut keys = EventStream::new();
    while !ui.app.quit {
        ui.draw(&mut inline)?;
        tokio::select! {
            event = keys.next() => match event {
                Some(Ok(Event::Key(key))) => {
                    let effect = on_key(&mut ui.app, key);
                    ui.effect(effect, &mut inline, &mut feeds).await?;
                }
                Some(Ok(Event::Paste(text))) if ui.app.screen == Screen::Main => {
                    ui.app.input.push_str(&text.replace(['\n', '\r'], " "));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => ui.app.quit = true,
            },
            // A question's answer keys open after a quiet moment: draw it again then.
            () = arming(ui.app.question_arms_at()) => {}
            feed = feeds.recv() => {
                if let Some(feed) = feed {
                    // After an apply or undo the listing is read again: it shows what is left.
                    let reread = matches!(feed, Feed::Applied(..))
                        && matches!(ui.app.screen, Screen::Diff(_));
                    ui.app.apply(feed);
                    if reread {
                        ui.send(Cmd::Diff { selection: Default::default(), whole: true });
                    }
                }
            }
        }
    }
    ui.leave_screen(&mut inline)?;
    ui.end(&mut feeds).await;
    ui.flush(&mut inline)?;
    inline.clear()?;
    drop(restore);
    println!();
    Ok(())
}

struct Ui {
    app: App,
    opts: LocalOptions,
    driver: Option<UnboundedSender<Cmd>>,
    feed_tx: UnboundedSender<Feed>,
    /// The alternate screen's terminal, while the diff or the sessions list is up.
    full: Option<Full>,
    /// The last transcript lines put into the scrollback (drawn again after a narrowing).
    shown: Vec<crate::state::Line>,
    /// The terminal's size at the last draw.
    size: Option<(u16, u16)>,
    /// The session driven now is the daemon's (attached), not this process's.
    attached: bool,
}

/// How long the daemon waits for this process to let go of a session handed to it: it does at
/// the end of the turn it is in (at once when no task runs).
const DETACH_WAIT_SECS: u64 = 600;

/// How many transcript lines are kept for drawing again after a resize.
const KEPT_LINES: usize = 500;

impl Ui {
    fn draw(&mut self, inline: &mut Term) -> Result<(), TuiError> {
        match (&self.app.screen, &mut self.full) {
            (Screen::Main, _) | (_, None) => {
                self.reflow(inline)?;
                self.flush(inline)?;
                inline.draw(|f| draw_main(f, f.area(), &self.app))?;
            }
            (screen, Some(full)) => {
                let app = &self.app;
                full.draw(|f| {
                    let (area, question) = split_for_question(f.area(), app);
                    match screen {
                        Screen::Diff(diff) => {
                            let session = app.session.as_ref().map_or("", |s| s.0.as_str());
                            view::diff::draw(f, area, diff, session);
                        }
                        Screen::Sessions(list) => view::sessions::draw(f, area, list),
                        Screen::Main => {}
                    }
                    if let Some(question) = question {
                        view::draw_question_panel(f, question, app);
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Puts the finished transcript lines into the scrollback, above the viewport.
    fn flush(&mut self, inline: &mut Term) -> Result<(), TuiError> {
        let lines = self.app.take_lines();
        if lines.is_empty() {
            return Ok(());
        }
        let width = inline.size()?.width;
        let (paragraph, rows) = view::transcript(&lines, width);
        inline.insert_before(rows, |buf| paragraph.render(buf.area, buf))?;
        self.shown.extend(lines);
        let over = self.shown.len().saturating_sub(KEPT_LINES);
        self.shown.drain(..over);
        Ok(())
    }

    /// After the terminal changes size (tmux reflows what it shows, ratatui moves and clears the
    /// viewport), the screen is cleared and drawn anew: the viewport at the top, then as much of
    /// the transcript's end as fits, wrapped at the new width, inserted above it — so no line the
    /// person was reading is lost to a resize while it streams (a terminal that keeps a cleared
    /// screen in its history, as tmux does, then holds those lines twice).
    fn reflow(&mut self, inline: &mut Term) -> Result<(), TuiError> {
        let size = inline.size()?;
        let before = self.size.replace((size.width, size.height));
        if before.is_none_or(|b| b == (size.width, size.height)) {
            return Ok(());
        }
        inline
            .backend_mut()
            .clear_region(ratatui::backend::ClearType::All)?;
        inline.backend_mut().set_cursor_position((0, 0))?;
        inline.autoresize()?;
        let room = size.height.saturating_sub(viewport_height(size.height));
        let mut rows = 0;
        let mut from = self.shown.len();
        while from > 0 {
            let (_, r) = view::transcript(&self.shown[from - 1..from], size.width);
            if rows + r > room {
                break;
            }
            rows += r;
            from -= 1;
        }
        if from < self.shown.len() {
            let (paragraph, rows) = view::transcript(&self.shown[from..], size.width);
            inline.insert_before(rows, |buf| paragraph.render(buf.area, buf))?;
        }
        Ok(())
    }

    fn send(&mut self, cmd: Cmd) {
        let sent = self.driver.as_ref().is_some_and(|d| d.send(cmd).is_ok());
        if !sent {
            self.app
                .apply(Feed::Failed("no session to send that to".into()));
        }
    }

    async fn effect(
        &mut self,
        effect: Effect,
        inline: &mut Term,
        feeds: &mut UnboundedReceiver<Feed>,
    ) -> Result<(), TuiError> {
        match effect {
            Effect::None => {}
            Effect::Quit => self.app.quit = true,
            Effect::Detach => self.detach(),
            Effect::Send(cmd) => self.send(cmd),
            Effect::Start(task) => {
                let started = match local::builder(&self.opts, Some(&task)) {
                    Ok(builder) => local::start(builder, Opening::New, self.feed_tx.clone()).await,
                    Err(e) => Err(e),
                };
                match started {
                    Ok(driver) => {
                        let _ = driver.send(Cmd::Input(task));
                        self.driver = Some(driver);
                        self.attached = false;
                    }
                    Err(e) => {
                        self.app.phase = Phase::NoSession;
                        self.app.apply(Feed::Failed(e.to_string()));
                    }
                }
            }
            Effect::OpenDiff => {
                self.app.screen = Screen::Diff(DiffView::default());
                self.enter_screen()?;
                self.send(Cmd::Diff {
                    selection: Default::default(),
                    whole: true,
                });
            }
            Effect::OpenSessions => match list_sessions().await {
                Ok(list) => {
                    self.app.screen = Screen::Sessions(list);
                    self.enter_screen()?;
                }
                Err(e) => self.app.apply(Feed::Failed(e.to_string())),
            },
            Effect::Back => self.leave_screen(inline)?,
            Effect::Take(target) => {
                self.leave_screen(inline)?;
                self.take(target, feeds).await;
            }
        }
        Ok(())
    }

    fn enter_screen(&mut self) -> Result<(), TuiError> {
        if self.full.is_none() {
            crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
            let mut full = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
            full.clear()?;
            self.full = Some(full);
        }
        Ok(())
    }

    fn leave_screen(&mut self, inline: &mut Term) -> Result<(), TuiError> {
        self.app.screen = Screen::Main;
        if let Some(mut full) = self.full.take() {
            Backend::flush(full.backend_mut())?;
            crossterm::execute!(std::io::stdout(), LeaveAlternateScreen)?;
            inline.clear()?;
        }
        Ok(())
    }

    /// The detach key: a session of this process's, working or idle, is handed to the daemon
    /// (`sessions.adopt`, which asks this process to let go: the runtime lets go at once when
    /// no task runs, at the next turn boundary when one does, and [`Feed::HandedOver`] then
    /// leaves); one attached to the daemon is left running there.
    fn detach(&mut self) {
        if self.attached
            && let Some(id) = self.app.session.as_ref().map(|s| s.0.clone())
        {
            let follow = chock_client::handover::how_to_follow(&id);
            self.app.say(
                Kind::Note,
                &format!("chock: left session {id}; it goes on in the daemon; follow it: {follow}"),
            );
            self.app.quit = true;
            return;
        }
        let Some(id) = self.app.detach_asked() else {
            return;
        };
        let feed = self.feed_tx.clone();
        tokio::spawn(async move {
            if let Err(e) = chock_client::handover::hand_to_daemon(&id, DETACH_WAIT_SECS).await {
                let _ = feed.send(Feed::Failed(format!(
                    "not handed over: {e}; the session goes on here"
                )));
            }
        });
    }

    /// Ends the session driven now (a daemon's is left running), showing what comes back.
    async fn end(&mut self, feeds: &mut UnboundedReceiver<Feed>) {
        let Some(driver) = self.driver.take() else {
            return;
        };
        // Handed to the daemon: it is the daemon's to end.
        if self.app.handed_over {
            return;
        }
        if self.app.phase == Phase::Working {
            let _ = driver.send(Cmd::Interrupt);
        }
        if driver.send(Cmd::End).is_err() {
            return;
        }
        let wait = async {
            while let Some(feed) = feeds.recv().await {
                let ended = matches!(feed, Feed::Ended(_));
                self.app.apply(feed);
                if ended {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(60), wait).await;
    }

    /// Resumes the session in `dir` here and drives it.
    async fn resume(&self, dir: PathBuf) -> Result<UnboundedSender<Cmd>, TuiError> {
        let builder = local::builder(&self.opts, None)?;
        local::start(builder, Opening::Resume(dir), self.feed_tx.clone()).await
    }

    /// Leaves the session driven now and takes `target` instead.
    async fn take(&mut self, target: Target, feeds: &mut UnboundedReceiver<Feed>) {
        self.end(feeds).await;
        self.attached = false;
        let mut fresh = App::new();
        fresh.input = std::mem::take(&mut self.app.input);
        // What the old session said is already in the scrollback, or about to be.
        for line in self.app.take_lines() {
            fresh.say(line.kind, &line.text);
        }
        self.app = fresh;
        match target {
            Target::Resume(dir) => {
                let shown = dir.display().to_string();
                match self.resume(dir).await {
                    Ok(driver) => {
                        self.app.say(Kind::Note, &format!("chock: resumed {shown}"));
                        self.driver = Some(driver);
                    }
                    Err(e) => self.app.apply(Feed::Failed(e.to_string())),
                }
            }
            Target::Fork { dir, turn } => {
                let root = dir.parent().map(Path::to_path_buf).unwrap_or_default();
                let forked = match chock_runtime::review::fork(dir, turn).await {
                    Ok(forked) => forked,
                    Err(e) => {
                        self.app.apply(Feed::Failed(e.message));
                        return;
                    }
                };
                match self.resume(root.join(&forked.session)).await {
                    Ok(driver) => {
                        self.app.say(
                            Kind::Note,
                            &format!(
                                "chock: forked {} at the end of turn {turn} as {}: its files, ratchet and conversation are that turn's",
                                forked.origin.session, forked.session
                            ),
                        );
                        self.driver = Some(driver);
                    }
                    Err(e) => self.app.apply(Feed::Failed(e.to_string())),
                }
            }
            Target::Attach(id) => match daemon::attach(&id, self.feed_tx.clone()).await {
                Ok(driver) => {
                    self.attached = true;
                    self.app.say(
                        Kind::Note,
                        &format!("chock: attached to {id} in the daemon; leaving detaches"),
                    );
                    self.driver = Some(driver);
                }
                Err(e) => self.app.apply(Feed::Failed(e.to_string())),
            },
        }
    }
}

/// The diff or sessions screen's area, and below it the question's while one is open: the
/// question is drawn on every screen, in its own rows.
pub fn split_for_question(area: Rect, app: &App) -> (Rect, Option<Rect>) {
    if app.question().is_none() {
        return (area, None);
    }
    let rows = view::QUESTION_PANEL.min(area.height / 2);
    let [screen, question] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(rows)]).areas(area);
    (screen, Some(question))
}

/// Draws the main screen of `app` with its waiting transcript lines into any backend (the
/// snapshot tests use ratatui's test backend), as the loop does.
pub fn draw_once<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> Result<(), B::Error> {
    let lines = app.take_lines();
    if !lines.is_empty() {
        let width = terminal.size()?.width;
        let (paragraph, rows) = view::transcript(&lines, width);
        terminal.insert_before(rows, |buf| paragraph.render(buf.area, buf))?;
    }
    terminal.draw(|f| draw_main(f, f.area(), app))?;
    Ok(())
}

/// Sleeps until `at` (a question's answer keys open), or forever when there is nothing to wait
/// for.
async fn arming(at: Option<std::time::Instant>) {
    match at {
        Some(at) if at > std::time::Instant::now() => {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
        _ => std::future::pending().await,
    }
}
