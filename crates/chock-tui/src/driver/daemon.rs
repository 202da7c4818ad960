//! A session the daemon runs, driven through its client (`chock_client`): its live items,
//! its questions (answered by id; the first answer from any client wins) and its review calls,
//! all over the daemon's socket. Leaving detaches: the session goes on in the daemon.

use chock_client::{ClientError, DaemonClient};
use chock_protocol::rpc::{
    AnswerParams, Applied, ApplyParams, Approval, Call, DiffParams, Done, InputParams, NoParams,
    Notice, Pending, PendingParams, ReviewDiff, SessionList, SessionParams, SessionState,
    SubscribeParams, Subscribed, UndoParams,
};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::feed::{Asked, Cmd, Feed, Review, TaskOutcome};

/// Connects to this user's daemon.
pub async fn connect() -> Result<DaemonClient, ClientError> {
    DaemonClient::connect().await
}

/// What an approval the daemon forwards asks of the person.
fn asked(approval: Approval) -> Asked {
    Asked {
        id: approval.question,
        approval: approval.action.is_some(),
        action: approval.action,
        what: approval.what,
        decided_by: approval.decided_by,
        context: Vec::new(),
        secret: approval.secret,
    }
}

/// Subscribes to `session` in the daemon and drives it: returns where to send [`Cmd`]s.
pub async fn attach(
    session: &str,
    feed: UnboundedSender<Feed>,
) -> Result<UnboundedSender<Cmd>, ClientError> {
    let mut client = connect().await?;
    let subscribed: Subscribed = client
        .call(&Call::SessionsSubscribe(SubscribeParams {
            session: session.to_string(),
            from_seq: None,
        }))
        .await?;
    let id = subscribed.session;
    let list: SessionList = client.call(&Call::SessionsList(NoParams {})).await?;
    let info = list.sessions.into_iter().find(|s| s.session == id);
    let _ = feed.send(Feed::Started {
        session: id.clone(),
        provider: info
            .as_ref()
            .and_then(|i| i.provider.clone())
            .unwrap_or_default(),
        model: info
            .as_ref()
            .and_then(|i| i.model.clone())
            .unwrap_or_default(),
    });
    if info
        .as_ref()
        .is_some_and(|i| i.state == SessionState::Working)
    {
        let _ = feed.send(Feed::Live(Box::new(
            chock_protocol::live::AgentEvent::TurnStarted { turn: 0 },
        )));
    }
    let pending: Pending = client
        .call(&Call::ApprovalsPending(PendingParams {
            session: Some(id.clone()),
        }))
        .await?;
    for approval in pending.approvals.into_iter().filter(|a| a.answerable) {
        let _ = feed.send(Feed::Asked(asked(approval)));
    }
    let (tx, mut rx) = unbounded_channel::<Cmd>();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                cmd = rx.recv() => {
                    let Some(cmd) = cmd else { break };
                    if matches!(cmd, Cmd::End) {
                        break;
                    }
                    call(&mut client, &id, cmd, &feed).await;
                }
                notice = client.next_notice() => {
                    let Ok(notice) = notice else {
                        let _ = feed.send(Feed::Failed("the daemon's connection was lost".into()));
                        let _ = feed.send(Feed::Ended(None));
                        return;
                    };
                    let sent = match notice.notice() {
                        Ok(Notice::SessionLive(live)) if live.session == id => {
                            feed.send(Feed::Live(Box::new(live.event)))
                        }
                        Ok(Notice::ApprovalAsked(a)) if a.session == id && a.answerable => {
                            feed.send(Feed::Asked(asked(a)))
                        }
                        Ok(Notice::ApprovalResolved(r)) if r.session == id => feed.send(Feed::Resolved {
                            question: r.question,
                            by: r.by,
                            answer: r.answer,
                        }),
                        Ok(Notice::SessionState(s)) if s.session == id => match s.state {
                            SessionState::Idle => feed.send(Feed::TaskEnded(TaskOutcome::Idle)),
                            SessionState::Ended => feed.send(Feed::Ended(None)),
                            _ => Ok(()),
                        },
                        _ => Ok(()),
                    };
                    if sent.is_err() {
                        break;
                    }
                }
            }
        }
        client.close().await;
        let _ = feed.send(Feed::Ended(None));
    });
    Ok(tx)
}

/// Carries out one command as a call to the daemon; what it returns goes to `feed`.
async fn call(client: &mut DaemonClient, id: &str, cmd: Cmd, feed: &UnboundedSender<Feed>) {
    let session = id.to_string();
    let failed = |e: ClientError, review: Option<Review>| match (e, review) {
        (ClientError::Rpc(e), Some(review)) => Feed::ReviewFailed(review, e),
        (e, _) => Feed::Failed(e.to_string()),
    };
    let out = match cmd {
        Cmd::Input(text) => client
            .call::<Done>(&Call::SessionsInput(InputParams { session, text }))
            .await
            .err()
            .map(|e| failed(e, None)),
        Cmd::Interrupt => client
            .call::<Done>(&Call::SessionsInterrupt(SessionParams { session }))
            .await
            .err()
            .map(|e| failed(e, None)),
        Cmd::Answer {
            question,
            answer,
            reply,
        } => client
            .call::<Done>(&Call::ApprovalsAnswer(AnswerParams {
                session,
                question,
                answer,
                reasons: None,
                reply,
            }))
            .await
            .err()
            .map(|e| failed(e, None)),
        Cmd::Diff { selection, whole } => {
            let kind = if whole {
                Review::Whole
            } else {
                Review::Selected
            };
            Some(
                match client
                    .call::<ReviewDiff>(&Call::ReviewDiff(DiffParams { session, selection }))
                    .await
                {
                    Ok(diff) => Feed::Diff(kind, Box::new(diff)),
                    Err(e) => failed(e, Some(kind)),
                },
            )
        }
        Cmd::Apply { selection, digest } => Some(
            match client
                .call::<Applied>(&Call::ReviewApply(ApplyParams {
                    session,
                    digest,
                    selection,
                }))
                .await
            {
                Ok(applied) => Feed::Applied(Review::Apply, applied),
                Err(e) => failed(e, Some(Review::Apply)),
            },
        ),
        Cmd::Undo(apply_id) => Some(
            match client
                .call::<Applied>(&Call::ReviewUndo(UndoParams { apply_id }))
                .await
            {
                Ok(applied) => Feed::Applied(Review::Undo, applied),
                Err(e) => failed(e, Some(Review::Undo)),
            },
        ),
        Cmd::End => None,
    };
    if let Some(out) = out {
        let _ = feed.send(out);
    }
}
