use serde_json::json;

use super::*;
use crate::log::{AnswerKind, ApprovalAnswer, Asked, ModelResponse, ToolCall, TurnStart, Usage};

fn start() -> EventData {
    serde_json::from_value::<SessionStart>(json!({
        "format": "chock-log/1", "session_id": "s", "chock_version": "0", "pid": 1,
        "project": "/p", "parent": null, "provider": "demo", "model": "m"
    }))
    .map(EventData::SessionStart)
    .unwrap()
}

fn response(cost: Option<f64>) -> EventData {
    EventData::ModelResponse(ModelResponse {
        turn: 1,
        model: "m".into(),
        id: None,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Usage::default()
        },
        cost_usd: cost,
        stop_reason: crate::log::StopReason::EndTurn,
        content: json!([]),
    })
}

fn ask(q: &str) -> EventData {
    EventData::ApprovalAsk(ApprovalAsk {
        secret: false,
        question: Some(q.into()),
        action: Some("exec.rm".into()),
        decision: None,
        decided_by: None,
        asked: Asked::Person,
        what: "rm".into(),
        reviewer: None,
        policy_file: None,
    })
}

fn answer(q: &str) -> EventData {
    EventData::ApprovalAnswer(ApprovalAnswer {
        question: Some(q.into()),
        action: Some("exec.rm".into()),
        answer: AnswerKind::Deny,
        by: None,
        reasons: None,
        reply: None,
        policy_file: None,
    })
}

fn end(reason: EndReason) -> EventData {
    EventData::SessionEnd(SessionEnd {
        reason,
        error: None,
        summary: None,
        workspace_kept: None,
    })
}

fn fold(events: &[EventData]) -> SessionView {
    SessionView::from_events(events.iter().enumerate().map(|(seq, data)| {
        let at = At {
            seq: seq as u64,
            ts: "t",
            kind: data.kind(),
            call_id: Some("c1"),
        };
        (at, Some(data))
    }))
}

#[test]
fn the_view_carries_start_title_cost_questions_and_end() {
    let title = EventData::ToolCall(ToolCall {
        tool: crate::TITLE_TOOL.into(),
        input: Some(json!({"title": "Fix it"})),
        argv: None,
        cwd: None,
        action: None,
        resolved: None,
    });
    let v = fold(&[
        start(),
        EventData::TurnStart(TurnStart {
            turn: 1,
            input: Some("go".into()),
        }),
        response(Some(0.5)),
        title,
        ask("q-1"),
        ask("q-2"),
        answer("q-1"),
        response(Some(0.25)),
        end(EndReason::OutOfBudget),
    ]);
    assert_eq!(v.events, 9);
    assert_eq!(v.last_seq, Some(8));
    assert_eq!(v.last_kind, Some(EventKind::SessionEnd));
    assert_eq!(v.project(), Some("/p"));
    assert_eq!(v.title.as_deref(), Some("Fix it"));
    assert_eq!(v.cost_usd(), Some(0.75));
    assert_eq!((v.input_tokens, v.output_tokens, v.turns), (20, 4, 1));
    let open: Vec<_> = v
        .questions
        .iter()
        .map(|q| (q.seq, q.question.as_str()))
        .collect();
    assert_eq!(open, [(5, "q-2")]);
    assert_eq!(v.end_reason(), Some(EndReason::OutOfBudget));
}

#[test]
fn an_unpriced_reply_makes_the_cost_unknown_and_no_reply_leaves_it_absent() {
    assert_eq!(fold(&[start()]).cost_usd(), None);
    assert_eq!(
        fold(&[start(), response(None), response(Some(1.0))]).cost_usd(),
        None
    );
    assert_eq!(
        fold(&[start(), response(Some(1.0)), response(None)]).cost_usd(),
        None
    );
}

#[test]
fn work_after_an_end_reopens_the_session_and_an_apply_does_not() {
    let resumed = fold(&[
        start(),
        end(EndReason::Done),
        EventData::TurnStart(TurnStart {
            turn: 2,
            input: Some("more".into()),
        }),
    ]);
    assert!(!resumed.ended());
    let applied = fold(&[start(), end(EndReason::Done), ask("q-9"), answer("q-9")]);
    assert_eq!(applied.end_reason(), Some(EndReason::Done));
}

#[test]
fn an_unreadable_event_counts_as_the_last_but_changes_nothing_else() {
    let mut v = fold(&[start()]);
    v.apply(
        At {
            seq: 1,
            ts: "t2",
            kind: EventKind::Decision,
            call_id: None,
        },
        None,
    );
    assert_eq!(
        (v.events, v.last_seq, v.last_ts.as_deref()),
        (2, Some(1), Some("t2"))
    );
    assert_eq!(v.project(), Some("/p"));
}
