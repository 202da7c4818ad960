//! The legacy HTTP+SSE transport (MCP 2024-11-05; an editor's `type: "sse"` server, a table's
//! `transport = "sse"`), reached like a streamable HTTP server: by the host, every connection
//! opened by the broker's door (crate::http's client, so the same decisions, address checks, TLS,
//! no redirect and no credentials).
//!
//! The client GETs the server's event stream; the server's first event, `endpoint`, names where
//! to POST each message, and its answers arrive on the stream as `message` events. That endpoint
//! must be on the stream's own origin (scheme, host and port): a server cannot send Chock's
//! messages, or Chock's connections, anywhere else.

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Method, StatusCode, Uri};
use http_body_util::Full;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::common::http_header::{EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE};
use rmcp::transport::streamable_http_client::StreamableHttpResponseLimits;
use tokio::sync::mpsc;

use crate::http::{DoorHttpClient, HttpClientError};

/// What went wrong on the legacy transport, in words.
pub(crate) type SseFailure = HttpClientError;

fn fail(message: String) -> SseFailure {
    HttpClientError::new(message)
}

/// Where the `endpoint` event's `data` points, resolved against the stream's URL; refused
/// unless it is on the stream's origin.
pub(crate) fn endpoint_of(stream: &Uri, data: &str) -> Result<Uri, String> {
    let data = data.trim();
    let origin = format!(
        "{}://{}",
        stream.scheme_str().unwrap_or("http"),
        stream.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let joined = if data.starts_with("http://") || data.starts_with("https://") {
        data.to_string()
    } else if data.starts_with('/') {
        format!("{origin}{data}")
    } else {
        let path = stream.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        format!("{origin}{dir}{data}")
    };
    let uri: Uri = joined
        .parse()
        .map_err(|e| format!("the server's endpoint `{data}`: {e}"))?;
    let same = uri.scheme() == stream.scheme()
        && uri.host() == stream.host()
        && uri.port_u16() == stream.port_u16();
    if !same {
        return Err(format!(
            "the server's endpoint `{data}` is not on {origin}: Chock posts to the server's own origin only"
        ));
    }
    Ok(uri)
}

/// One server's legacy SSE session: the stream's messages, and where to POST.
pub(crate) struct SseTransport {
    client: DoorHttpClient,
    post_to: Uri,
    messages: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for its `endpoint` event.
    pub(crate) async fn connect(client: DoorHttpClient, url: &str) -> Result<Self, SseFailure> {
        let stream_uri: Uri = url.parse().map_err(|e| fail(format!("`{url}`: {e}")))?;
        let request = http::Request::builder()
            .method(Method::GET)
            .uri(stream_uri.clone())
            .header(http::header::ACCEPT, EVENT_STREAM_MIME_TYPE)
            .header(
                http::header::USER_AGENT,
                concat!("chock/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|e| fail(e.to_string()))?;
        let response = client
            .send(request)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if response.status() != StatusCode::OK {
            return Err(fail(format!(
                "GET of the SSE stream answered {}",
                response.status()
            )));
        }
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        let mut events = crate::http::sse_events(response.into_body(), max);
        let post_to = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break endpoint_of(&stream_uri, event.data.as_deref().unwrap_or(""))
                        .map_err(fail)?;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(fail(format!("the SSE stream failed: {e}"))),
                None => {
                    return Err(fail(
                        "the SSE stream ended before naming its endpoint".to_string(),
                    ));
                }
            }
        };
        let (tx, messages) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                if let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&data)
                    && tx.send(message).await.is_err()
                {
                    break;
                }
            }
        });
        Ok(SseTransport {
            client,
            post_to,
            messages,
            reader,
        })
    }
}

/// POSTs `message` to the endpoint; its answer comes on the stream.
async fn post(
    client: DoorHttpClient,
    to: Uri,
    message: ClientJsonRpcMessage,
) -> Result<(), SseFailure> {
    let body = serde_json::to_vec(&message).map_err(|e| fail(e.to_string()))?;
    let request = http::Request::builder()
        .method(Method::POST)
        .uri(to)
        .header(http::header::CONTENT_TYPE, JSON_MIME_TYPE)
        .header(
            http::header::USER_AGENT,
            concat!("chock/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| fail(e.to_string()))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!(
            "POST of a message answered {}",
            response.status()
        )));
    }
    Ok(())
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseFailure;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        post(self.client.clone(), self.post_to.clone(), item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.messages.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint_of;

    #[test]
    fn the_endpoint_stays_on_the_streams_origin() {
        let stream: http::Uri = "http://127.0.0.1:3001/sse".parse().unwrap();
        let at = |d: &str| endpoint_of(&stream, d).map(|u| u.to_string());
        assert_eq!(
            at("/message?sessionId=a").unwrap(),
            "http://127.0.0.1:3001/message?sessionId=a"
        );
        assert_eq!(
            at("messages?s=1").unwrap(),
            "http://127.0.0.1:3001/messages?s=1"
        );
        assert_eq!(
            at("http://127.0.0.1:3001/m").unwrap(),
            "http://127.0.0.1:3001/m"
        );
        for elsewhere in [
            "http://127.0.0.1:3002/m",
            "https://127.0.0.1:3001/m",
            "http://evil.example/m",
        ] {
            let refused = at(elsewhere).unwrap_err();
            assert!(refused.contains("own origin"), "{elsewhere}: {refused}");
        }
    }
}
