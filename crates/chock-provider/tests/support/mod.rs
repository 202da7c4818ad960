//! The shared wire-level fake model server (`chock_test_support::wire`: scripted replies played byte
//! for byte, every request recorded), the provider pointed at it, and a sleeper that does not sleep.
#![allow(dead_code, unreachable_pub, unused_imports)]

pub mod anthropic;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chock_provider::{
    Block, Message, ProviderConfig, ProviderError, Request, Response, RetryPolicy, Role, Sleeper,
    StreamEvent, connect,
};
pub use chock_test_support::wire::{FakeServer, Framing, Recorded, Reply};

/// A sleeper that records each wait and returns at once; its clock is fixed.
#[derive(Debug, Default)]
pub struct RecordingSleeper {
    pub waits: Mutex<Vec<Duration>>,
}

impl RecordingSleeper {
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().expect("waits").clone()
    }
}

/// The fixed "now" of `RecordingSleeper`: 2015-10-21T07:27:50Z.
pub const FIXED_NOW_SECS: u64 = 1_445_412_470;

impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.waits.lock().expect("waits").push(duration);
        Box::pin(async {})
    }

    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(FIXED_NOW_SECS)
    }
}

/// `config` pointed at the fake server, with a recording sleeper and exact (jitter-free) backoff.
pub fn wire_to(
    mut config: ProviderConfig,
    server: &FakeServer,
) -> (ProviderConfig, Arc<RecordingSleeper>) {
    let sleeper = Arc::new(RecordingSleeper::default());
    config.base_url = server.base_url();
    config.sleeper = sleeper.clone();
    config.retry = RetryPolicy {
        jitter: false,
        ..RetryPolicy::default()
    };
    config.idle_timeout = Duration::from_secs(10);
    (config, sleeper)
}

/// The byte ranges of the events of an SSE stream: each from its first line through the blank line that
/// ends it, so that `body[..ranges[k].start]` is the stream cut just before its event `k`.
pub fn event_ranges(body: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let end = body[start..]
            .find("\n\n")
            .map_or(body.len(), |at| start + at + 2);
        ranges.push(start..end);
        start = end;
    }
    ranges
}

/// A fixture from tests/fixtures.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Collects stream events.
pub fn collector() -> (Arc<Mutex<Vec<StreamEvent>>>, impl FnMut(StreamEvent) + Send) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    (events, move |event| {
        sink.lock().expect("events").push(event)
    })
}

/// One call through a fresh provider built from `config`: the common act of most client tests.
pub async fn stream_once(
    config: &ProviderConfig,
    request: &Request,
    sink: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<Response, ProviderError> {
    connect(config)
        .expect("provider")
        .stream(request, sink)
        .await
}

/// Two turns through one provider: `request`, then its reply sent back as history with `results` as the
/// user's answer, so a test can read how the format carries a call and its result in the second request.
pub async fn turn_with_results(config: &ProviderConfig, mut request: Request, results: Vec<Block>) {
    let provider = connect(config).expect("provider");
    let (_, mut sink) = collector();
    let response = provider.stream(&request, &mut sink).await.expect("reply");
    request.messages.push(Message::assistant(response.content));
    request.messages.push(Message {
        role: Role::User,
        content: results,
    });
    provider
        .stream(&request, &mut sink)
        .await
        .expect("second reply");
}

/// The text of all `TextDelta` events.
pub fn streamed_text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The `Retrying` events as (attempt, wait, reason).
pub fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                attempt,
                wait,
                reason,
            } => Some((*attempt, *wait, reason.clone())),
            _ => None,
        })
        .collect()
}

/// The reasons of the `Retrying` events, in order.
pub fn retry_reasons(events: &[StreamEvent]) -> Vec<String> {
    retries(events).into_iter().map(|r| r.2).collect()
}
