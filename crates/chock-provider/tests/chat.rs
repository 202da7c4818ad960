//! The Chat Completions client against loopback servers speaking OpenAI's format and the variations of
//! compatible servers (Ollama, vLLM, llama.cpp) described in the wire-format notes.

mod support;

use chock_provider::{
    Block, Message, ProviderConfig, ProviderError, Request, StopReason, StreamEvent, ToolSpec,
    Usage, connect,
};
use serde_json::{Value, json};
use support::{
    FakeServer, Framing, Reply, collector, fixture, retries, retry_reasons, stream_once,
    streamed_text, turn_with_results, wire_to,
};

fn weather_request() -> Request {
    Request {
        model: "gpt-4o-mini".into(),
        system: Some("You are a weather assistant.".into()),
        messages: vec![Message::user_text("Weather in Paris and London?")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }],
        max_tokens: 512,
        ..Request::default()
    }
}

fn call(id: &str, name: &str, input: Value) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    }
}

#[tokio::test]
async fn fixture_parallel_calls_split_across_chunks() {
    for piece in [1, 6, 100_000] {
        let server = FakeServer::start(vec![
            Reply::sse(fixture("openai-chat-completions-tool-calls.sse")).in_pieces(piece),
        ])
        .await;
        let (config, _) = wire_to(
            ProviderConfig::chat_completions("openai-chat", "", Some("sk-test".into())),
            &server,
        );
        let (events, mut sink) = collector();
        let response = stream_once(&config, &weather_request(), &mut sink)
            .await
            .expect("reply");
        assert_eq!(
            response.content,
            vec![
                call(
                    "call_7fRk2NwQ9xLp4VdT1sYb8HcM",
                    "get_weather",
                    json!({"location": "Paris, France", "unit": "celsius"})
                ),
                call(
                    "call_Qe5Tb0Ys3Mn8Kw6Jd2Rv9GxA",
                    "get_weather",
                    json!({"location": "London, UK", "unit": "celsius"})
                ),
            ],
            "piece {piece}"
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 88,
                output_tokens: 52,
                ..Usage::default()
            }
        );
        assert_eq!(response.model, "gpt-4o-mini-2024-07-18");
        let started: Vec<StreamEvent> = events
            .lock()
            .expect("events")
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
            .cloned()
            .collect();
        assert_eq!(started.len(), 2);
    }
}

#[tokio::test]
async fn request_body_and_tool_results_follow_the_format() {
    let server = FakeServer::start(vec![
        Reply::sse(fixture("openai-chat-completions-tool-calls.sse")),
        Reply::sse(fixture("openai-chat-completions-tool-calls.sse")),
    ])
    .await;
    let (config, _) = wire_to(
        ProviderConfig::chat_completions("openai-chat", "", Some("sk-test".into())),
        &server,
    );
    turn_with_results(
        &config,
        weather_request(),
        vec![
            Block::ToolResult {
                tool_use_id: "call_7fRk2NwQ9xLp4VdT1sYb8HcM".into(),
                content: "18°C, clear".into(),
                is_error: false,
            },
            Block::ToolResult {
                tool_use_id: "call_Qe5Tb0Ys3Mn8Kw6Jd2Rv9GxA".into(),
                content: "12°C, rain".into(),
                is_error: false,
            },
        ],
    )
    .await;

    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        requests[0].body,
        json!({
            "model": "gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 512,
            "messages": [{"role": "system", "content": "You are a weather assistant."},
                         {"role": "user", "content": "Weather in Paris and London?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                       "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}}]
        })
    );
    assert_eq!(
        requests[1].body["messages"].as_array().expect("messages")[2..],
        [
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_7fRk2NwQ9xLp4VdT1sYb8HcM", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"}},
                {"id": "call_Qe5Tb0Ys3Mn8Kw6Jd2Rv9GxA", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"London, UK\",\"unit\":\"celsius\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_7fRk2NwQ9xLp4VdT1sYb8HcM", "content": "18°C, clear"}),
            json!({"role": "tool", "tool_call_id": "call_Qe5Tb0Ys3Mn8Kw6Jd2Rv9GxA", "content": "12°C, rain"}),
        ]
    );
}

fn chunks(datas: &[&str]) -> String {
    datas.iter().map(|d| format!("data: {d}\n\n")).collect()
}

#[tokio::test]
async fn ollama_style_whole_calls_at_index_zero_without_done() {
    // Ollama 0.20: each call complete in one delta, index always 0 with a new id, finish_reason "stop",
    // and here no [DONE] at all: the end of the stream after a finish_reason is accepted.
    let body = chunks(&[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Two cities."},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3:8b","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3:8b","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"London\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3:8b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":20,"total_tokens":50}}"#,
    ]);
    let server = FakeServer::start(vec![Reply::sse(body).framing(Framing::CloseDelimited)]).await;
    let (config, _) = wire_to(
        ProviderConfig::chat_completions("ollama", "", None),
        &server,
    );
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(
        response.content,
        vec![
            Block::Thinking {
                thinking: "Two cities.".into(),
                signature: String::new()
            },
            call("call_a", "get_weather", json!({"location": "Paris"})),
            call("call_b", "get_weather", json!({"location": "London"})),
        ]
    );
    assert_eq!(
        response.stop_reason,
        StopReason::ToolUse,
        "decided from the calls, not finish_reason"
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 30,
            output_tokens: 20,
            ..Usage::default()
        }
    );
    assert!(
        events
            .lock()
            .expect("events")
            .contains(&StreamEvent::ThinkingDelta("Two cities.".into()))
    );
    // No key configured: no Authorization header.
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn missing_index_null_arguments_and_reasoning_content() {
    // Gemini-style proxies drop the index; vLLM hermes sends null arguments for an argument-less call;
    // DeepSeek and llama.cpp put reasoning in reasoning_content.
    let body = chunks(&[
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Think","content":null}}]}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":"Checking."}}]}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"tool_calls":[{"id":"x1","type":"function","function":{"name":"list","arguments":null}}]}}]}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"tool_calls":[{"id":"x2","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}}]}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"a.txt\"}"}}]}}]}"#,
        r#"{"id":"c2","model":"deepseek-reasoner","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let server = FakeServer::start(vec![Reply::sse(body).in_pieces(4)]).await;
    let (config, _) = wire_to(
        ProviderConfig::chat_completions("deepseek", "", Some("k".into())),
        &server,
    );
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(
        response.content,
        vec![
            Block::Thinking {
                thinking: "Think".into(),
                signature: String::new()
            },
            Block::Text {
                text: "Checking.".into()
            },
            call("x1", "list", json!({})),
            call("x2", "read_file", json!({"path": "a.txt"})),
        ]
    );
    assert_eq!(streamed_text(&events.lock().expect("events")), "Checking.");
    // No usage chunk: zero counts (the doc says local servers may not report usage).
    assert_eq!(response.usage, Usage::default());
}

#[tokio::test]
async fn error_chunk_is_an_api_error_and_server_errors_retry() {
    let body = chunks(&[
        r#"{"error":{"message":"The server had an error","type":"server_error","code":null}}"#,
    ]);
    let ok = chunks(&[
        r#"{"id":"c3","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let server = FakeServer::start(vec![
        Reply::sse(body),
        Reply::error(502, "bad gateway"),
        Reply::sse(ok),
    ])
    .await;
    let (config, sleeper) = wire_to(ProviderConfig::chat_completions("vllm", "", None), &server);
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.content, vec![Block::Text { text: "hi".into() }]);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let reasons = retry_reasons(&events.lock().expect("events"));
    assert_eq!(
        reasons,
        vec![
            "server_error in the stream: The server had an error",
            "HTTP 502"
        ]
    );
    assert_eq!(sleeper.waits().len(), 2);
}

#[tokio::test]
async fn a_stream_cut_before_finish_is_retried() {
    let body = fixture("openai-chat-completions-tool-calls.sse");
    let cut = body.find("London").expect("second call");
    let server = FakeServer::start(vec![
        Reply::sse(body.clone())
            .in_pieces(50)
            .cut_after(cut)
            .framing(Framing::CloseDelimited),
        Reply::sse(body),
    ])
    .await;
    let (config, _) = wire_to(
        ProviderConfig::chat_completions("openai-chat", "", Some("k".into())),
        &server,
    );
    let (events, mut sink) = collector();
    let response = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect("reply");
    assert_eq!(response.tool_calls().count(), 2);
    assert_eq!(retries(&events.lock().expect("events")).len(), 1);
}

#[tokio::test]
async fn aiand_preset_uses_its_configured_base_url() {
    let server = FakeServer::start(vec![Reply::sse(fixture(
        "openai-chat-completions-tool-calls.sse",
    ))])
    .await;
    let mut config = ProviderConfig::aiand("", "aiand-key");
    let (wired, _) = wire_to(config.clone(), &server);
    config.base_url = format!("{}/api/v1", wired.base_url);
    config.sleeper = wired.sleeper;
    let provider = connect(&config).expect("provider");
    assert_eq!(provider.name(), "aiand");
    let (_, mut sink) = collector();
    provider
        .stream(&weather_request(), &mut sink)
        .await
        .expect("reply");
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/api/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer aiand-key"));
}

#[tokio::test]
async fn connection_refused_is_reported_without_retrying() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let config = ProviderConfig::chat_completions("local", &format!("http://{addr}/v1"), None);
    let (_, mut sink) = collector();
    let error = stream_once(&config, &weather_request(), &mut sink)
        .await
        .expect_err("refused");
    assert!(
        matches!(&error, ProviderError::Connect { url, .. } if url.ends_with("/v1/chat/completions")),
        "{error}"
    );
}
