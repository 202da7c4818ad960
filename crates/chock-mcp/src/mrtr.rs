//! A tool call to a server spoken to in the stateless revision (MCP 2026-07-28, SEP-2322). Such a
//! server has no channel to ask Chock anything while a call runs: it answers `input_required`,
//! naming what it needs (a model call, an elicitation, the roots), and Chock calls again with the
//! answers and the server's opaque state. Each input goes to the same [`Handler`] a stateful
//! server's own request reaches, so sampling is still the act `mcp.<server>.sampling` and an
//! elicitation still a question to the session's answerers.

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, InputRequest};
use rmcp::service::{Peer, ServiceError};
use rmcp::{ErrorData, RoleClient};
use serde_json::Value;

use crate::client::Handler;

/// At most this many `input_required` rounds per call: a server that keeps asking is not
/// answered for ever.
const ROUNDS: usize = 8;

/// The call `params`, its `input_required` rounds answered by `handler`.
pub(crate) async fn call_tool(
    peer: &Peer<RoleClient>,
    handler: &Handler,
    mut params: CallToolRequestParams,
) -> Result<CallToolResult, ServiceError> {
    for _ in 0..ROUNDS {
        let needed = match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(needed) => needed,
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        let requests = needed.input_requests.unwrap_or_default();
        if requests.is_empty() && needed.request_state.is_none() {
            return Err(ServiceError::UnexpectedResponse);
        }
        let mut answers = rmcp::model::InputResponses::new();
        for (key, request) in requests {
            answers.insert(key, answer(handler, request).await?);
        }
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = needed.request_state;
    }
    Err(ServiceError::InputRequiredRoundsExceeded { max_rounds: ROUNDS })
}

/// One input a server asked for, answered as its own request would be.
async fn answer(handler: &Handler, request: InputRequest) -> Result<Value, ServiceError> {
    let answered: Result<Value, ErrorData> = match request {
        InputRequest::CreateMessage(request) => handler
            .sample(request.params)
            .await
            .and_then(|r| to_value(&r)),
        InputRequest::Elicitation(request) => handler
            .elicit(request.params)
            .await
            .and_then(|r| to_value(&r)),
        InputRequest::ListRoots(_) => handler.roots().and_then(|r| to_value(&r)),
        _ => Err(ErrorData::invalid_params(
            "Chock does not answer this kind of input request",
            None,
        )),
    };
    answered.map_err(ServiceError::McpError)
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, ErrorData> {
    serde_json::to_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}
