//! What flows between the interface and the session it drives: [`Cmd`]s go to a driver, [`Feed`]s
//! come back. The two drivers (an in-process session, a daemon's session) speak these same types,
//! so the screens never know which one they show.

use chock_protocol::live::Ended;
use chock_protocol::live::{AgentEvent, Summary};
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{Applied, ReviewDiff, RpcError, Selection};

/// An operation the person asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Cmd {
    /// A task or a follow-up.
    Input(String),
    /// Stop the current turn.
    Interrupt,
    /// Answer question `question`.
    Answer {
        /// The question's id.
        question: String,
        /// The answer.
        answer: AnswerKind,
        /// The reply to a free question.
        reply: Option<String>,
    },
    /// The session's diff: the whole of it (`whole`) or only the selection, for its digest.
    Diff {
        /// What to show.
        selection: Selection,
        /// Whether this is the listing (true) or the selection's digest (false).
        whole: bool,
    },
    /// Apply `selection`, pinned to the digest the person saw for it.
    Apply {
        /// The selection.
        selection: Selection,
        /// Its digest, as shown.
        digest: String,
    },
    /// Revert the apply named.
    Undo(String),
    /// End the session (a daemon's session is only left: it goes on there).
    End,
}

/// A question put to the person, as both drivers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// Its id (the answer names it).
    pub id: String,
    /// Whether it is an approval (yes once / for the session / no) or a free question.
    pub approval: bool,
    /// The act (`exec.system.echo`), raw.
    pub action: Option<String>,
    /// The act's exact detail, or the model's question, raw.
    pub what: String,
    /// What the table said and which rule, raw.
    pub decided_by: Option<String>,
    /// Lines shown before the act (an apply's paths), raw.
    pub context: Vec<String>,
    /// The answer is a secret (a password git asks for): typed as bullets, never drawn, kept in no
    /// transcript, and wiped from the input once sent.
    pub secret: bool,
}

impl Asked {
    /// The answers it takes, as chock-protocol decides them for every answerer (an apply: yes
    /// once or no, never for the session): the keys offered and read.
    pub fn answers(&self) -> Vec<AnswerKind> {
        let act = self
            .approval
            .then(|| self.action.as_deref().unwrap_or_default());
        chock_protocol::log::answers_for(chock_protocol::log::Asked::Person, act)
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// The runtime said how.
    Ended(Ended),
    /// The daemon's session went idle (it does not say why).
    Idle,
    /// The loop failed; the session has ended.
    Failed(String),
}

/// Which review call a result answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// The whole diff (the listing).
    Whole,
    /// The selection's digest.
    Selected,
    /// An apply.
    Apply,
    /// An undo.
    Undo,
}

/// Something the interface is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Feed {
    /// The session exists (built, resumed or attached).
    Started {
        /// Its id.
        session: String,
        /// The provider's name.
        provider: String,
        /// The model.
        model: String,
    },
    /// The conversation a resumed session carries on from, as its log rebuilds it: shown before
    /// its first new turn.
    Earlier(Vec<chock_runtime::conversation::Message>),
    /// A live event.
    Live(Box<AgentEvent>),
    /// A question for the person is open.
    Asked(Asked),
    /// A question is closed.
    Resolved {
        /// Its id.
        question: String,
        /// Who answered (None: nobody).
        by: Option<String>,
        /// The answer (None: nobody answered).
        answer: Option<AnswerKind>,
    },
    /// The task ended; the session waits for a follow-up.
    TaskEnded(TaskOutcome),
    /// The session ended (or was left, for a daemon's session).
    Ended(Option<Summary>),
    /// The session moved to the daemon (a detach key here, or `chock detach` from elsewhere): it
    /// goes on there, and the interface leaves. `follow` says how to follow it
    /// (`chock attach ID`, the browser's address).
    HandedOver {
        /// How to follow it.
        follow: String,
    },
    /// A diff.
    Diff(Review, Box<ReviewDiff>),
    /// An apply or undo was written.
    Applied(Review, Applied),
    /// A review call was refused or failed (typed: the error's kind says which).
    ReviewFailed(Review, RpcError),
    /// The driver could not do what was asked.
    Failed(String),
}
