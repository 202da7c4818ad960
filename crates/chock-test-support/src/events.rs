//! Event collectors: a session's `log.jsonl`, or a JSON event stream (one object a line, as
//! `--json` front ends print), read into events — loosely as (kind, call_id, data), or as the
//! protocol's typed payloads — and waited on.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One logged event, loosely: its kind, its call id (if it belongs to a call), its data.
pub type Logged = (String, Option<String>, serde_json::Value);

/// The session directories under a sessions root, sorted; none if the root does not exist yet.
pub fn sessions_under(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The only session under `root`.
pub fn only_session(root: &Path) -> PathBuf {
    let sessions = sessions_under(root);
    assert_eq!(sessions.len(), 1, "one session under {}", root.display());
    sessions[0].clone()
}

/// Every line of the session's `log.jsonl`, one JSON value each.
pub fn read_lines(session: &Path) -> Vec<serde_json::Value> {
    let path = session.join("log.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// Every event of the session: (kind, call_id, data).
pub fn read_log(session: &Path) -> Vec<Logged> {
    read_lines(session).iter().map(loosely).collect()
}

/// Every event of a session that may still be writing: its whole lines only (a last line being
/// written is left for the next read).
pub fn read_log_live(session: &Path) -> Vec<Logged> {
    let path = session.join("log.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    whole_lines(&text)
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: {e}: {line}", path.display()));
            loosely(&value)
        })
        .collect()
}

/// The lines of `text` that are whole (end in a newline).
fn whole_lines(text: &str) -> std::str::Lines<'_> {
    text.rfind('\n').map_or("", |end| &text[..end]).lines()
}

/// Every event of the session as its typed payload (each must fit its kind's type exactly).
pub fn read_typed(session: &Path) -> Vec<(Option<String>, chock_protocol::EventData)> {
    read_log(session)
        .into_iter()
        .map(|(kind, call, data)| (call, typed(&kind, &data)))
        .collect()
}

/// A log line as (kind, call_id, data).
pub fn loosely(line: &serde_json::Value) -> Logged {
    (
        line["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("a line with no kind: {line}"))
            .to_string(),
        line["call_id"].as_str().map(str::to_string),
        line["data"].clone(),
    )
}

/// `data` read as the payload of `kind`, which it must fit exactly.
pub fn typed(kind: &str, data: &serde_json::Value) -> chock_protocol::EventData {
    let parsed: chock_protocol::EventKind =
        kind.parse().unwrap_or_else(|e| panic!("{kind}: {e:?}"));
    chock_protocol::EventData::parse_exact(parsed, data)
        .unwrap_or_else(|e| panic!("{kind} does not fit its type: {e}: {data}"))
}

/// Waits (polling, up to `timeout`) until the session's log holds an event `pick` takes.
/// A log not written yet, or whose last line is still being written, is read again.
pub fn wait_for_event<T>(
    session: &Path,
    timeout: Duration,
    mut pick: impl FnMut(&Logged) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    let path = session.join("log.jsonl");
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // Only whole lines: the writer may be in the middle of the last one.
        for line in whole_lines(&text) {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: {e}: {line}", path.display()));
            if let Some(found) = pick(&loosely(&value)) {
                return found;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{}: no such event within {timeout:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a JSON event stream (one object a line) until `pick` takes a line; the lines before it
/// are returned too. Panics if the stream ends first.
pub fn read_until<T>(
    stream: &mut impl BufRead,
    mut pick: impl FnMut(&serde_json::Value) -> Option<T>,
) -> (Vec<serde_json::Value>, T) {
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        let n = stream.read_line(&mut line).expect("the stream reads");
        assert!(n > 0, "the stream ended first; it said: {seen:?}");
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {e}: {line}"));
        if let Some(found) = pick(&value) {
            return (seen, found);
        }
        seen.push(value);
    }
}

/// For every tool call: its decision is logged, and logged before its result.
pub fn assert_decisions_precede_results(events: &[Logged]) {
    let calls: Vec<&String> = events
        .iter()
        .filter(|(k, _, _)| k == "tool.call")
        .filter_map(|(_, c, _)| c.as_ref())
        .collect();
    assert!(!calls.is_empty());
    for call in calls {
        let at = |kind: &str| {
            events
                .iter()
                .position(|(k, c, _)| k == kind && c.as_ref() == Some(call))
        };
        let decision = at("decision").unwrap_or_else(|| panic!("no decision for {call}"));
        let result = at("tool.result").unwrap_or_else(|| panic!("no result for {call}"));
        let called = at("tool.call").expect("the call is logged");
        assert!(
            called < decision && decision < result,
            "{call}: call {called}, decision {decision}, result {result}"
        );
    }
}
