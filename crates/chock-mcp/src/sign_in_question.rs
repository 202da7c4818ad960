//! Sending the person to an authorization server mid-session: a question put through the
//! session's one pipeline, so every client (terminal, interface, browser, editor) shows it and can
//! answer, and the log records it. The authorization server's host was already decided as
//! `net.connect` by the door before the question is put (rule 3: the act first); the person opens
//! the address in a browser on this machine (the redirect comes back to 127.0.0.1), finishes there
//! and replies `accept`. Any other reply, or nobody answering, is a refusal and the call fails.

use chock_decide::Pipeline;
use chock_oauth::{Browser, Visit};

/// The session's way to send the person to an authorization URL.
#[derive(Debug, Clone)]
pub struct QuestionBrowser {
    pipeline: Pipeline,
}

impl QuestionBrowser {
    /// Puts its questions through `pipeline`.
    pub fn new(pipeline: Pipeline) -> QuestionBrowser {
        QuestionBrowser { pipeline }
    }
}

impl Browser for QuestionBrowser {
    fn visit<'a>(&'a self, url: &'a url::Url, host: &'a str) -> Visit<'a> {
        Box::pin(async move {
            let text = format!(
                "An MCP server needs you to sign in again at {host}. Open this address in a browser \
                 on this machine (Chock does not open it), finish there, then reply `accept`; \
                 anything else declines:\n{url}"
            );
            let answer = self
                .pipeline
                .ask_person(None, &text)
                .await
                .map_err(|e| e.to_string())?;
            match answer {
                Some((_, reply)) if reply.trim().eq_ignore_ascii_case("accept") => Ok(()),
                Some((by, _)) => Err(format!("{by} declined to sign in at {host}")),
                None => Err(format!("nobody answered the question to sign in at {host}")),
            }
        })
    }
}
