use serde_json::json;

use super::*;
use crate::log::AnswerKind;

#[test]
fn a_request_reads_as_its_typed_call_and_back() {
    let call = Call::SessionsSubscribe(SubscribeParams {
        session: "s".into(),
        from_seq: Some(7),
    });
    let request = Request::new(RequestId::Number(3), &call);
    let wire = serde_json::to_value(&request).unwrap();
    assert_eq!(
        wire,
        json!({"jsonrpc": "2.0", "id": 3, "method": "sessions.subscribe",
               "params": {"session": "s", "from_seq": 7}})
    );
    let back: Request = serde_json::from_value(wire).unwrap();
    assert_eq!(back.call().unwrap(), call);
}

#[test]
fn absent_params_are_empty_and_unknown_methods_and_fields_are_typed_errors() {
    let list: Request =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": "a", "method": "sessions.list"}))
            .unwrap();
    assert_eq!(list.call().unwrap(), Call::SessionsList(NoParams {}));
    let unknown: Request =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "fs.read"})).unwrap();
    assert_eq!(
        unknown.call().unwrap_err().kind(),
        ErrorKind::MethodNotFound
    );
    let extra: Request = serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1,
        "method": "sessions.end", "params": {"session": "s", "force": true}}))
    .unwrap();
    assert_eq!(extra.call().unwrap_err().kind(), ErrorKind::InvalidParams);
    let old: Request =
        serde_json::from_value(json!({"jsonrpc": "1.0", "id": 1, "method": "sessions.list"}))
            .unwrap();
    assert_eq!(old.call().unwrap_err().kind(), ErrorKind::InvalidRequest);
}

#[test]
fn a_server_frame_is_told_apart_by_its_method() {
    let note = Notification::new(&Notice::ApprovalResolved(Resolved {
        session: "s".into(),
        question: "q-1".into(),
        by: Some("web".into()),
        answer: Some(AnswerKind::AllowOnce),
    }));
    let text = serde_json::to_string(&note).unwrap();
    match serde_json::from_str::<ServerFrame>(&text).unwrap() {
        ServerFrame::Notification(n) => {
            assert_eq!(n.notice().unwrap().method(), "approval.resolved")
        }
        other => panic!("{other:?}"),
    }
    let response = Response::err(
        Some(RequestId::Number(1)),
        RpcError::new(ErrorKind::Busy, "working"),
    );
    let text = serde_json::to_string(&response).unwrap();
    assert!(
        text.contains("\"code\":-32003") && text.contains("\"kind\":\"busy\""),
        "{text}"
    );
    match serde_json::from_str::<ServerFrame>(&text).unwrap() {
        ServerFrame::Response(r) => {
            assert_eq!(r.into_result::<Done>().unwrap_err().kind(), ErrorKind::Busy)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn there_is_no_raw_file_or_shell_method() {
    for method in METHODS {
        let family = method.split('.').next().unwrap();
        assert!(
            ["sessions", "approvals", "review", "log"].contains(&family),
            "{method}"
        );
    }
}
