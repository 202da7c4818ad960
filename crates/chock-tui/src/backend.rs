//! The crossterm backend with the cursor's position kept here instead of asked of the terminal.
//!
//! ratatui asks the terminal where the cursor is (`CSI 6 n`) whenever an inline viewport is
//! resized or cleared; the answer comes on standard input, where the key reader is waiting, so it
//! never reaches ratatui and the query times out — every resize while streaming would fail. The
//! terminal is asked once, before keys are read; after that the position is the one last set (or
//! moved by appended lines), which is where ratatui itself put the cursor.

use std::io::Stdout;

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

/// [`CrosstermBackend`] on standard output, with a kept cursor position.
#[derive(Debug)]
pub struct Kept {
    inner: CrosstermBackend<Stdout>,
    cursor: Position,
}

impl Kept {
    /// The backend, with the cursor's position asked of the terminal now (before any key reader
    /// runs).
    pub fn new() -> std::io::Result<Self> {
        let mut inner = CrosstermBackend::new(std::io::stdout());
        let cursor = inner.get_cursor_position()?;
        Ok(Self { inner, cursor })
    }

    fn clamp(&self, mut at: Position) -> Position {
        if let Ok(size) = self.inner.size() {
            at.y = at.y.min(size.height.saturating_sub(1));
            at.x = at.x.min(size.width.saturating_sub(1));
        }
        at
    }
}

impl Backend for Kept {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.inner.append_lines(n)?;
        let at = Position::new(self.cursor.x, self.cursor.y.saturating_add(n));
        self.cursor = self.clamp(at);
        Ok(())
    }

    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        Ok(self.clamp(self.cursor))
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        let at = position.into();
        self.inner.set_cursor_position(at)?;
        self.cursor = at;
        Ok(())
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }

    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Backend::flush(&mut self.inner)
    }
}
