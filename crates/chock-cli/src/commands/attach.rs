//! `chock attach SESSION` and `chock run --daemon`: this terminal as a client of the daemon. The
//! session's live items are printed as `chock run` prints them; its questions to a person are put
//! to the one terminal prompt (`TerminalAnswerer`) and the answer goes back by question id — the
//! first answer from any client wins, and one given elsewhere is reported here. Ctrl-C detaches;
//! the session goes on in the daemon.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use chock_client::{ClientError, DaemonClient};
use chock_decide::{Answer, Question, QuestionKind};
use chock_protocol::live::Ended;
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{
    AnswerParams, Approval, Call, Done, Notice, Pending, PendingParams, SessionState, StartParams,
    Started, SubscribeParams, Subscribed,
};
use chock_terminal::TerminalAnswerer;
use chock_tools::events::{AgentEvent, EventSink};

use super::run::RunArgs;
use super::run::output::{HumanSink, print_summary};
use crate::exit::{self, Exit};
use crate::say::{say, say_err};

/// Arguments of `chock attach`.
#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// The session (its id, or a unique prefix of it).
    pub session: String,
    /// Also print each decision's rule.
    #[arg(long, short)]
    pub verbose: bool,
}

/// A client error as the command's exit: no daemon or a refusal is a failure (1), an unknown
/// session bad input (2).
pub(crate) fn client_error(err: &ClientError) -> anyhow::Error {
    let status = match err {
        ClientError::Rpc(e) => match e.kind() {
            chock_protocol::rpc::ErrorKind::UnknownSession
            | chock_protocol::rpc::ErrorKind::BadInput
            | chock_protocol::rpc::ErrorKind::InvalidParams => exit::BAD_INPUT,
            _ => exit::FAILURE,
        },
        _ => exit::FAILURE,
    };
    Exit::new(status, err.to_string()).into()
}

/// Connects to this user's daemon.
pub(crate) async fn connect() -> anyhow::Result<DaemonClient> {
    DaemonClient::connect().await.map_err(|e| client_error(&e))
}

/// The sessions the running daemon owns and their states (`idle`, `working`, `stopped`, …);
/// `None` when no daemon answers within two seconds.
#[allow(
    clippy::disallowed_methods,
    reason = "a sync command's one question to the daemon, at the binary's edge"
)]
pub(crate) fn daemon_states() -> Option<std::collections::HashMap<String, String>> {
    let socket = chock_dirs::socket_path().ok()?;
    if !socket.exists() {
        return None;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let ask = async {
            let mut client = DaemonClient::unix(&socket).await.ok()?;
            let list: chock_protocol::rpc::SessionList = client
                .call(&Call::SessionsList(chock_protocol::rpc::NoParams {}))
                .await
                .ok()?;
            client.close().await;
            Some(
                list.sessions
                    .into_iter()
                    .filter(|s| s.owned)
                    .map(|s| {
                        let state = serde_json::to_value(s.state)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        (s.session, state)
                    })
                    .collect(),
            )
        };
        tokio::time::timeout(std::time::Duration::from_secs(2), ask)
            .await
            .ok()
            .flatten()
    })
}

#[allow(
    clippy::disallowed_methods,
    reason = "the attaching command's runtime, made at the binary's edge"
)]
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

#[allow(
    clippy::disallowed_methods,
    reason = "`chock attach` drives its runtime at the binary's edge"
)]
pub fn run(args: &AttachArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async {
        let client = connect().await?;
        attach(client, &args.session, args.verbose, false, false).await
    })
}

/// `chock run --daemon`: the task started in the daemon, then attached until it ends.
#[allow(
    clippy::disallowed_methods,
    reason = "`chock run --daemon` drives its runtime at the binary's edge"
)]
pub(crate) fn run_in_daemon(args: &RunArgs, task: String) -> anyhow::Result<ExitCode> {
    let project = match &args.project {
        Some(p) => p.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    let project = std::path::absolute(&project).context("the project's path")?;
    runtime()?.block_on(async {
        let mut client = connect().await?;
        let started: Started = client
            .call(&Call::SessionsStart(StartParams {
                task,
                project: project.display().to_string(),
                provider: args.provider.clone(),
                model: args.model.clone(),
                subscribe: true,
            }))
            .await
            .map_err(|e| client_error(&e))?;
        say!(
            "chock: session {} in the daemon (provider {}, model {})",
            started.session,
            started.provider,
            started.model
        );
        attach(client, &started.session, args.verbose, true, true).await
    })
}

/// The question a prompt shows for `approval`.
fn question_of(approval: &Approval) -> Question {
    Question {
        secret: approval.secret,
        id: approval.question.clone(),
        kind: if approval.action.is_some() {
            QuestionKind::Approval
        } else {
            QuestionKind::Question
        },
        call_id: approval.call_id.clone(),
        action: approval.action.clone(),
        decided_by: approval.decided_by.clone(),
        text: approval.what.clone(),
        context: Vec::new(),
        reviewer: None,
    }
}

fn answer_params(session: &str, question: &str, answer: Answer) -> AnswerParams {
    let (kind, reasons, reply) = match answer {
        Answer::AllowOnce { .. } => (AnswerKind::AllowOnce, None, None),
        Answer::AllowSession => (AnswerKind::AllowSession, None, None),
        Answer::Deny { .. } => (AnswerKind::Deny, None, None),
        Answer::Reply { text } => (AnswerKind::Reply, None, Some(text)),
    };
    AnswerParams {
        session: session.to_string(),
        question: question.to_string(),
        answer: kind,
        reasons,
        reply,
    }
}

/// Follows `session` on `client`: live items printed, questions put to the terminal. Ends when
/// the session ends (or, with `until_idle`, when its task ends), or on Ctrl-C (detached).
async fn attach(
    mut client: DaemonClient,
    session: &str,
    verbose: bool,
    until_idle: bool,
    subscribed: bool,
) -> anyhow::Result<ExitCode> {
    let id = if subscribed {
        session.to_string()
    } else {
        let subscribed: Subscribed = client
            .call(&Call::SessionsSubscribe(SubscribeParams {
                session: session.to_string(),
                from_seq: None,
            }))
            .await
            .map_err(|e| client_error(&e))?;
        subscribed.session
    };
    let pending: Pending = client
        .call(&Call::ApprovalsPending(PendingParams {
            session: Some(id.clone()),
        }))
        .await
        .map_err(|e| client_error(&e))?;
    let sink = HumanSink {
        verbose,
        at_line_start: Mutex::new(true),
    };
    // The terminal prompt runs on its own thread (it blocks on a line); answers come back here.
    let (ask_tx, ask_rx) = std::sync::mpsc::channel::<Approval>();
    let (answer_tx, mut answers) = tokio::sync::mpsc::unbounded_channel::<(String, Answer)>();
    let terminal = TerminalAnswerer::stdin_if_terminal();
    let prompting = terminal.is_some();
    if let Some(terminal) = terminal {
        let terminal = Arc::new(terminal);
        std::thread::spawn(move || {
            while let Ok(approval) = ask_rx.recv() {
                if let Some(answer) = terminal.ask_now(&question_of(&approval))
                    && answer_tx.send((approval.question.clone(), answer)).is_err()
                {
                    return;
                }
            }
        });
    }
    let put = |approval: Approval| {
        if !approval.answerable {
            say_err!(
                "chock: question {} ({}) stays unanswered: its session does not run in the daemon",
                approval.question,
                approval.what
            );
        } else if prompting {
            let _ = ask_tx.send(approval);
        } else {
            say_err!(
                "chock: question {} needs an answer ({}); no terminal here to ask on",
                approval.question,
                approval.what
            );
        }
    };
    for approval in pending.approvals {
        put(approval);
    }
    if !subscribed {
        let list: chock_protocol::rpc::SessionList = client
            .call(&Call::SessionsList(chock_protocol::rpc::NoParams {}))
            .await
            .map_err(|e| client_error(&e))?;
        let state = list
            .sessions
            .iter()
            .find(|s| s.session == id)
            .map(|s| s.state);
        if !matches!(state, Some(SessionState::Working | SessionState::Idle)) {
            return Err(Exit::new(
                exit::FAILURE,
                format!(
                    "session {id} does not run in the daemon ({}); `chock run --resume {id}` goes on with it",
                    state.map_or("unknown".into(), |s| serde_json::to_value(s).unwrap_or_default().to_string())
                ),
            )
            .into());
        }
    }
    let mut detach = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = &mut detach => {
                say_err!();
                say_err!("chock: detached; session {id} goes on in the daemon (`chock attach {id}`)");
                return Ok(ExitCode::from(130));
            }
            Some((question, answer)) = answers.recv() => {
                let sent: Result<Done, _> = client
                    .call(&Call::ApprovalsAnswer(answer_params(&id, &question, answer)))
                    .await;
                if let Err(e) = sent {
                    say_err!("chock: your answer to {question} was not taken: {e}");
                }
            }
            notice = client.next_notice() => {
                let notice = notice.map_err(|e| client_error(&e))?;
                match notice.notice() {
                    Ok(Notice::SessionLive(live)) if live.session == id => {
                        if let AgentEvent::SessionEnded { summary } = &live.event {
                            print_summary(summary);
                            return Ok(ExitCode::from(exit::of_session(&summary.ended)));
                        }
                        sink.emit(&live.event);
                    }
                    Ok(Notice::ApprovalAsked(approval)) if approval.session == id => put(approval),
                    Ok(Notice::ApprovalResolved(r)) if r.session == id => {
                        if let (Some(by), Some(answer)) = (&r.by, r.answer) {
                            say_err!("chock: {} answered {} by {}", r.question, serde_json::to_value(answer).unwrap_or_default().as_str().unwrap_or("?"), by);
                        }
                    }
                    Ok(Notice::SessionState(change)) if change.session == id => match change.state {
                        SessionState::Idle if until_idle => {
                            let ended = change.task.unwrap_or(Ended::Done);
                            say_err!("chock: the task ended ({ended}); session {id} waits in the daemon for a follow-up (`chock attach {id}`)");
                            // The one mapping from how it ended, as for a session run here.
                            return Ok(ExitCode::from(exit::of_session(&ended)));
                        }
                        SessionState::Ended => {
                            say_err!("chock: session {id} ended");
                            return Ok(ExitCode::SUCCESS);
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
    }
}
