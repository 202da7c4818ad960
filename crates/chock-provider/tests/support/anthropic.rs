//! The Anthropic request and reply the tests share (the fixture's weather turn).

use chock_provider::{Block, Message, Request, ToolSpec};
use serde_json::json;

/// The request the fixture stream answers.
pub fn weather_request() -> Request {
    Request {
        model: "claude-sonnet-4-20250514".into(),
        system: Some("You are a weather assistant.".into()),
        messages: vec![Message::user_text("What's the weather in Paris?")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
        }],
        max_tokens: 1024,
        ..Request::default()
    }
}

/// What the fixture stream decodes to.
pub fn expected_fixture_content() -> Vec<Block> {
    vec![
        Block::Text {
            text: "I'll check the current weather in Paris for you.".into(),
        },
        Block::ToolUse {
            id: "toolu_01Hq8ZfV3nJc5Wd2YtKx9PaR".into(),
            name: "get_weather".into(),
            input: json!({"location": "Paris, France", "unit": "celsius"}),
        },
    ]
}
