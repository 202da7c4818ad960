//! JSON-RPC 2.0 over newline-delimited JSON: reading one frame, the error codes, and the
//! [`Peer`] through which everything Chock sends goes (one ordered queue, so a turn's updates
//! always precede the response that ends it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// JSON-RPC's and ACP's error codes.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The frame is not a JSON-RPC 2.0 request, or comes out of order.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Chock failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the agent needs credentials first.
    pub const AUTH_REQUIRED: i64 = -32000;
    /// ACP: the resource (a session) does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// An error as a JSON-RPC response carries it: a code and a message that names the method and
/// the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// One of [`code`].
    pub code: i64,
    /// What went wrong, for the person.
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The params of `method` do not fit.
    pub fn params(method: &str, err: &serde_json::Error) -> Self {
        Self::new(code::INVALID_PARAMS, format!("{method}: params: {err}"))
    }
}

/// One frame read from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call that wants a response.
    Request {
        /// Its id, echoed in the response.
        id: Value,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A call that wants none.
    Notification {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// The response to one of Chock's requests.
    Response {
        /// The id Chock gave the request.
        id: Value,
        /// The result, or the client's error.
        outcome: Result<Value, RpcError>,
    },
}

/// Reads one line as a frame; a line that is no frame is the error to send back (with the id
/// when one could be read).
pub fn parse(line: &str) -> Result<Incoming, (Value, RpcError)> {
    let value: Value = serde_json::from_str(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(code::PARSE_ERROR, format!("the line is not JSON: {e}")),
        )
    })?;
    let Value::Object(mut frame) = value else {
        return Err((
            Value::Null,
            RpcError::new(
                code::INVALID_REQUEST,
                "a frame must be a JSON object (batches are not part of ACP)",
            ),
        ));
    };
    let id = frame.remove("id");
    if frame.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id.unwrap_or(Value::Null),
            RpcError::new(
                code::INVALID_REQUEST,
                "the frame's `jsonrpc` must be \"2.0\"",
            ),
        ));
    }
    let params = frame.remove("params").unwrap_or(Value::Null);
    match (frame.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err((
            id.unwrap_or(Value::Null),
            RpcError::new(
                code::INVALID_REQUEST,
                "the frame's `method` must be a string",
            ),
        )),
        (None, Some(id)) => {
            let outcome = match (frame.remove("result"), frame.remove("error")) {
                (_, Some(error)) => Err(RpcError::new(
                    error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the client's error has no message"),
                )),
                (Some(result), None) => Ok(result),
                (None, None) => Ok(Value::Null),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err((
            Value::Null,
            RpcError::new(
                code::INVALID_REQUEST,
                "the frame has neither `method` nor `id`",
            ),
        )),
    }
}

/// Why a request Chock sent got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The connection closed first.
    #[error("the client went away before answering")]
    Closed,
    /// The client answered with an error.
    #[error("the client answered with an error: {0}")]
    Remote(RpcError),
}

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// The sending side of the connection: notifications, requests to the client and responses,
/// in one ordered queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Peer {
    out: mpsc::UnboundedSender<Value>,
    waiting: Waiting,
    next: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Peer {
    /// A peer whose frames go to the returned receiver (the writer drains it).
    pub fn new() -> (Peer, mpsc::UnboundedReceiver<Value>) {
        let (out, rx) = mpsc::unbounded_channel();
        (
            Peer {
                out,
                waiting: Arc::default(),
                next: Arc::new(AtomicU64::new(0)),
            },
            rx,
        )
    }

    fn send(&self, frame: Value) {
        // A closed writer means the client is gone; what it would have read is moot.
        let _ = self.out.send(frame);
    }

    /// A notification.
    pub fn notify(&self, method: &str, params: impl Serialize) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The response to request `id`.
    pub fn respond(&self, id: &Value, outcome: Result<Value, RpcError>) {
        self.send(match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        });
    }

    /// Sends a request to the client and waits for its result.
    pub async fn request(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<Value, RequestError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(n, tx);
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params}));
        match rx.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(RequestError::Remote(error)),
            Err(_) => Err(RequestError::Closed),
        }
    }

    /// Hands a response to the request waiting for it; `false` when none waits (an id Chock
    /// never gave, or one answered already).
    pub fn resolve(&self, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(n) = id.as_u64() else { return false };
        match lock(&self.waiting).remove(&n) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    /// The connection closed: every request still waiting gets [`RequestError::Closed`].
    pub fn close(&self) {
        lock(&self.waiting).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_told_apart_by_method_and_id() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Ok(Incoming::Request { method, .. }) if method == "initialize"
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#),
            Ok(Incoming::Response { outcome: Err(e), .. }) if e.code == -32601
        ));
    }

    #[test]
    fn a_bad_line_is_answered_with_the_reason() {
        let (id, err) = parse("{nope").unwrap_err();
        assert_eq!((id, err.code), (Value::Null, code::PARSE_ERROR));
        let (id, err) = parse(r#"{"id":7,"method":"x"}"#).unwrap_err();
        assert_eq!((id, err.code), (json!(7), code::INVALID_REQUEST));
        assert!(err.message.contains("jsonrpc"), "{}", err.message);
    }

    #[tokio::test]
    async fn a_request_gets_the_response_with_its_id_and_closing_ends_the_wait() {
        let (peer, mut rx) = Peer::new();
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("session/request_permission", json!({})).await }
        });
        let sent = rx.recv().await.unwrap();
        assert!(peer.resolve(&sent["id"], Ok(json!({"ok": true}))));
        assert_eq!(asking.await.unwrap(), Ok(json!({"ok": true})));
        assert!(
            !peer.resolve(&sent["id"], Ok(Value::Null)),
            "answered once only"
        );
        let waiting = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("x", json!({})).await }
        });
        let _ = rx.recv().await.unwrap();
        peer.close();
        assert_eq!(waiting.await.unwrap(), Err(RequestError::Closed));
    }
}
