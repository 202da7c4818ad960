//! The daemon's wire protocol (`chock serve`): JSON-RPC 2.0 frames, the methods a client calls,
//! the notifications the daemon pushes, and the typed errors.
//!
//! One frame is one JSON object: a WebSocket text message, or one line on the daemon's plain
//! stream. A client sends [`Request`]s; the daemon answers each with a [`Response`] naming the
//! request's id, and pushes [`Notification`]s (no id) for the sessions a client subscribed to and
//! for every question asked and resolved. Every method is one of [`Call`]'s variants, with its
//! params type and its result type; docs/daemon.md's method reference is generated from them
//! ([`doc::method_reference`]) and a test fails when the page drifts.
//!
//! The log's `seq` is the cursor: `sessions.subscribe` sends the session's log events from a
//! seq, then live ones, so a client that drops and comes back loses nothing. There is no raw file
//! or shell method: every method that acts is a session act (an input, an interrupt, an answer,
//! an apply or undo decided by `workspace.apply`), decided and logged like any other.

pub mod doc;
mod errors;
pub mod frame;
mod methods;
mod notify;
mod review;

pub use errors::{ErrorKind, RpcError};
pub use methods::*;
pub use notify::*;
pub use review::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `jsonrpc` member every frame carries.
pub const JSONRPC: &str = "2.0";

/// A request's id: JSON-RPC allows a number or a string; the response names the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    /// A number.
    Number(u64),
    /// A string.
    Text(String),
}

/// A request as it is on the wire: the method's name and its params (an object; absent is `{}`).
/// [`Request::call`] reads it as a typed [`Call`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The id the response will name.
    pub id: RequestId,
    /// The method (`sessions.list`, …).
    pub method: String,
    /// The method's params.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
}

impl Request {
    /// The frame for `call`, with id `id`.
    pub fn new(id: RequestId, call: &Call) -> Request {
        let (method, params) = call.to_parts();
        Request {
            jsonrpc: JSONRPC.to_string(),
            id,
            method: method.to_string(),
            params,
        }
    }

    /// The typed call: an unknown method or params that do not fit its type is a typed error
    /// (`method_not_found`, `invalid_params`).
    pub fn call(&self) -> Result<Call, RpcError> {
        if self.jsonrpc != JSONRPC {
            return Err(RpcError::new(
                ErrorKind::InvalidRequest,
                format!("`jsonrpc` must be \"2.0\", not {:?}", self.jsonrpc),
            ));
        }
        Call::from_parts(&self.method, self.params.clone())
    }
}

/// The answer to one request: its result, or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request's id (null when the request was unreadable).
    pub id: Option<RequestId>,
    /// The method's result type, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// What went wrong, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Response {
    /// A success carrying `result` (one of the result types of [`Call`]).
    pub fn ok(id: RequestId, result: &impl Serialize) -> Response {
        Response {
            jsonrpc: JSONRPC.to_string(),
            id: Some(id),
            result: Some(serde_json::to_value(result).expect("results serialise")),
            error: None,
        }
    }

    /// A failure.
    pub fn err(id: Option<RequestId>, error: RpcError) -> Response {
        Response {
            jsonrpc: JSONRPC.to_string(),
            id,
            result: None,
            error: Some(error),
        }
    }

    /// The result as the method's result type `T`, or the error.
    pub fn into_result<T: serde::de::DeserializeOwned>(self) -> Result<T, RpcError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        serde_json::from_value(self.result.unwrap_or(Value::Null)).map_err(|e| {
            RpcError::new(
                ErrorKind::Internal,
                format!("the result does not fit its type: {e}"),
            )
        })
    }
}

/// What the daemon sends: a response to a request, or a notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServerFrame {
    /// A notification (it has a `method` and no `id`). Tried first: a response has no `method`.
    Notification(Notification),
    /// A response (it has an `id`).
    Response(Response),
}

#[cfg(test)]
mod tests;
