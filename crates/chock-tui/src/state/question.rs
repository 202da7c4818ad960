//! The question on screen and when its answer keys start to count: never for keys typed for
//! something else as it opened.

use std::time::{Duration, Instant};

use super::App;
use crate::feed::Asked;

/// How long a question must be up with no key pressed before its answer keys count.
pub const ARM_DELAY: Duration = Duration::from_millis(750);

impl App {
    /// The question on screen, if any.
    pub fn question(&self) -> Option<&Asked> {
        self.questions.front()
    }

    /// Whether the question on screen takes answer keys at `now`: it has been up, with no key
    /// pressed, for [`ARM_DELAY`]. So keys typed for something else (a follow-up being written
    /// when the question opens) never answer it: every key while it is up starts the wait again.
    pub fn question_armed(&self, now: Instant) -> bool {
        self.question_quiet_since
            .is_some_and(|since| now.saturating_duration_since(since) >= ARM_DELAY)
    }

    /// When the question on screen starts taking answer keys, if it does not yet.
    pub fn question_arms_at(&self) -> Option<Instant> {
        self.question()?;
        self.question_quiet_since.map(|since| since + ARM_DELAY)
    }

    /// A key was pressed while a question is up: its wait starts again at `now`.
    pub fn question_key_pressed(&mut self, now: Instant) {
        if self.question().is_some() {
            self.question_quiet_since = Some(now);
        }
    }
}
