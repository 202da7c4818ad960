//! JSON-RPC 2.0 over newline-delimited JSON: reading one frame, the error codes, and the
//! [`Peer`] through which everything Chock sends goes (one ordered queue, so a turn's updates
//! always precede the response that ends it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chock_protocol::rpc::frame;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// JSON-RPC's and ACP's error codes (the spec's come from the protocol crate's one frame module).
pub mod code {
    pub use chock_protocol::rpc::frame::code::*;
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
pub type Incoming = frame::Incoming;

/// Reads one line as a frame ([`frame::parse`], shared with the daemon); a line that is no frame
/// is the error to send back (with the id when one could be read).
pub fn parse(line: &str) -> Result<Incoming, (Value, RpcError)> {
    frame::parse(line).map_err(|e| (e.id, RpcError::new(e.code, e.message)))
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
        self.send(frame::notification(method, params));
    }

    /// The response to request `id`.
    pub fn respond(&self, id: &Value, outcome: Result<Value, RpcError>) {
        let outcome = outcome.map_err(|e| serde_json::to_value(e).unwrap_or(Value::Null));
        self.send(frame::response(id, outcome));
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
        self.send(frame::request(&Value::from(n), method, params));
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
    use serde_json::json;

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
            Ok(Incoming::Response { outcome: Err((code, _)), .. }) if code == -32601
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
