//! The API key stays with the configured host: not sent on after a redirect, not echoed in errors.

mod support;

use chock_provider::{Message, ProviderConfig, ProviderError, Request};
use support::{FakeServer, Reply, collector, fixture, stream_once, wire_to};

fn hello() -> Request {
    Request {
        model: "claude-sonnet-4-20250514".into(),
        messages: vec![Message::user_text("hello")],
        ..Request::default()
    }
}

#[tokio::test]
async fn a_redirect_is_not_followed_so_the_key_stays_with_the_configured_host() {
    // Another origin (another port on loopback) that would receive the key if the redirect were followed.
    let elsewhere =
        FakeServer::start(vec![Reply::sse(fixture("anthropic-messages-tool-use.sse"))]).await;
    let server = FakeServer::start(vec![
        Reply::error(307, "").header("location", &format!("{}/v1/messages", elsewhere.base_url())),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("sk-ant-secret-123"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &hello(), &mut sink)
        .await
        .expect_err("a 3xx is an error");
    assert!(
        matches!(error, ProviderError::Http { status: 307, .. }),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(elsewhere.requests().len(), 0, "the redirect was followed");
    assert!(sleeper.waits().is_empty());
}

#[tokio::test]
async fn an_error_body_echoing_the_key_is_scrubbed() {
    let key = "sk-ant-secret-123";
    let body = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {key}"}}}}"#
    );
    let server = FakeServer::start(vec![Reply::error(401, &body)]).await;
    let (config, _) = wire_to(ProviderConfig::anthropic(key), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &hello(), &mut sink)
        .await
        .expect_err("401");
    assert_eq!(
        error.to_string(),
        "anthropic: HTTP 401: invalid x-api-key <redacted>"
    );
    assert!(!format!("{error:?}").contains(key), "{error:?}");
}
