//! How the review's answers change what the interface knows: a diff loaded into the diff screen,
//! an apply or undo done, and a refusal of either.

use chock_protocol::rpc::{Applied, ReviewDiff, RpcError};

use super::{App, Kind, Screen, clean};
use crate::feed::Review;

impl App {
    /// A diff asked for by the diff screen, shown there (a whole one, or a selection's digest).
    pub(super) fn diff(&mut self, review: Review, diff: ReviewDiff) {
        match (&mut self.screen, review) {
            (Screen::Diff(view), Review::Whole) => view.load(diff),
            (Screen::Diff(view), Review::Selected) => view.selected_digest(diff),
            _ => {}
        }
    }

    /// An apply or undo done: said in the transcript and the status line, and the diff screen emptied.
    pub(super) fn applied(&mut self, review: Review, applied: &Applied) {
        let verb = if review == Review::Undo {
            "undone"
        } else {
            "applied"
        };
        let text = match &applied.apply_id {
            Some(id) => format!(
                "chock: {verb} as {id}: {} (digest {})",
                applied.paths.join(", "),
                applied.digest.as_deref().unwrap_or("-")
            ),
            None => format!(
                "chock: nothing to write: the project already holds {} selected change(s)",
                applied.already.len()
            ),
        };
        if review == Review::Apply {
            self.last_apply.clone_from(&applied.apply_id);
        } else {
            self.last_apply = None;
        }
        self.say(Kind::Note, &text);
        self.status = Some((Kind::Note, clean(&text)));
        if let Screen::Diff(view) = &mut self.screen {
            view.applied = Some(clean(&text));
            view.files.clear();
            view.hunks.clear();
            view.digest = None;
        }
    }

    /// A diff, apply or undo refused: an apply's or undo's refusal is said in the transcript too.
    pub(super) fn review_failed(&mut self, review: Review, error: &RpcError) {
        let what = match review {
            Review::Whole | Review::Selected => "diff",
            Review::Apply => "apply",
            Review::Undo => "undo",
        };
        let text = format!("chock: {what} refused: {}", error.message);
        if matches!(review, Review::Apply | Review::Undo) {
            self.say(Kind::Error, &text);
        }
        self.status = Some((Kind::Error, clean(&text)));
        if let Screen::Diff(view) = &mut self.screen {
            view.applied = Some(clean(&text));
        }
    }
}
