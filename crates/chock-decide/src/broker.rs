//! The approval broker: the answerers of one session, the questions open now, and the first valid
//! answer to each.
//!
//! A question has an id unique in the session (`q-<n>`, given by the [`crate::Pipeline`] before it
//! logs the ask). It goes at once to every pull-style [`Answerer`] of its [`Role`] (a terminal, a
//! reviewer model) and is open to push-style answers ([`ApprovalBroker::answer`]: a daemon client, a
//! browser, a TUI, attached with [`ApprovalBroker::attach`]). The first valid answer wins; every
//! answerer and every subscriber ([`ApprovalBroker::subscribe`]) is then told the question is
//! resolved. An answer to an id that is not open is a typed [`AnswerError`]. Nobody to ask, nobody
//! answering in time, or every answerer giving up is [`Reply::Nobody`], which the pipeline turns
//! into a refusal. So is the waiter going away: a question whose [`Opened`] (or whose
//! [`ApprovalBroker::wait`] or [`ApprovalBroker::ask`] future) is dropped before it is resolved —
//! a daemon's client that left mid-question — is closed unanswered and everyone is told, so no
//! later answer is taken for an act that can no longer happen.
//!
//! Which answers a question takes is [`chock_protocol::log::answers_for`]'s, for every answerer:
//! an answer it does not offer (yes for the session to an apply) is not valid.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{broadcast, oneshot, watch};

use crate::error::AnswerError;

mod carried;
mod question;
use question::offered;
pub use question::{
    Answer, AnswerFuture, Answerer, Nobody, Notice, Question, QuestionKind, Reply, Resolution,
    ReviewerVerdict, Role,
};

/// A question open to answers.
struct Open {
    role: Role,
    kind: QuestionKind,
    action: Option<String>,
    secret: bool,
    push: Option<oneshot::Sender<(String, Answer)>>,
}

#[derive(Default)]
struct Questions {
    open: HashMap<String, Open>,
    /// Closed questions and who answered them (`None`: nobody).
    closed: HashMap<String, Option<String>>,
}

struct Shared {
    questions: Mutex<Questions>,
    /// (action name, detail) pairs a person allowed for the session.
    session_allows: Mutex<HashSet<(String, String)>>,
    /// The last question number given (`None`: not yet read from the log).
    last_id: Mutex<Option<u64>>,
    /// How many push-style clients are attached.
    clients: watch::Sender<usize>,
    notices: broadcast::Sender<Notice>,
    /// Set by [`ApprovalBroker::keep_questions_open`]: a question whose waiter goes away stays open.
    keep_open: AtomicBool,
    /// Questions an earlier owner of the session left open (`carried::Carried`).
    carried: Mutex<Vec<carried::Carried>>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            questions: Mutex::default(),
            session_allows: Mutex::default(),
            last_id: Mutex::default(),
            clients: watch::Sender::new(0),
            notices: broadcast::Sender::new(64),
            keep_open: AtomicBool::new(false),
            carried: Mutex::default(),
        }
    }
}

/// A question registered as open ([`ApprovalBroker::open`]), not yet put to the answerers.
/// Dropped before [`ApprovalBroker::wait`] returns (the waiter went away), it closes the question
/// unanswered and tells every answerer and subscriber so.
#[derive(Debug)]
pub struct Opened {
    push_rx: oneshot::Receiver<(String, Answer)>,
    waiter: Waiter,
}

impl Opened {
    /// The caller gives the question up itself if it goes away (the pipeline: it logs the
    /// refusal between closing the question and telling everyone), so dropping this does not.
    pub(crate) fn given_up_by_caller(&mut self) {
        self.waiter.armed = false;
    }
}

/// The waiting side of one open question: while armed, dropping it gives the question up.
#[derive(Debug)]
struct Waiter {
    broker: ApprovalBroker,
    id: String,
    role: Role,
    armed: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.armed {
            self.broker.give_up(&self.id, self.role);
        }
    }
}

/// The broker. Clones share everything (answerers, open questions, session allows).
#[derive(Clone, Default)]
pub struct ApprovalBroker {
    answerers: Vec<Arc<dyn Answerer>>,
    shared: Arc<Shared>,
    timeout: Option<Duration>,
}

impl fmt::Debug for ApprovalBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalBroker")
            .field(
                "answerers",
                &self.answerers.iter().map(|a| a.name()).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A push-style answerer attached to the broker: while any is attached, questions to people wait
/// for its answers too. Dropping it detaches it.
#[derive(Debug)]
pub struct Client {
    broker: ApprovalBroker,
    name: String,
}

impl Client {
    /// Answers question `question` as this client.
    pub fn answer(&self, question: &str, answer: Answer) -> Result<(), AnswerError> {
        self.broker.answer(question, &self.name, answer)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.broker
            .shared
            .clients
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ApprovalBroker {
    /// A broker with nobody to ask: every question is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pull-style answerer.
    #[must_use]
    pub fn with(mut self, answerer: Arc<dyn Answerer>) -> Self {
        self.answerers.push(answerer);
        self
    }

    /// Gives up (a refusal) when no answer arrives within `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Attaches a push-style answerer named `name` (a person's client): it answers with
    /// [`Client::answer`] (or [`ApprovalBroker::answer`]) and learns of questions through
    /// [`ApprovalBroker::subscribe`].
    pub fn attach(&self, name: &str) -> Client {
        self.shared.clients.send_modify(|n| *n += 1);
        Client {
            broker: self.clone(),
            name: name.to_string(),
        }
    }

    /// Every question asked and resolved from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.shared.notices.subscribe()
    }

    /// Whether anyone of `role` could be asked.
    pub fn has(&self, role: Role) -> bool {
        self.answerers.iter().any(|a| a.role() == role)
            || (role == Role::Human && *self.shared.clients.borrow() > 0)
    }

    /// Whether anyone at all could be asked.
    pub fn can_ask(&self) -> bool {
        self.has(Role::Human) || self.has(Role::Reviewer)
    }

    /// Whether a person already said "yes for this session" to exactly this act.
    pub fn allowed_for_session(&self, action: &str, detail: &str) -> bool {
        lock(&self.shared.session_allows).contains(&(action.to_string(), detail.to_string()))
    }

    /// Drops every "yes for this session": called when the session's policy narrows, so an earlier
    /// yes never outlives a restriction the agent (or anyone) placed afterwards.
    pub fn forget_session_allows(&self) {
        lock(&self.shared.session_allows).clear();
    }

    /// From now on a question whose waiter goes away is left open, in the broker and (the
    /// pipeline writes no answer for it) in the log: for a daemon that stops with a question open,
    /// so that whoever resumes the session sees it was never answered, rather than a refusal
    /// nobody gave.
    pub fn keep_questions_open(&self) {
        self.shared.keep_open.store(true, Ordering::SeqCst);
    }

    /// Whether [`ApprovalBroker::keep_questions_open`] was called.
    pub fn keeps_questions_open(&self) -> bool {
        self.shared.keep_open.load(Ordering::SeqCst)
    }

    /// The waiter of question `id` (put to `role`) went away: the question is closed unanswered
    /// — an answer that arrived but was never read by the waiter does not stand, nothing will act
    /// on it — and every answerer and subscriber is told. Once per question; nothing when
    /// [`ApprovalBroker::keep_questions_open`] was called.
    fn give_up(&self, id: &str, role: Role) {
        if self.withdraw(id) {
            self.tell_nobody(id, role);
        }
    }

    /// The first half of [`ApprovalBroker::give_up`]: closes `id` unanswered, telling nobody yet
    /// (the pipeline logs it in between); `false` when it was given up already or is kept open.
    pub(crate) fn withdraw(&self, id: &str) -> bool {
        if self.keeps_questions_open() {
            return false;
        }
        let mut questions = lock(&self.shared.questions);
        if matches!(questions.closed.get(id), Some(None)) {
            return false;
        }
        questions.open.remove(id);
        questions.closed.insert(id.to_string(), None);
        true
    }

    /// The second half of [`ApprovalBroker::give_up`]: tells everyone `id` closed unanswered.
    pub(crate) fn tell_nobody(&self, id: &str, role: Role) {
        self.resolve(
            role,
            Resolution {
                question: id.to_string(),
                by: None,
                answer: None,
            },
        );
    }

    /// Tells every answerer of `role` and every subscriber how a question was resolved.
    fn resolve(&self, role: Role, resolution: Resolution) {
        for answerer in self.answerers.iter().filter(|a| a.role() == role) {
            answerer.resolved(&resolution);
        }
        let _ = self.shared.notices.send(Notice::Resolved(resolution));
    }

    /// The next question id; `seed` gives the highest number already used in the session's log,
    /// read once (a resumed session goes on from there).
    pub(crate) fn next_question_id(&self, seed: impl FnOnce() -> u64) -> String {
        let mut last = lock(&self.shared.last_id);
        let n = last.get_or_insert_with(seed);
        *n += 1;
        format!("q-{n}")
    }

    /// A push-style answer to question `question` by `by`. The first valid answer wins; an id that
    /// was never asked, one already answered, an answer that does not fit the question, or a
    /// question put to reviewers only, is an error and changes nothing.
    pub fn answer(&self, question: &str, by: &str, answer: Answer) -> Result<(), AnswerError> {
        let mut questions = lock(&self.shared.questions);
        if let Some(winner) = questions.closed.get(question) {
            return Err(AnswerError::AlreadyAnswered {
                question: question.to_string(),
                by: winner.clone(),
            });
        }
        let Some(open) = questions.open.get_mut(question) else {
            return Err(AnswerError::Unknown(question.to_string()));
        };
        if open.role != Role::Human {
            return Err(AnswerError::NotForPeople(question.to_string()));
        }
        if !answer.fits(open.kind, open.action.as_deref(), open.secret) {
            return Err(AnswerError::DoesNotFit {
                question: question.to_string(),
                answer: answer.kind(),
                offered: offered(open.kind, open.action.as_deref(), open.secret),
            });
        }
        let push = open.push.take();
        questions.open.remove(question);
        questions
            .closed
            .insert(question.to_string(), Some(by.to_string()));
        drop(questions);
        if let Some(push) = push {
            // The asking side holds the receiver until it has read the winner.
            let _ = push.send((by.to_string(), answer));
        }
        Ok(())
    }

    /// Closes `id` for `winner` unless a push answer closed it first; `true` when this call closed it.
    fn close(&self, id: &str, winner: Option<&str>) -> bool {
        let mut questions = lock(&self.shared.questions);
        if questions.open.remove(id).is_none() {
            return false;
        }
        questions
            .closed
            .insert(id.to_string(), winner.map(str::to_string));
        true
    }

    /// Puts `question` to every answerer of `role` at once (and to attached clients, for people);
    /// the first valid answer wins. An answer the question does not offer (a reply to an
    /// approval, a yes to a free question, yes for the session to an apply) is not valid and is
    /// ignored.
    pub async fn ask(&self, role: Role, question: &Question) -> Reply {
        let opened = self.open(role, question);
        self.wait(role, question, opened).await
    }

    /// Registers `question` as open, so an answer by its id is taken from now on, and tells the
    /// subscribers. [`ApprovalBroker::wait`] then puts it to the answerers. Whoever learns the
    /// question's id after this (a live event, a notice) can answer it.
    pub fn open(&self, role: Role, question: &Question) -> Opened {
        let (push_tx, push_rx) = oneshot::channel();
        lock(&self.shared.questions).open.insert(
            question.id.clone(),
            Open {
                role,
                kind: question.kind,
                action: question.action.clone(),
                secret: question.secret,
                push: Some(push_tx),
            },
        );
        let _ = self.shared.notices.send(Notice::Asked {
            question: question.clone(),
            role,
        });
        Opened {
            push_rx,
            waiter: Waiter {
                broker: self.clone(),
                id: question.id.clone(),
                role,
                armed: true,
            },
        }
    }

    /// Puts an [`ApprovalBroker::open`]ed question to the answerers of `role` and returns the
    /// first valid answer (or why nobody gave one); every answerer and subscriber is told it is
    /// resolved. Dropped before it returns, the question is given up (see [`Opened`]).
    pub async fn wait(&self, role: Role, question: &Question, opened: Opened) -> Reply {
        let id = question.id.clone();
        let Opened {
            mut push_rx,
            mut waiter,
        } = opened;
        let reply = self.race(role, question, &mut push_rx).await;
        waiter.armed = false;
        if let (
            Reply::Answered {
                answer: Answer::AllowSession,
                ..
            },
            Some(action),
        ) = (&reply, &question.action)
        {
            lock(&self.shared.session_allows).insert((action.clone(), question.text.clone()));
        }
        let resolution = Resolution {
            question: id,
            by: match &reply {
                Reply::Answered { by, .. } => Some(by.clone()),
                Reply::Nobody(_) => None,
            },
            answer: match &reply {
                Reply::Answered { answer, .. } => Some(answer.kind()),
                Reply::Nobody(_) => None,
            },
        };
        self.resolve(role, resolution);
        reply
    }

    async fn race(
        &self,
        role: Role,
        question: &Question,
        push_rx: &mut oneshot::Receiver<(String, Answer)>,
    ) -> Reply {
        type Raced<'a> = Pin<Box<dyn Future<Output = Option<(String, Answer)>> + Send + 'a>>;
        let id = question.id.as_str();
        let mut race: FuturesUnordered<Raced<'_>> = self
            .answerers
            .iter()
            .filter(|a| a.role() == role)
            .map(|a| {
                let a = Arc::clone(a);
                Box::pin(async move { a.answer(question).await.map(|answer| (a.name(), answer)) })
                    as Raced<'_>
            })
            .collect();
        let mut clients = self.shared.clients.subscribe();
        let pushing = role == Role::Human && *clients.borrow() > 0;
        if race.is_empty() && !pushing {
            self.close(id, None);
            return Reply::Nobody(Nobody::NoAnswerer);
        }
        let mut push_done = false;
        let first_valid = async {
            loop {
                let pulled = tokio::select! {
                    pushed = &mut *push_rx, if pushing => {
                        // Only `answer` sends, and it closed the question first.
                        push_done = true;
                        return pushed.ok();
                    }
                    changed = clients.changed(), if pushing && race.is_empty() => {
                        if changed.is_err() || *clients.borrow() == 0 {
                            return None;
                        }
                        continue;
                    }
                    pulled = race.next(), if !race.is_empty() => pulled.flatten(),
                    else => return None,
                };
                let Some((name, answer)) = pulled else {
                    // That answerer gave up; the others (and any client) may still answer.
                    continue;
                };
                // A reviewer cannot grant a whole session.
                let answer = match (role, answer) {
                    (Role::Reviewer, Answer::AllowSession) => Answer::AllowOnce {
                        reasons: String::new(),
                    },
                    (_, answer) => answer,
                };
                if !answer.fits(question.kind, question.action.as_deref(), question.secret) {
                    continue;
                }
                if self.close(id, Some(&name)) {
                    return Some((name, answer));
                }
                // A push answer closed it a moment earlier: that one won.
                push_done = true;
                return (&mut *push_rx).await.ok();
            }
        };
        let outcome = match self.timeout {
            Some(timeout) => match tokio::time::timeout(timeout, first_valid).await {
                Ok(Some(won)) => Ok(won),
                Ok(None) => Err(Nobody::Dropped),
                Err(_) => Err(Nobody::TimedOut),
            },
            None => first_valid.await.ok_or(Nobody::Dropped),
        };
        match outcome {
            Ok((by, answer)) => Reply::Answered { by, answer },
            Err(why) if self.close(id, None) || push_done => Reply::Nobody(why),
            // Closed by a push answer at the last moment: it stands.
            Err(why) => match push_rx.await {
                Ok((by, answer)) => Reply::Answered { by, answer },
                Err(_) => Reply::Nobody(why),
            },
        }
    }
}
