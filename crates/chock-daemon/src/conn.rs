//! One client on a WebSocket: its requests, each carried out in a task of its own (an apply may
//! wait for an answer the same client sends next), and its bounded queue of frames, drained by a
//! writer that ends the connection with `client.dropped` when the queue filled.
//!
//! An apply or an undo is done for the client that asked: when it leaves, the request is
//! stopped, and a question it waits on is resolved as nobody answering (see
//! [`chock_decide::ApprovalBroker`]): nothing is written for a client no longer there to hear
//! how it went.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use chock_protocol::rpc::{
    Call, DropReason, Dropped, ErrorKind, Notice, Request, RequestId, Response, RpcError,
    SubscribeParams, Subscribed,
};
use futures_util::{SinkExt, StreamExt};

use crate::daemon::{Caller, Daemon};
use crate::fanout::{HEADROOM, Joined, history};
use crate::hub::{Conn, Frame, frame};

fn response_frame(response: &Response) -> Frame {
    Arc::from(serde_json::to_string(response).expect("responses serialise"))
}

/// Serves one WebSocket client named `name` until it leaves, is dropped, or the daemon stops.
pub(crate) async fn serve(socket: WebSocket, daemon: Arc<Daemon>, name: String) {
    let (conn, mut queue, mut killed) = daemon.hub.join(daemon.options().queue);
    let mut grace = killed.clone();
    let (mut sink, mut stream) = socket.split();
    let bound = conn.queue();
    let writer = async {
        loop {
            tokio::select! {
                biased;
                _ = killed.changed() => break,
                frame = queue.recv() => match frame {
                    Some(frame) => {
                        if sink.send(Message::Text(frame.to_string().into())).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                },
            }
        }
        let reason = (*killed.borrow()).unwrap_or(DropReason::Stopping);
        let last = frame(&Notice::ClientDropped(Dropped {
            reason,
            queue: bound,
        }));
        // The client may be reading what was queued before: give the last frame time to land.
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            sink.send(Message::Text(last.to_string().into())),
        )
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    };
    // Two clients of one process are told apart by their connection.
    let caller = Caller {
        name: format!("{name}#{}", conn.id),
        conn: Some(conn.clone()),
    };
    let acts = Acts::default();
    let reader = async {
        while let Some(Ok(message)) = stream.next().await {
            match message {
                Message::Text(text) => take(&daemon, &caller, text.as_str(), &acts),
                Message::Binary(_) => {
                    conn.push(&response_frame(&Response::err(
                        None,
                        RpcError::new(ErrorKind::InvalidRequest, "frames are JSON text messages"),
                    )));
                }
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => {}
            }
        }
    };
    // A writer stuck on a client that reads nothing is cut off shortly after it was dropped.
    let cut = async {
        let _ = grace.wait_for(Option::is_some).await;
        tokio::time::sleep(Duration::from_secs(15)).await;
    };
    tokio::select! {
        () = writer => {}
        () = reader => {}
        () = cut => {}
    }
    daemon.left(conn.id);
}

/// The client's applies and undoes under way: stopped when it leaves (this is dropped).
#[derive(Default)]
struct Acts(Mutex<Vec<tokio::task::AbortHandle>>);

impl Acts {
    fn add(&self, task: tokio::task::AbortHandle) {
        let mut tasks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }
}

impl Drop for Acts {
    fn drop(&mut self) {
        for task in self
            .0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}

/// One frame from the client: a request, carried out in its own task.
fn take(daemon: &Arc<Daemon>, caller: &Caller, text: &str, acts: &Acts) {
    let Some(conn) = caller.conn.clone() else {
        return;
    };
    let request: Request = match serde_json::from_str(text) {
        Ok(request) => request,
        Err(e) => {
            let kind = if serde_json::from_str::<serde_json::Value>(text).is_ok() {
                ErrorKind::InvalidRequest
            } else {
                ErrorKind::ParseError
            };
            conn.push(&response_frame(&Response::err(
                None,
                RpcError::new(kind, e.to_string()),
            )));
            return;
        }
    };
    let id = request.id.clone();
    let call = match request.call() {
        Ok(call) => call,
        Err(e) => {
            conn.push(&response_frame(&Response::err(Some(id), e)));
            return;
        }
    };
    let daemon = Arc::clone(daemon);
    let caller = caller.clone();
    let for_the_caller = matches!(call, Call::ReviewApply(_) | Call::ReviewUndo(_));
    let task = tokio::spawn(async move {
        if let Call::SessionsSubscribe(params) = call {
            subscribe(&daemon, &conn, id, params).await;
            return;
        }
        let response = match daemon.call(call, &caller).await {
            Ok(result) => Response::ok(id, &result),
            Err(e) => Response::err(Some(id), e),
        };
        conn.push(&response_frame(&response));
    });
    if for_the_caller {
        acts.add(task.abort_handle());
    }
}

/// `sessions.subscribe`: the response, the log's events from `from_seq` (caught up from the file,
/// once, waiting on the client's queue), then, for a session running here, the stream its relay
/// gives ([`crate::fanout`]).
async fn subscribe(daemon: &Arc<Daemon>, conn: &Conn, id: RequestId, params: SubscribeParams) {
    let (session, dir, owned) = match daemon.subscription(&params.session) {
        Ok(found) => found,
        Err(e) => {
            conn.push(&response_frame(&Response::err(Some(id), e)));
            return;
        }
    };
    let from = params.from_seq.unwrap_or(0);
    // A session running here says where it is; another's head is read from its file.
    let head = match owned.as_ref().and_then(|s| s.handle()) {
        Some(handle) => handle.snapshot().head,
        None => chock_log::read_events(&dir)
            .ok()
            .and_then(|e| e.last().map(|e| e.seq)),
    };
    let subscribed = Subscribed {
        session: session.clone(),
        from_seq: from,
        head_seq: head.unwrap_or(0),
    };
    conn.push(&response_frame(&Response::ok(id, &subscribed)));
    let mut after: Option<u64> = None;
    loop {
        let next = after.map_or(from, |a| (a + 1).max(from));
        let dir = dir.clone();
        let name = session.clone();
        let frames = tokio::task::spawn_blocking(move || history(&name, &dir, next))
            .await
            .unwrap_or_default();
        for (seq, frame) in frames {
            if !conn.push_waiting(frame, HEADROOM).await {
                return;
            }
            after = Some(seq);
        }
        match &owned {
            None => return,
            Some(owned) => match owned.fanout.join(conn, from, after) {
                Joined::Live => return,
                Joined::Behind => continue,
            },
        }
    }
}
