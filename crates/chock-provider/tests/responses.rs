//! The OpenAI Responses client against a loopback server speaking the recorded wire format.

mod support;

use std::time::Duration;

use chock_provider::{
    Block, Message, ProviderConfig, ProviderError, Request, StopReason, StreamEvent, ToolSpec,
    Usage,
};
use serde_json::json;
use support::{
    FakeServer, Reply, collector, fixture, retries, retry_reasons, stream_once, streamed_text,
    turn_with_results, wire_to,
};

const ENCRYPTED_DONE: &str = "gAAAAABpVfQ4Tn8Rb2Wq6Yc0Ue4Io8Pa2Sd6Fg0Hj4Kl8Zx2Cv6Bn0Mq4We8Rt2Yu6Io0Pa4Sd8Fg2Hj6Kl0Zx4Cv8Bn2Mq6We0Rt4Yu8Io2Pa6Sd0Fg4Hj8Kl2Zx6Cv0Bn4Mq8We2Rt6Yu0Io4Pa8Sd2Fg6Hj0Kl4Zx8Cv2Bn6Mq0We4Rt8Yu2==";

fn weather_request() -> Request {
    Request {
        model: "gpt-5".into(),
        system: Some("You are a weather assistant.".into()),
        messages: vec![Message::user_text("What's the weather in Paris?")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather for a city.".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }],
        max_tokens: 4096,
        reasoning_effort: Some("low".into()),
        ..Request::default()
    }
}

#[tokio::test]
async fn fixture_gives_reasoning_item_function_call_and_usage() {
    for piece in [1, 11, 100_000] {
        let server = FakeServer::start(vec![
            Reply::sse(fixture("openai-responses-function-call.sse")).in_pieces(piece),
        ])
        .await;
        let (config, _) = wire_to(ProviderConfig::openai("sk-test"), &server);
        let (events, mut sink) = collector();
        let response = stream_once(&config, &weather_request(), &mut sink)
            .await
            .expect("reply");

        assert_eq!(response.content.len(), 2, "piece {piece}");
        let Block::Reasoning { provider, item } = &response.content[0] else {
            panic!("reasoning first: {:?}", response.content)
        };
        assert_eq!(provider, "openai-responses");
        // Taken from output_item.done / response.completed, not the incomplete blob of output_item.added.
        assert_eq!(item["encrypted_content"], ENCRYPTED_DONE);
        assert_eq!(
            response.content[1],
            Block::ToolUse {
                id: "call_Xq4mJ8vN2pR6tW0yB3dF7hK1".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France", "unit": "celsius"})
            }
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 84,
                output_tokens: 151,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 128
            }
        );
        assert_eq!(response.model, "gpt-5-2025-08-07");
        assert_eq!(
            response.id.as_deref(),
            Some("resp_0a1f6c2d9e8b47c30069b1d2e4f5a6b7c8d9e0f1a2b3c4d5")
        );
        let events = events.lock().expect("events").clone();
        assert!(events.contains(&StreamEvent::ToolCallStarted {
            id: "call_Xq4mJ8vN2pR6tW0yB3dF7hK1".into(),
            name: "get_weather".into()
        }));
    }
}

#[tokio::test]
async fn stateless_history_echoes_reasoning_then_call_then_output() {
    let server = FakeServer::start(vec![
        Reply::sse(fixture("openai-responses-function-call.sse")),
        Reply::sse(fixture("openai-responses-function-call.sse")),
    ])
    .await;
    let (config, _) = wire_to(ProviderConfig::openai("sk-test"), &server);
    turn_with_results(
        &config,
        weather_request(),
        vec![Block::ToolResult {
            tool_use_id: "call_Xq4mJ8vN2pR6tW0yB3dF7hK1".into(),
            content: "18°C, clear".into(),
            is_error: false,
        }],
    )
    .await;

    let requests = server.requests();
    let first = &requests[0];
    assert_eq!(first.path, "/v1/responses");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(first.body["store"], json!(false));
    assert_eq!(first.body["stream"], json!(true));
    assert_eq!(first.body["instructions"], "You are a weather assistant.");
    assert_eq!(
        first.body["include"],
        json!(["reasoning.encrypted_content"])
    );
    assert_eq!(first.body["reasoning"], json!({"effort": "low"}));
    assert_eq!(
        first.body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Get the current weather for a city.",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}, "strict": false}])
    );
    assert_eq!(
        requests[1].body["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "What's the weather in Paris?"}]},
            {"type": "reasoning", "encrypted_content": ENCRYPTED_DONE, "summary": []},
            {"type": "function_call", "call_id": "call_Xq4mJ8vN2pR6tW0yB3dF7hK1", "name": "get_weather",
             "arguments": "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"},
            {"type": "function_call_output", "call_id": "call_Xq4mJ8vN2pR6tW0yB3dF7hK1", "output": "18°C, clear"}
        ])
    );
}

fn text_stream(terminal: &str) -> String {
    let events = [
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_t","model":"gpt-4.1-2025-04-14","status":"in_progress","output":[],"usage":null}}"#.to_owned(),
        r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}"#.to_owned(),
        r#"{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}"#.to_owned(),
        r#"{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello","obfuscation":"x"}"#.to_owned(),
        r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":", world","logprobs":[]}"#.to_owned(),
        r#"{"type":"response.web_search_call.in_progress","sequence_number":5,"output_index":1}"#.to_owned(),
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":5,"item_id":"rs_1","output_index":2,"summary_index":0,"delta":"Greeting."}"#.to_owned(),
        terminal.to_owned(),
    ];
    events
        .iter()
        .map(|data| {
            let name = serde_json::from_str::<serde_json::Value>(data).expect("json")["type"]
                .as_str()
                .expect("type")
                .to_owned();
            format!("event: {name}\ndata: {data}\n\n")
        })
        .collect()
}

#[tokio::test]
async fn text_reply_with_cached_input() {
    let completed = r#"{"type":"response.completed","sequence_number":6,"response":{"id":"resp_t","model":"gpt-4.1-2025-04-14","status":"completed","output":[{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello, world","annotations":[]}]}],"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1003}}}"#;
    let server = FakeServer::start(vec![Reply::sse(text_stream(completed)).in_pieces(3)]).await;
    let (config, _) = wire_to(ProviderConfig::openai("k"), &server);
    let (events, mut sink) = collector();
    let request = Request {
        model: "gpt-4.1".into(),
        reasoning_effort: None,
        ..weather_request()
    };
    let response = stream_once(&config, &request, &mut sink)
        .await
        .expect("reply");
    assert_eq!(
        response.content,
        vec![Block::Text {
            text: "Hello, world".into()
        }]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 400,
            output_tokens: 3,
            cache_read_tokens: 600,
            ..Usage::default()
        }
    );
    assert_eq!(
        streamed_text(&events.lock().expect("events")),
        "Hello, world"
    );
    assert!(
        events
            .lock()
            .expect("events")
            .contains(&StreamEvent::ThinkingDelta("Greeting.".into()))
    );
    // Not a reasoning model and no effort asked: no reasoning include.
    assert_eq!(server.requests()[0].body.get("include"), None);
}

#[tokio::test]
async fn incomplete_response_is_a_max_tokens_stop() {
    let incomplete = r#"{"type":"response.incomplete","sequence_number":6,"response":{"id":"resp_t","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":10,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0}}}}"#;
    let server = FakeServer::start(vec![Reply::sse(text_stream(incomplete))]).await;
    let (config, _) = wire_to(ProviderConfig::openai("k"), &server);
    let (_, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        response.content,
        vec![Block::Text {
            text: "Hello, world".into()
        }]
    );
}

#[tokio::test]
async fn error_events_flat_and_nested_are_retried_and_failed_responses_are_not() {
    let nested = "event: error\ndata: {\"type\":\"error\",\"sequence_number\":2,\"error\":{\"type\":\"too_many_requests\",\"code\":\"too_many_requests\",\"message\":\"Too Many Requests\",\"param\":null}}\n\n";
    let flat = "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"try again\",\"param\":null,\"sequence_number\":4}\n\n";
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":7,\"response\":{\"id\":\"resp_123\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"invalid_prompt\",\"message\":\"The prompt was flagged.\"},\"output\":[],\"usage\":null}}\n\n";
    let server = FakeServer::start(vec![
        Reply::sse(nested),
        Reply::sse(flat),
        Reply::sse(failed),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::openai("k"), &server);
    let (events, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("fails");
    assert!(
        matches!(&error, ProviderError::Api { kind, message, .. } if kind == "invalid_prompt" && message == "The prompt was flagged."),
        "{error}"
    );
    let reasons = retry_reasons(&events.lock().expect("events"));
    assert_eq!(
        reasons,
        vec![
            "too_many_requests in the stream: Too Many Requests",
            "server_error in the stream: try again"
        ]
    );
    assert_eq!(
        sleeper.waits(),
        vec![Duration::from_secs(2), Duration::from_secs(4)]
    );
}

#[tokio::test]
async fn end_of_stream_without_terminal_event_is_retried() {
    let body = fixture("openai-responses-function-call.sse");
    let cut = body
        .find("event: response.completed")
        .expect("terminal event");
    let server = FakeServer::start(vec![
        Reply::sse(body.clone()).cut_after(cut),
        Reply::sse(body),
    ])
    .await;
    let (config, _) = wire_to(ProviderConfig::openai("k"), &server);
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let retries = retries(&events.lock().expect("events"));
    assert_eq!(retries.len(), 1);
    assert!(retries[0].2.contains("stream broke"), "{}", retries[0].2);
}

#[tokio::test]
async fn insufficient_quota_is_not_retried() {
    let body = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let server = FakeServer::start(vec![Reply::error(429, body)]).await;
    let (config, sleeper) = wire_to(ProviderConfig::openai("k"), &server);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("fails");
    assert!(
        matches!(&error, ProviderError::Http { status: 429, message, .. } if message == "You exceeded your current quota"),
        "{error}"
    );
    assert!(sleeper.waits().is_empty());
}
