//! The protocol's errors: a JSON-RPC error object whose `data.kind` is typed, so a client branches
//! on the kind, never on the message.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What went wrong, as a client branches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The frame is not JSON.
    ParseError,
    /// The frame is JSON but not a request.
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// The params do not fit the method's type.
    InvalidParams,
    /// The daemon failed (its message says how).
    Internal,
    /// No session by that id (or the prefix fits several).
    UnknownSession,
    /// The session does not run in this daemon (it ended, stopped, or another process runs it).
    NotRunning,
    /// The session is working on a task: interrupt it or wait for `session.state` idle.
    Busy,
    /// What was asked for cannot be: a bad task, project, provider or selection; a policy file.
    BadInput,
    /// The act was refused: by the policy table, by a person, or because nobody answered.
    Refused,
    /// The answer was not taken: unknown or resolved question, or one that does not fit it.
    AnswerRefused,
    /// The selected changes are no longer the ones the digest was taken of: nothing written.
    DigestMismatch,
    /// The project no longer holds what a change expects there (or an undo was done already):
    /// nothing written.
    Conflict,
    /// The peer may not use the daemon (another user, a sandboxed call, no token, a foreign
    /// `Origin` or `Host`).
    Forbidden,
}

impl ErrorKind {
    /// The JSON-RPC `code`: the spec's for its own errors, -32000 and below for the daemon's.
    pub fn code(self) -> i64 {
        match self {
            ErrorKind::ParseError => super::frame::code::PARSE_ERROR,
            ErrorKind::InvalidRequest => super::frame::code::INVALID_REQUEST,
            ErrorKind::MethodNotFound => super::frame::code::METHOD_NOT_FOUND,
            ErrorKind::InvalidParams => super::frame::code::INVALID_PARAMS,
            ErrorKind::Internal => super::frame::code::INTERNAL_ERROR,
            ErrorKind::UnknownSession => -32001,
            ErrorKind::NotRunning => -32002,
            ErrorKind::Busy => -32003,
            ErrorKind::BadInput => -32004,
            ErrorKind::Refused => -32005,
            ErrorKind::AnswerRefused => -32006,
            ErrorKind::DigestMismatch => -32007,
            ErrorKind::Conflict => -32008,
            ErrorKind::Forbidden => -32009,
        }
    }

    /// Every kind, in docs/daemon.md's order.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::InvalidParams,
        ErrorKind::Internal,
        ErrorKind::UnknownSession,
        ErrorKind::NotRunning,
        ErrorKind::Busy,
        ErrorKind::BadInput,
        ErrorKind::Refused,
        ErrorKind::AnswerRefused,
        ErrorKind::DigestMismatch,
        ErrorKind::Conflict,
        ErrorKind::Forbidden,
    ];
}

/// The `data` of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorData {
    /// What went wrong, typed.
    pub kind: ErrorKind,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    /// The JSON-RPC code ([`ErrorKind::code`]).
    pub code: i64,
    /// What went wrong, in words for a person.
    pub message: String,
    /// The typed kind.
    pub data: ErrorData,
}

impl RpcError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> RpcError {
        RpcError {
            code: kind.code(),
            message: message.into(),
            data: ErrorData { kind },
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.data.kind
    }
}
