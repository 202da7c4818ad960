//! Anthropic failures: what is retried (529, 429 with its waits, `overloaded_error` in the stream, cut
//! and silent streams), what is not (other 4xx, non-retryable error events), and when the client gives up.

mod support;

use std::time::Duration;

use chock_provider::{ProviderConfig, ProviderError};
use support::anthropic::{expected_fixture_content, weather_request};
use support::{
    FakeServer, Framing, Reply, collector, fixture, retries, retry_reasons, stream_once,
    streamed_text, wire_to,
};

#[tokio::test]
async fn overloaded_error_event_is_retried_and_reported() {
    let overloaded = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-20250514\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    );
    let server = FakeServer::start(vec![
        Reply::sse(overloaded),
        Reply::sse(fixture("anthropic-messages-tool-use.sse")),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply after retry");

    assert_eq!(response.content, expected_fixture_content());
    let retries = retries(&events.lock().expect("events"));
    assert_eq!(retries.len(), 1);
    assert_eq!((retries[0].0, retries[0].1), (1, Duration::from_secs(2)));
    assert!(retries[0].2.contains("overloaded"), "{}", retries[0].2);
    assert_eq!(sleeper.waits(), vec![Duration::from_secs(2)]);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn http_529_and_429_are_retried_honouring_retry_after() {
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#;
    let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let server = FakeServer::start(vec![
        Reply::error(529, overloaded),
        Reply::error(429, limited).header("retry-after", "7"),
        Reply::error(429, limited)
            .header("retry-after", "3")
            .header("retry-after-ms", "1500"),
        Reply::error(503, "upstream unavailable")
            .header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
        Reply::sse(fixture("anthropic-messages-tool-use.sse")),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.content, expected_fixture_content());
    // 529: computed backoff (2 s); then the server's 7 s, 1.5 s (ms wins) and an HTTP date 10 s ahead.
    assert_eq!(
        sleeper.waits(),
        vec![
            Duration::from_secs(2),
            Duration::from_secs(7),
            Duration::from_millis(1500),
            Duration::from_secs(10)
        ]
    );
    let reasons = retry_reasons(&events.lock().expect("events"));
    assert_eq!(
        reasons,
        vec![
            "HTTP 529 overloaded_error",
            "HTTP 429 rate_limit_error",
            "HTTP 429 rate_limit_error",
            "HTTP 503"
        ]
    );
}

#[tokio::test]
async fn gives_up_after_six_attempts_spanning_about_a_minute() {
    let replies = (0..7)
        .map(|_| {
            Reply::error(
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#,
            )
        })
        .collect();
    let server = FakeServer::start(replies).await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (events, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("gives up");

    match &error {
        ProviderError::GaveUp { attempts: 6, last } => {
            assert!(
                matches!(**last, ProviderError::Http { status: 500, ref message, .. } if message == "boom"),
                "{last}"
            );
        }
        other => panic!("expected GaveUp after 6 attempts, got {other}"),
    }
    assert_eq!(server.requests().len(), 6);
    let waits = sleeper.waits();
    assert_eq!(waits.len(), 5);
    assert_eq!(waits.iter().sum::<Duration>(), Duration::from_secs(60));
    assert_eq!(
        retries(&events.lock().expect("events"))
            .iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = FakeServer::start(vec![
        Reply::error(400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"},"request_id":"req_9"}"#)
            .header("request-id", "req_9"),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("400");
    assert!(
        matches!(&error, ProviderError::Http { status: 400, request_id: Some(id), .. } if id == "req_9"),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "anthropic: HTTP 400 (request req_9): messages: roles must alternate"
    );
    assert!(sleeper.waits().is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn x_should_retry_overrides_the_status() {
    let server = FakeServer::start(vec![
        Reply::error(
            409,
            r#"{"type":"error","error":{"type":"conflict_error","message":"try again"}}"#,
        )
        .header("x-should-retry", "true"),
        Reply::error(
            500,
            r#"{"type":"error","error":{"type":"api_error","message":"do not"}}"#,
        )
        .header("x-should-retry", "false"),
    ])
    .await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("fails");
    assert!(
        matches!(error, ProviderError::Http { status: 500, .. }),
        "{error}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_ends_the_call() {
    let server = FakeServer::start(vec![
        Reply::error(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"later"}}"#,
        )
        .header("retry-after", "3600"),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("too long");
    assert!(error.to_string().contains("asked to wait 3600s"), "{error}");
    assert!(sleeper.waits().is_empty());
}

#[tokio::test]
async fn a_stream_cut_mid_reply_is_requested_again() {
    let body = fixture("anthropic-messages-tool-use.sse");
    let cut = body.find("is, Fra").expect("fixture has the tool input");
    for framing in [Framing::Chunked, Framing::CloseDelimited] {
        let server = FakeServer::start(vec![
            Reply::sse(body.clone())
                .in_pieces(9)
                .cut_after(cut)
                .framing(framing),
            Reply::sse(body.clone()).in_pieces(9).framing(framing),
        ])
        .await;
        let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
        let (events, mut sink) = collector();
        let response = stream_once(&config, &weather_request(), &mut sink)
            .await
            .expect("second attempt");
        assert_eq!(response.content, expected_fixture_content(), "{framing:?}");
        let events = events.lock().expect("events").clone();
        let retries = retries(&events);
        assert_eq!(retries.len(), 1, "{framing:?}");
        assert!(
            retries[0].2.starts_with("stream broke"),
            "{framing:?}: {}",
            retries[0].2
        );
        // The abandoned attempt's text was streamed, then the whole reply again.
        assert_eq!(
            streamed_text(&events),
            "I'll check the current weather in Paris for you.".repeat(2)
        );
    }
}

#[tokio::test]
async fn a_non_retryable_error_event_fails_at_once() {
    let stream = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad thinking signature\"}}\n\n";
    let server = FakeServer::start(vec![Reply::sse(stream)]).await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("fails");
    assert!(
        matches!(&error, ProviderError::Api { kind, .. } if kind == "invalid_request_error"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_silent_stream_times_out_and_is_requested_again() {
    let body = fixture("anthropic-messages-tool-use.sse");
    let stall = body.find("event: content_block_stop").expect("fixture");
    let server = FakeServer::start(vec![
        Reply::sse(body.clone()).stall_after(stall),
        Reply::sse(body),
    ])
    .await;
    let (mut config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    config.idle_timeout = Duration::from_millis(300);
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("second attempt");
    assert_eq!(response.content, expected_fixture_content());
    let retries = retries(&events.lock().expect("events"));
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].2, "stream broke: stalled: no data for 300ms");
}
