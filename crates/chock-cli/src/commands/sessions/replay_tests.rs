//! Folding a call's events into acts, and judging them, on forged events (the end-to-end tests in
//! tests/sessions_cli.rs replay real sessions).

use chock_log::{Event, EventKind};
use chock_policy::{Policy, Source, Sources};
use serde_json::{Value, json};

use super::*;

fn event(seq: u64, kind: EventKind, call: Option<&str>, data: Value) -> Event {
    Event {
        seq,
        ts: "2026-11-30T00:00:00Z".into(),
        kind,
        call_id: call.map(str::to_owned),
        prev: String::new(),
        data,
    }
}

fn table(text: &str) -> Policy {
    Policy::from_sources(Sources {
        project: Some(Source {
            path: "new.toml".into(),
            text: text.into(),
        }),
        ..Sources::default()
    })
    .unwrap()
}

fn acts(steps: &[Step]) -> Vec<&ActLine> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Act(a) => Some(a),
            _ => None,
        })
        .collect()
}

/// A question, its answer and the decision after them are one act; a fetch's decision and the
/// broker's gate are one act; a proxy connection asked and then gated is one act.
#[test]
fn the_events_of_one_act_are_folded_into_one_line() {
    let events = [
        event(
            1,
            EventKind::ApprovalAsk,
            Some("c1"),
            json!({"action": "git.push", "decision": "ask", "decided_by": "shipped default `git.push`", "asked": "person", "what": "push"}),
        ),
        event(
            2,
            EventKind::ApprovalAnswer,
            Some("c1"),
            json!({"action": "git.push", "answer": "deny", "by": "terminal"}),
        ),
        event(
            3,
            EventKind::Decision,
            Some("c1"),
            json!({"action": "git.push", "decision": "ask", "allowed": false, "decided_by": "shipped default `git.push`; refused by terminal"}),
        ),
        event(
            4,
            EventKind::Decision,
            Some("c2"),
            json!({"action": "net.fetch.com.example", "decision": "allow", "allowed": true, "decided_by": "chock.toml:1"}),
        ),
        event(
            5,
            EventKind::NetDecision,
            Some("c2"),
            json!({"stage": "gate", "door": "fetch_url", "action": "net.fetch.com.example", "host": "example.com", "port": 443, "decision": "allow", "decided_by": "chock.toml:1"}),
        ),
        event(
            6,
            EventKind::ApprovalAsk,
            Some("c3"),
            json!({"action": "net.connect.1.0.0.127.80", "decision": "ask", "decided_by": "rule", "asked": "person", "what": "connect"}),
        ),
        event(
            7,
            EventKind::ApprovalAnswer,
            Some("c3"),
            json!({"action": "net.connect.1.0.0.127.80", "answer": "allow_once", "by": "terminal"}),
        ),
        event(
            8,
            EventKind::NetDecision,
            Some("c3"),
            json!({"stage": "gate", "door": "proxy", "action": "net.connect.1.0.0.127.80", "host": "127.0.0.1", "port": 80, "decision": "allow", "decided_by": "x"}),
        ),
        // The same connection again, let through with no question: its own act.
        event(
            9,
            EventKind::NetDecision,
            Some("c3"),
            json!({"stage": "gate", "door": "proxy", "action": "net.connect.1.0.0.127.80", "host": "127.0.0.1", "port": 80, "decision": "refuse", "reason": "no"}),
        ),
        event(
            10,
            EventKind::Decision,
            Some("c4"),
            json!({"action": null, "decision": "deny", "allowed": false, "decided_by": "bad input"}),
        ),
    ];
    let policy = table(
        "[[rule]]\naction = \"net.connect.*\"\ndecision = \"ask\"\n[[rule]]\naction = \"net.fetch.*\"\ndecision = \"allow\"\n",
    );
    let (steps, counts) = replay(&events, policy);
    let acts = acts(&steps);
    let seqs: Vec<u64> = acts.iter().map(|a| a.seq).collect();
    assert_eq!(seqs, [3, 4, 8, 9, 10], "{acts:#?}");
    assert_eq!(acts[0].recorded.from, RecordedFrom::Decision);
    assert_eq!(acts[2].recorded.from, RecordedFrom::Approval);
    assert_eq!(acts[2].recorded.allowed, Some(true));
    assert_eq!(acts[3].recorded.from, RecordedFrom::NetGate);
    assert!(acts[3].recorded.inferred);
    assert_eq!(acts[4].judgement, Judgement::Unclassified);
    // The last connection was refused with no question: read as deny, now asked.
    assert!(matches!(
        acts[3].judgement,
        Judgement::Differs {
            change: Change::NowAsked,
            ..
        }
    ));
    assert_eq!(counts.acts, 5);
    assert_eq!(counts.differ, 1);
    assert_eq!(counts.unclassified, 1);
}

/// A narrowing applies to the acts after it, not before; a widening removes it again.
#[test]
fn the_ratchet_applies_from_where_it_was_recorded() {
    let decided = |seq, call| {
        event(
            seq,
            EventKind::Decision,
            Some(call),
            json!({"action": "exec.system.ls", "decision": "allow", "allowed": true, "decided_by": "shipped default `exec.system.*`"}),
        )
    };
    let events = [
        decided(1, "a"),
        event(
            2,
            EventKind::Note,
            Some("r"),
            json!({"about": "ratchet", "change": "restrict", "pattern": "exec.*", "decision": "deny"}),
        ),
        decided(3, "b"),
        event(
            4,
            EventKind::Note,
            Some("w"),
            json!({"about": "ratchet", "change": "widen", "pattern": "exec.*", "decision": "allow", "removed": ["exec.*"]}),
        ),
        decided(5, "c"),
    ];
    let (steps, counts) = replay(&events, table(""));
    let judged: Vec<bool> = acts(&steps)
        .iter()
        .map(|a| matches!(a.judgement, Judgement::Same { .. }))
        .collect();
    assert_eq!(judged, [true, false, true]);
    assert_eq!((counts.differ, counts.now_refused), (1, 1));
    assert!(counts.ratchet_errors == 0 && !counts.all_same());
}

/// An event of a kind replay reads that does not fit its type is listed, and the replay cannot
/// say all is the same.
#[test]
fn an_unreadable_event_is_listed_and_counted() {
    let events = [
        event(
            1,
            EventKind::Decision,
            Some("a"),
            json!({"act": "workspace.apply", "decision": "ask"}),
        ),
        event(2, EventKind::ToolResult, Some("a"), json!({"whatever": 1})),
    ];
    let (steps, counts) = replay(&events, table(""));
    assert_eq!(steps.len(), 1);
    assert!(
        matches!(&steps[0], Step::Unreadable(u) if u.seq == 1 && u.reason.contains("missing field"))
    );
    assert_eq!(counts.unreadable, 1);
    assert!(!counts.all_same());
}
