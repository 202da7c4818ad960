//! JSON-RPC 2.0 frames as JSON values: the one place a frame is built and read, for every server
//! Chock has. The daemon's typed frames ([`super::Request`], [`super::Response`],
//! [`super::Notification`]) and `chock acp`'s untyped ones (ACP's methods are not the daemon's)
//! both carry [`JSONRPC`] and the spec's codes ([`code`]) from here.

use serde_json::{Map, Value};

use super::JSONRPC;

/// The JSON-RPC 2.0 spec's own error codes (a server's own start at -32000).
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The frame is not a JSON-RPC 2.0 request, or comes out of order.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A request: `id`, `method`, `params`.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    frame([
        ("id", id.clone()),
        ("method", method.into()),
        ("params", params),
    ])
}

/// A notification (no `id`: nothing answers it).
pub fn notification(method: &str, params: Value) -> Value {
    frame([("method", method.into()), ("params", params)])
}

/// The response to request `id`: its result, or an error object (`code`, `message`, …).
pub fn response(id: &Value, outcome: Result<Value, Value>) -> Value {
    match outcome {
        Ok(result) => frame([("id", id.clone()), ("result", result)]),
        Err(error) => frame([("id", id.clone()), ("error", error)]),
    }
}

fn frame<const N: usize>(members: [(&str, Value); N]) -> Value {
    let mut map = Map::new();
    map.insert("jsonrpc".into(), JSONRPC.into());
    for (name, value) in members {
        map.insert(name.into(), value);
    }
    Value::Object(map)
}

/// One frame read from a peer.
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
    /// The response to one of our requests.
    Response {
        /// The id we gave the request.
        id: Value,
        /// The result, or the peer's error: its code and message.
        outcome: Result<Value, (i64, String)>,
    },
}

/// A line that is no frame: the error to send back, with the id when one could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// The frame's id, or null.
    pub id: Value,
    /// One of [`code`].
    pub code: i64,
    /// What is wrong with it.
    pub message: String,
}

/// Reads one line as a frame (a single object: batches are refused).
pub fn parse(line: &str) -> Result<Incoming, FrameError> {
    let bad = |id: Option<Value>, code, message: &str| FrameError {
        id: id.unwrap_or(Value::Null),
        code,
        message: message.to_string(),
    };
    let value: Value = serde_json::from_str(line).map_err(|e| FrameError {
        id: Value::Null,
        code: code::PARSE_ERROR,
        message: format!("the line is not JSON: {e}"),
    })?;
    let Value::Object(mut frame) = value else {
        return Err(bad(
            None,
            code::INVALID_REQUEST,
            "a frame must be a JSON object (batches are not taken)",
        ));
    };
    let id = frame.remove("id");
    if frame.get("jsonrpc").and_then(Value::as_str) != Some(JSONRPC) {
        return Err(bad(
            id,
            code::INVALID_REQUEST,
            "the frame's `jsonrpc` must be \"2.0\"",
        ));
    }
    let params = frame.remove("params").unwrap_or(Value::Null);
    match (frame.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err(bad(
            id,
            code::INVALID_REQUEST,
            "the frame's `method` must be a string",
        )),
        (None, Some(id)) => {
            let outcome = match (frame.remove("result"), frame.remove("error")) {
                (_, Some(error)) => Err((
                    error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the peer's error has no message")
                        .to_string(),
                )),
                (Some(result), None) => Ok(result),
                (None, None) => Ok(Value::Null),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err(bad(
            None,
            code::INVALID_REQUEST,
            "the frame has neither `method` nor `id`",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rpc::{ErrorKind, Notice, Notification, Request, RequestId, Response, RpcError};

    #[test]
    fn the_typed_and_the_untyped_frames_are_the_same_bytes() {
        let call = crate::rpc::Call::SessionsList(crate::rpc::NoParams {});
        let typed = serde_json::to_value(Request::new(RequestId::Number(7), &call)).unwrap();
        assert_eq!(typed, request(&json!(7), "sessions.list", json!({})));
        let ok =
            serde_json::to_value(Response::ok(RequestId::Number(7), &json!({"a": 1}))).unwrap();
        assert_eq!(ok, response(&json!(7), Ok(json!({"a": 1}))));
        let error = RpcError::new(ErrorKind::MethodNotFound, "no");
        let err =
            serde_json::to_value(Response::err(Some(RequestId::Number(7)), error.clone())).unwrap();
        assert_eq!(
            err,
            response(&json!(7), Err(serde_json::to_value(&error).unwrap()))
        );
        assert_eq!(error.code, code::METHOD_NOT_FOUND);
        let notice = Notice::SessionState(crate::rpc::StateChange {
            session: "s".into(),
            state: crate::rpc::SessionState::Idle,
            task: Some(crate::live::Ended::OutOfBudget),
        });
        let typed = serde_json::to_value(Notification::new(&notice)).unwrap();
        let (method, params) = notice.to_parts();
        assert_eq!(typed, notification(method, params));
    }

    #[test]
    fn every_kind_of_frame_is_read_and_a_bad_one_names_what_is_wrong() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Ok(Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({})
            })
        );
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#),
            Ok(Incoming::Response {
                id: json!(3),
                outcome: Err((-32601, "no".into()))
            })
        );
        let err = parse(r#"{"jsonrpc":"1.0","id":4,"method":"x"}"#).unwrap_err();
        assert_eq!((err.id, err.code), (json!(4), code::INVALID_REQUEST));
        assert!(err.message.contains("jsonrpc"), "{}", err.message);
        assert_eq!(parse("nope").unwrap_err().code, code::PARSE_ERROR);
        assert_eq!(parse("[]").unwrap_err().code, code::INVALID_REQUEST);
    }
}
