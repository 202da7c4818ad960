//! A stream that goes bad mid-reply, whatever the fault, is requested again within the retry budget:
//! for each of the three wire formats, a malformed event, a stall and a cut at every event of the
//! reference stream on the first attempt, then the good stream, give exactly the good reply and a retry
//! reason naming the cause. Positions are generated from the reference streams, not listed by hand.

mod support;

use std::time::Duration;

use chock_provider::{
    Message, ProviderConfig, ProviderError, Request, Response, StreamFault, Usage,
};
use support::{
    FakeServer, Framing, Reply, collector, event_ranges, fixture, retry_reasons, stream_once,
    wire_to,
};
use tokio::task::JoinSet;

/// The stall timeout of these tests: short, yet long enough that a reply on a loaded 2-core machine
/// (every case runs at once) is never taken for a stall; no assertion depends on how fast anything is.
const STALL: Duration = Duration::from_millis(1500);

/// One wire format and its reference stream.
#[derive(Clone, Copy)]
struct Format {
    name: &'static str,
    config: fn() -> ProviderConfig,
    fixture: &'static str,
}

const ANTHROPIC: Format = Format {
    name: "anthropic",
    config: || ProviderConfig::anthropic("k"),
    fixture: "anthropic-messages-tool-use.sse",
};
const RESPONSES: Format = Format {
    name: "responses",
    config: || ProviderConfig::openai("k"),
    fixture: "openai-responses-function-call.sse",
};
const CHAT: Format = Format {
    name: "chat",
    config: || ProviderConfig::chat_completions("chat", "", None),
    fixture: "openai-chat-completions-tool-calls.sse",
};

fn request() -> Request {
    Request {
        model: "m".into(),
        messages: vec![Message::user_text("What's the weather in Paris?")],
        max_tokens: 1024,
        ..Request::default()
    }
}

/// What one call against `replies` returned, with its retry reasons and the requests the server saw.
struct Outcome {
    result: Result<Response, ProviderError>,
    reasons: Vec<String>,
    requests: usize,
}

async fn call(format: Format, replies: Vec<Reply>, idle_timeout: Duration) -> Outcome {
    let server = FakeServer::start(replies).await;
    let (mut config, _) = wire_to((format.config)(), &server);
    config.idle_timeout = idle_timeout;
    let (events, mut sink) = collector();
    let result = stream_once(&config, &request(), &mut sink).await;
    let reasons = retry_reasons(&events.lock().expect("events"));
    Outcome {
        result,
        reasons,
        requests: server.requests().len(),
    }
}

/// The reply the untouched reference stream decodes to.
async fn good_reply(format: Format) -> Response {
    let outcome = call(format, vec![Reply::sse(fixture(format.fixture))], STALL).await;
    let response = outcome.result.expect("the reference stream decodes");
    assert!(
        response.tool_calls().count() > 0 && response.usage != Usage::default(),
        "{}: the reference reply has a call and usage: {response:?}",
        format.name
    );
    response
}

/// Runs every `(label, bad first reply)` case with the good stream second, all at once, and checks
/// each gives exactly the good reply after one retry whose reason starts with `cause`.
async fn each_recovers(
    format: Format,
    cases: Vec<(String, Reply)>,
    idle_timeout: Duration,
    cause: &'static str,
) -> usize {
    let good = good_reply(format).await;
    let count = cases.len();
    let mut running = JoinSet::new();
    for (label, bad) in cases {
        let replies = vec![bad, Reply::sse(fixture(format.fixture)).in_pieces(64)];
        running.spawn(async move { (label, call(format, replies, idle_timeout).await) });
    }
    while let Some(joined) = running.join_next().await {
        let (label, outcome) = joined.expect("case ran");
        let at = format!("{} {label}", format.name);
        let response = outcome
            .result
            .unwrap_or_else(|e| panic!("{at}: the second attempt should succeed: {e}"));
        assert_eq!(response, good, "{at}");
        assert_eq!(outcome.requests, 2, "{at}");
        assert_eq!(outcome.reasons.len(), 1, "{at}: {:?}", outcome.reasons);
        assert!(
            outcome.reasons[0].starts_with(cause),
            "{at}: {}",
            outcome.reasons[0]
        );
    }
    count
}

/// Every place a stream can be interrupted: just before each event, and in the middle of each.
fn positions(body: &str) -> Vec<(String, usize)> {
    let mut at = Vec::new();
    for (k, range) in event_ranges(body).into_iter().enumerate() {
        at.push((format!("before event {k}"), range.start));
        at.push((
            format!("inside event {k}"),
            body.floor_char_boundary(range.start + range.len() / 2),
        ));
    }
    at
}

/// The reference stream with event `k`'s data replaced by `data(old)`.
fn with_event_data(body: &str, k: usize, data: impl Fn(&str) -> String) -> String {
    let range = event_ranges(body)[k].clone();
    let event: String = body[range.clone()]
        .lines()
        .map(|line| match line.strip_prefix("data: ") {
            Some(old) => format!("data: {}\n", data(old)),
            None => format!("{line}\n"),
        })
        .collect();
    format!("{}{event}{}", &body[..range.start], &body[range.end..])
}

async fn malformed_events_anywhere_are_retried(format: Format) {
    let body = fixture(format.fixture);
    let mut not_json = Vec::new();
    let mut not_an_object = Vec::new();
    for k in 0..event_ranges(&body).len() {
        // Truncated: the first half of the event's JSON.
        let truncated = with_event_data(&body, k, |old| {
            old[..old.floor_char_boundary(old.len() / 2)].to_owned()
        });
        not_json.push((
            format!("event {k} truncated"),
            Reply::sse(truncated).in_pieces(64),
        ));
        let array = with_event_data(&body, k, |_| r#"["not", "an", "event"]"#.to_owned());
        not_an_object.push((
            format!("event {k} an array"),
            Reply::sse(array).in_pieces(64),
        ));
    }
    let cause = "stream broke: malformed ";
    let n = each_recovers(format, not_json, Duration::from_secs(10), cause).await;
    let m = each_recovers(format, not_an_object, Duration::from_secs(10), cause).await;
    assert!(n >= 10 && n == m, "{}: {n} events", format.name);
}

#[tokio::test]
async fn anthropic_malformed_event_anywhere_is_retried() {
    malformed_events_anywhere_are_retried(ANTHROPIC).await;
}

#[tokio::test]
async fn responses_malformed_event_anywhere_is_retried() {
    malformed_events_anywhere_are_retried(RESPONSES).await;
}

#[tokio::test]
async fn chat_malformed_event_anywhere_is_retried() {
    malformed_events_anywhere_are_retried(CHAT).await;
}

/// Valid JSON without the shape the format requires: `(format, what is replaced, by what, the problem)`.
const WRONG_SHAPES: &[(&str, &str, &str, &str)] = &[
    (
        "anthropic",
        r#""index":0,"delta":{"type":"text_delta","text":"I'll check"}"#,
        r#""delta":{"type":"text_delta","text":"I'll check"}"#,
        "no `index`",
    ),
    (
        "anthropic",
        r#""content_block":{"type":"text","text":""}"#,
        r#""content_block":"text""#,
        "no `content_block` object",
    ),
    (
        "anthropic",
        r#""index":1,"delta":{"type":"input_json_delta","partial_json":""}"#,
        r#""index":7,"delta":{"type":"input_json_delta","partial_json":""}"#,
        "a delta for block 7, which never started",
    ),
    (
        "responses",
        r#""output_index":1,"delta":"location""#,
        r#""output_index":1,"delta":5"#,
        "no `delta` string",
    ),
    (
        "responses",
        r#""sequence_number":4,"output_index":1,"#,
        r#""sequence_number":4,"#,
        "no `output_index`",
    ),
    (
        "responses",
        r#""type":"response.completed","sequence_number":18,"response":{"#,
        r#""type":"response.completed","sequence_number":18,"response":"done","ignored":{"#,
        "no `response` object",
    ),
    (
        "chat",
        r#""choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":\"Paris"}}]},"logprobs":null,"finish_reason":null}]"#,
        r#""choices":{"index":0}"#,
        "not a chunk",
    ),
    (
        "chat",
        r#""tool_calls":[{"index":1,"function":{"arguments":", UK"}}]"#,
        r#""tool_calls":{"index":1}"#,
        "not a chunk",
    ),
];

#[tokio::test]
async fn an_event_of_the_wrong_shape_is_retried_as_malformed() {
    for format in [ANTHROPIC, RESPONSES, CHAT] {
        let body = fixture(format.fixture);
        let mut cases = Vec::new();
        for (name, from, to, problem) in WRONG_SHAPES.iter().filter(|c| c.0 == format.name) {
            assert_eq!(body.matches(from).count(), 1, "{name}: {from}");
            let bad = body.replacen(from, to, 1);
            let outcome = call(
                format,
                vec![Reply::sse(bad.clone()), Reply::sse(body.clone())],
                Duration::from_secs(10),
            )
            .await;
            assert!(
                outcome.reasons.len() == 1
                    && outcome.reasons[0].starts_with("stream broke: malformed ")
                    && outcome.reasons[0].contains(&format!(": {problem}")),
                "{name} {problem}: {:?}",
                outcome.reasons
            );
            cases.push((problem.to_string(), Reply::sse(bad)));
        }
        assert!(cases.len() >= 2, "{}", format.name);
        each_recovers(
            format,
            cases,
            Duration::from_secs(10),
            "stream broke: malformed ",
        )
        .await;
    }
}

async fn stalls_anywhere_are_retried(format: Format) {
    let body = fixture(format.fixture);
    let mut cases: Vec<(String, Reply)> = positions(&body)
        .into_iter()
        .map(|(label, at)| {
            (
                format!("stalled {label}"),
                Reply::sse(body.clone()).stall_after(at),
            )
        })
        .collect();
    let count = cases.len();
    cases.push(("silent before its headers".into(), Reply::silent()));
    each_recovers(format, cases, STALL, "stream broke: stalled: no ").await;
    assert!(count >= 20, "{}: {count} positions", format.name);

    // The reason says which silence it was.
    let silent = call(
        format,
        vec![Reply::silent(), Reply::sse(body.clone())],
        STALL,
    )
    .await;
    assert_eq!(
        silent.reasons,
        vec!["stream broke: stalled: no response headers for 1.5s"]
    );
    let quiet = call(
        format,
        vec![Reply::sse(body.clone()).stall_after(0), Reply::sse(body)],
        STALL,
    )
    .await;
    assert_eq!(
        quiet.reasons,
        vec!["stream broke: stalled: no data for 1.5s"]
    );
}

#[tokio::test]
async fn anthropic_stall_anywhere_is_retried() {
    stalls_anywhere_are_retried(ANTHROPIC).await;
}

#[tokio::test]
async fn responses_stall_anywhere_is_retried() {
    stalls_anywhere_are_retried(RESPONSES).await;
}

#[tokio::test]
async fn chat_stall_anywhere_is_retried() {
    stalls_anywhere_are_retried(CHAT).await;
}

/// Cuts at every position in both framings. A chunked body cut short is a transport error; a
/// close-delimited one is a clean end of stream, which the decoder must see is before the terminal event.
async fn cuts_anywhere_are_retried(format: Format, complete_after: Option<usize>) {
    let body = fixture(format.fixture);
    let mut cases = Vec::new();
    let mut accepted = Vec::new();
    for framing in [Framing::Chunked, Framing::CloseDelimited] {
        for (label, at) in positions(&body) {
            let reply = Reply::sse(body.clone())
                .in_pieces(64)
                .cut_after(at)
                .framing(framing);
            let label = format!("cut {label} ({framing:?})");
            match complete_after {
                Some(end) if framing == Framing::CloseDelimited && at >= end => {
                    accepted.push((label, reply));
                }
                _ => cases.push((label, reply)),
            }
        }
    }
    assert!(cases.len() >= 40, "{}: {} cuts", format.name, cases.len());
    each_recovers(
        format,
        cases,
        Duration::from_secs(10),
        "stream broke: cut: ",
    )
    .await;

    // Chat Completions only: servers that send no `[DONE]` end a complete reply by closing the
    // connection after the `finish_reason` chunk, so a clean close from there on is taken as the end.
    let good = good_reply(format).await;
    for (label, reply) in accepted {
        let outcome = call(format, vec![reply], Duration::from_secs(10)).await;
        let response = outcome.result.unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(response.content, good.content, "{label}");
        assert!(outcome.reasons.is_empty(), "{label}");
    }
}

#[tokio::test]
async fn anthropic_cut_anywhere_is_retried() {
    cuts_anywhere_are_retried(ANTHROPIC, None).await;
}

#[tokio::test]
async fn responses_cut_anywhere_is_retried() {
    cuts_anywhere_are_retried(RESPONSES, None).await;
}

#[tokio::test]
async fn chat_cut_anywhere_is_retried() {
    let body = fixture(CHAT.fixture);
    let finish = event_ranges(&body)
        .into_iter()
        .find(|r| body[r.clone()].contains(r#""finish_reason":"tool_calls""#))
        .expect("a finish chunk");
    cuts_anywhere_are_retried(CHAT, Some(finish.end)).await;
}

/// A 10 KB event, cut off: the first event of the format, padded.
fn huge_bad_event(format: Format) -> String {
    let pad = "x".repeat(10 * 1024);
    match format.name {
        "anthropic" => format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{pad}\n\n"
        ),
        "responses" => format!(
            "event: response.created\ndata: {{\"type\":\"response.created\",\"response\":{{\"tools\":\"{pad}\n\n"
        ),
        _ => format!(
            "data: {{\"id\":\"chatcmpl-1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{pad}\n\n"
        ),
    }
}

#[tokio::test]
async fn a_malformed_event_on_every_attempt_exhausts_the_budget_with_a_short_typed_error() {
    for format in [ANTHROPIC, RESPONSES, CHAT] {
        let bad = huge_bad_event(format);
        let replies = (0..7).map(|_| Reply::sse(bad.clone())).collect();
        let outcome = call(format, replies, Duration::from_secs(10)).await;
        let error = outcome.result.expect_err("every attempt is malformed");
        let ProviderError::GaveUp { attempts, last } = &error else {
            panic!("{}: expected GaveUp, got {error}", format.name)
        };
        assert_eq!(*attempts, 6, "{}", format.name);
        assert!(
            matches!(
                &**last,
                ProviderError::StreamBroken {
                    fault: StreamFault::Malformed { problem, .. },
                    ..
                } if problem == "not JSON (cut off)"
            ),
            "{}: {last:?}",
            format.name
        );
        assert_eq!(outcome.requests, 6, "{}", format.name);
        assert_eq!(outcome.reasons.len(), 5, "{}", format.name);
        let message = error.to_string();
        let data = bad.trim_end().split_once("data: ").expect("a data line").1;
        assert!(
            message.chars().count() <= 300
                && message.ends_with(&format!("… ({} bytes)", data.len())),
            "{}: {} chars: {message}",
            format.name,
            message.chars().count()
        );
        for reason in &outcome.reasons {
            assert!(reason.chars().count() <= 300, "{reason}");
        }
    }
}

#[tokio::test]
async fn a_long_error_body_is_quoted_clipped() {
    let page = format!("<html><body>{}</body></html>", "é".repeat(10_000));
    let outcome = call(
        ANTHROPIC,
        vec![Reply::error(400, &page)],
        Duration::from_secs(10),
    )
    .await;
    let error = outcome.result.expect_err("400");
    let ProviderError::Http { message, body, .. } = &error else {
        panic!("expected Http, got {error}")
    };
    assert!(message.starts_with("<html><body>é"), "{message}");
    assert!(
        message.ends_with(&format!("… ({} bytes)", page.len())),
        "{message}"
    );
    assert!(error.to_string().chars().count() <= 300, "{error}");
    // The kept body is longer than the quote but bounded too.
    assert!(
        body.chars().count() > message.chars().count() && body.len() < 10_000,
        "{}",
        body.len()
    );
}
