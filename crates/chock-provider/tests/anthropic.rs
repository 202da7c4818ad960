//! The Anthropic Messages client against a loopback server speaking the recorded wire format.

mod support;

use chock_provider::{
    Block, Cost, Message, ProviderConfig, Request, Role, StopReason, StreamEvent, ToolSpec, Usage,
    connect, price,
};
use serde_json::json;
use support::anthropic::{expected_fixture_content, weather_request};
use support::{
    FakeServer, Reply, collector, fixture, retries, stream_once, streamed_text, wire_to,
};

#[tokio::test]
async fn fixture_stream_in_any_piece_size_gives_text_tool_call_and_usage() {
    for piece in [1, 2, 7, 64, 100_000] {
        let server = FakeServer::start(vec![
            Reply::sse(fixture("anthropic-messages-tool-use.sse")).in_pieces(piece),
        ])
        .await;
        let (config, _) = wire_to(ProviderConfig::anthropic("sk-ant-test-key"), &server);
        let provider = connect(&config).expect("provider");
        let (events, mut sink) = collector();
        let response = provider
            .stream(&weather_request(), &mut sink)
            .await
            .expect("reply");

        assert_eq!(
            response.content,
            expected_fixture_content(),
            "piece {piece}"
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 412,
                output_tokens: 87,
                ..Usage::default()
            }
        );
        assert_eq!(response.model, "claude-sonnet-4-20250514");
        assert_eq!(response.id.as_deref(), Some("msg_01XkR7bq2VhT9mWcA4sLpE3N"));
        let events = events.lock().expect("events").clone();
        assert_eq!(
            streamed_text(&events),
            "I'll check the current weather in Paris for you."
        );
        assert!(events.contains(&StreamEvent::ToolCallStarted {
            id: "toolu_01Hq8ZfV3nJc5Wd2YtKx9PaR".into(),
            name: "get_weather".into()
        }));
        assert!(retries(&events).is_empty());

        let cost = price(&response.model, &response.usage)
            .usd()
            .expect("sonnet 4 is priced");
        assert!(
            (cost - (412.0 * 3.0 + 87.0 * 15.0) / 1e6).abs() < 1e-12,
            "{cost}"
        );
    }
}

#[tokio::test]
async fn request_carries_headers_and_the_documented_body() {
    let server =
        FakeServer::start(vec![Reply::sse(fixture("anthropic-messages-tool-use.sse"))]).await;
    let (mut config, _) = wire_to(ProviderConfig::anthropic("sk-ant-test-key"), &server);
    config.prompt_caching = false;
    let (_, mut sink) = collector();
    stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test-key"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-sonnet-4-20250514", "max_tokens": 1024, "stream": true,
            "system": "You are a weather assistant.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]}],
            "tools": [{"name": "get_weather", "description": "Current weather for a city",
                       "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}]
        })
    );
}

/// Thinking with a signature, CRLF line endings, comments, a JSON payload split over two `data:` lines,
/// unknown events and blocks, and cumulative usage with cache fields.
const THINKING_STREAM: &str = concat!(
    ": keep-alive comment\r\n",
    "event: message_start\r\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_think\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":50,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\r\n",
    "\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\r\n",
    "data: \"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"The user wants \"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a file listing.\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM-sig\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque-blob\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\r\n\r\n",
    "event: some_future_event\r\n",
    "data: {\"type\":\"some_future_event\",\"detail\":1}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":2}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_list\",\"name\":\"list\",\"input\":{},\"caller\":{\"type\":\"direct\"}}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":3}\r\n\r\n",
    "event: message_delta\r\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"stop_details\":null},\"usage\":{\"output_tokens\":40}}\r\n\r\n",
    "event: ping\r\n",
    "data: {\"type\": \"ping\"}\r\n\r\n",
    "event: message_delta\r\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":95,\"input_tokens\":null}}\r\n\r\n",
    "event: message_stop\r\n",
    "data: {\"type\":\"message_stop\"}", // no trailing blank line: flushed at end of stream
    "\r\n",
);

#[tokio::test]
async fn thinking_blocks_are_kept_with_signatures_and_sent_back_unmodified() {
    let server = FakeServer::start(vec![
        Reply::sse(THINKING_STREAM).in_pieces(5),
        Reply::sse(fixture("anthropic-messages-tool-use.sse")),
    ])
    .await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let provider = connect(&config).expect("provider");
    let mut request = Request {
        thinking_budget: Some(2048),
        ..weather_request()
    };
    let (events, mut sink) = collector();
    let response = provider.stream(&request, &mut sink).await.expect("reply");

    assert_eq!(
        response.content,
        vec![
            Block::Thinking {
                thinking: "The user wants a file listing.".into(),
                signature: "EqQBCgIYAhIM-sig".into()
            },
            Block::RedactedThinking {
                data: "opaque-blob".into()
            },
            Block::ToolUse {
                id: "toolu_list".into(),
                name: "list".into(),
                input: json!({})
            },
        ]
    );
    // Cumulative: the last message_delta's output_tokens replaces, never adds; null fields are ignored.
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 50,
            output_tokens: 95,
            cache_read_tokens: 2000,
            cache_write_tokens: 1000,
            reasoning_tokens: 0
        }
    );
    let thinking: String = events
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| {
            if let StreamEvent::ThinkingDelta(t) = e {
                Some(t.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(thinking, "The user wants a file listing.");

    // Send the turn back with its result, and a text after the result in the same message.
    request
        .messages
        .push(Message::assistant(response.content.clone()));
    request.messages.push(Message {
        role: Role::User,
        content: vec![
            Block::Text {
                text: "(the listing follows)".into(),
            },
            Block::ToolResult {
                tool_use_id: "toolu_list".into(),
                content: "README.md".into(),
                is_error: false,
            },
        ],
    });
    let (_, mut sink) = collector();
    provider
        .stream(&request, &mut sink)
        .await
        .expect("second reply");
    let sent = &server.requests()[1].body;
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The user wants a file listing.", "signature": "EqQBCgIYAhIM-sig"},
            {"type": "redacted_thinking", "data": "opaque-blob"},
            {"type": "tool_use", "id": "toolu_list", "name": "list", "input": {}}]})
    );
    // tool_result first, text after it.
    assert_eq!(
        sent["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_list", "content": "README.md"},
            {"type": "text", "text": "(the listing follows)", "cache_control": {"type": "ephemeral"}}]})
    );
}

#[tokio::test]
async fn prompt_cache_breakpoints_mark_tools_system_and_the_last_two_user_messages() {
    let server =
        FakeServer::start(vec![Reply::sse(fixture("anthropic-messages-tool-use.sse"))]).await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let mut request = weather_request();
    request.tools.push(ToolSpec {
        name: "list".into(),
        description: "List a directory".into(),
        input_schema: json!({"type": "object"}),
    });
    request
        .messages
        .push(Message::assistant(expected_fixture_content()));
    request.messages.push(Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: "toolu_01Hq8ZfV3nJc5Wd2YtKx9PaR".into(),
            content: "18°C".into(),
            is_error: false,
        }],
    });
    request.messages.push(Message::assistant(vec![Block::Text {
        text: "It is 18°C.".into(),
    }]));
    request.messages.push(Message::user_text("And tomorrow?"));
    let (_, mut sink) = collector();
    stream_once(&config, &request, &mut sink)
        .await
        .expect("reply");

    let sent = &server.requests()[0].body;
    let mark = json!({"type": "ephemeral"});
    assert_eq!(
        sent["system"],
        json!([{"type": "text", "text": "You are a weather assistant.", "cache_control": mark}])
    );
    assert_eq!(sent["tools"][0].get("cache_control"), None);
    assert_eq!(sent["tools"][1]["cache_control"], mark);
    let marked: Vec<usize> = sent["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b.get("cache_control").is_some()))
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(marked, [2, 4], "the last two user messages, nothing else");
    assert_eq!(sent["messages"][2]["content"][0]["cache_control"], mark);
    assert_eq!(sent["messages"][4]["content"][0]["cache_control"], mark);
}

#[tokio::test]
async fn truncated_tool_input_is_kept_as_text_not_a_crash() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_t\",\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_w\",\"name\":\"write_file\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a.txt\\\", \\\"content\\\": \\\"hel\"}}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":16}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    let server = FakeServer::start(vec![Reply::sse(stream)]).await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        response.content,
        vec![Block::ToolUse {
            id: "toolu_w".into(),
            name: "write_file".into(),
            input: json!("{\"path\": \"a.txt\", \"content\": \"hel")
        }]
    );
    let Cost::Known(usd) = price(&response.model, &response.usage) else {
        panic!("haiku 4.5 is priced")
    };
    assert!(
        (usd - (9.0 * 1.0 + 16.0 * 5.0) / 1e6).abs() < 1e-12,
        "{usd}"
    );
}

#[tokio::test]
async fn two_tool_calls_are_assembled_by_index_not_by_arrival() {
    // Deltas of blocks 1 and 2 interleave; each fragment must land in the block its `index` names.
    let ev = |data: &str| {
        let kind = data.split('"').nth(3).unwrap_or_default().to_owned();
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let stream: String = [
        r#"{"type":"message_start","message":{"id":"msg_2","model":"claude-haiku-4-5","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Two reads."}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"read_file","input":{}}}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_b","name":"read_file","input":{}}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a.rs\"}"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"b.rs\"}"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .into_iter()
    .map(ev)
    .collect();
    let server = FakeServer::start(vec![Reply::sse(stream).in_pieces(5)]).await;
    let (config, _) = wire_to(ProviderConfig::anthropic("k"), &server);
    let (_, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(
        response.content,
        vec![
            Block::Text {
                text: "Two reads.".into()
            },
            Block::ToolUse {
                id: "toolu_a".into(),
                name: "read_file".into(),
                input: json!({"path": "a.rs"})
            },
            Block::ToolUse {
                id: "toolu_b".into(),
                name: "read_file".into(),
                input: json!({"path": "b.rs"})
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}
