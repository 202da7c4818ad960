use serde_json::json;

use super::*;

#[test]
fn a_payload_round_trips_and_names_its_kind() {
    let end = SessionEnd {
        reason: EndReason::Interrupted,
        error: None,
        summary: None,
        workspace_kept: Some(true),
    };
    let data = EventData::from(end.clone());
    assert_eq!(data.kind(), EventKind::SessionEnd);
    let value = data.to_value();
    assert_eq!(
        value,
        json!({"reason": "interrupted", "workspace_kept": true})
    );
    assert_eq!(
        EventData::parse_exact(EventKind::SessionEnd, &value).unwrap(),
        EventData::SessionEnd(end)
    );
}

#[test]
fn a_field_the_type_does_not_keep_is_caught_by_the_strict_parse_only() {
    let data = json!({"turn": 3, "reason": "tool_results", "wait_ms": 5});
    assert!(EventData::parse(EventKind::TurnEnd, &data).is_ok());
    let err = EventData::parse_exact(EventKind::TurnEnd, &data).unwrap_err();
    assert!(matches!(err, PayloadError::Extra { .. }), "{err}");
}

#[test]
fn a_wrong_shape_names_the_kind() {
    let err = EventData::parse(EventKind::TurnStart, &json!({"turn": "x"})).unwrap_err();
    assert!(err.to_string().contains("turn.start"), "{err}");
}

#[test]
fn every_kind_has_a_schema() {
    for &kind in EventKind::ALL {
        let schema = EventData::schema(kind);
        assert!(schema.as_value().is_object(), "{kind}");
    }
}
