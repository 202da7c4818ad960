//! fetch_url and web_search as [`Tool`]s: the network reached from the host through chock-broker,
//! which names each act (`net.fetch.<reversed host>` for the URL and every redirect, `web.search`)
//! and asks the decision seam before it connects. The work is in [`crate::web`].

use chock_log::LogError;
use chock_policy::ActionError;
use chock_protocol::live::{ToolDisplay, ToolKind, input_field};
use serde_json::Value;

use crate::ToolOutput;
use crate::tool::{Access, Effect, Tool, ToolContext};
use crate::web::{self, FetchInput, SearchInput};

/// `fetch_url`.
#[derive(Debug)]
pub struct FetchUrl;

impl Tool for FetchUrl {
    type Input = FetchInput;

    fn name(&self) -> &str {
        "fetch_url"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Fetch {}", input_field(input, "url")),
            ToolKind::Fetch,
        )
    }

    fn description(&self) -> &str {
        "Fetch a web page (http or https) as readable text, through the host: the sandbox has no network. \
Decided as net.fetch.<host reversed> (e.g. net.fetch.com.example.docs) for the URL and every redirect."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &FetchInput) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "the network broker, for the URL and every redirect",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: FetchInput,
    ) -> Result<ToolOutput, LogError> {
        web::fetch_url(cx.decider, cx.host.network(), cx.call_id, &input).await
    }
}

/// `web_search`.
#[derive(Debug)]
pub struct WebSearch;

impl Tool for WebSearch {
    type Input = SearchInput;

    fn name(&self) -> &str {
        "web_search"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Search the web for {}", input_field(input, "query")),
            ToolKind::Fetch,
        )
    }

    fn description(&self) -> &str {
        "Search the web with the configured backend, through the host. Decided as web.search."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, _input: &SearchInput) -> Result<Access, ActionError> {
        Ok(Access::AtRun {
            by: "the network broker: web.search, then the backend's host",
        })
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: SearchInput,
    ) -> Result<ToolOutput, LogError> {
        web::web_search(cx.decider, cx.host.network(), cx.call_id, &input).await
    }
}
