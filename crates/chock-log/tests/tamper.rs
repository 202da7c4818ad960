//! Every kind of tampering with log.jsonl is found and named; a torn tail is not tampering.

mod common;

use chock_log::{EventKind, Log, ProblemKind, SessionHeader, verify};
use common::{lines, log_path, session_with, write_lines};
use serde_json::json;

fn problems(dir: &std::path::Path) -> Vec<(usize, Option<u64>, ProblemKind)> {
    verify(dir)
        .unwrap()
        .problems
        .into_iter()
        .map(|p| (p.line, p.seq, p.kind))
        .collect()
}

#[test]
fn an_untouched_log_verifies() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.lines, 6);
    assert_eq!(report.head.unwrap().seq, 5);
    assert_eq!(report.torn_tail, None);
}

/// A log emptied of every line (or left holding only a fragment) is not an intact empty log:
/// `Log::create` makes `session.start` durable before the session can act.
#[test]
fn an_emptied_log_is_broken() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    for content in [&b""[..], b"{\"seq\":0,\"ts"] {
        std::fs::write(log_path(&dir), content).unwrap();
        let report = verify(&dir).unwrap();
        assert!(!report.is_intact(), "{report:?}");
        assert!(
            matches!(&report.problems[..], [p] if p.line == 1
                && matches!(&p.kind, ProblemKind::BadHeader { reason } if reason.contains("session.start is missing"))),
            "{report:?}"
        );
    }
}

#[test]
fn an_edited_line_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    l[2] = l[2].replace("run_command", "rm_rf_slash");
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(3, Some(2), ProblemKind::Edited { next_line: 4 })]
    );
    assert!(!verify(&dir).unwrap().is_intact());
}

#[test]
fn an_edit_that_breaks_the_json_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    l[3] = "{\"seq\": 3, garbage\n".into();
    write_lines(&dir, &l);
    let found = problems(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 4);
    assert!(matches!(found[0].2, ProblemKind::Unreadable { .. }));
}

#[test]
fn a_deleted_line_is_named_with_its_seq() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    l.remove(3);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(
            4,
            Some(4),
            ProblemKind::Deleted {
                first_seq: 3,
                last_seq: 3
            }
        )]
    );
}

#[test]
fn a_deleted_run_of_lines_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 8);
    let mut l = lines(&dir);
    l.drain(2..5);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(
            3,
            Some(5),
            ProblemKind::Deleted {
                first_seq: 2,
                last_seq: 4
            }
        )]
    );
}

#[test]
fn a_deleted_header_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let mut l = lines(&dir);
    l.remove(0);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(
            1,
            Some(1),
            ProblemKind::Deleted {
                first_seq: 0,
                last_seq: 0
            }
        )]
    );
}

#[test]
fn an_inserted_line_with_a_correct_looking_prev_is_named() {
    // The careful forger: copies the previous line's hash into `prev` and picks the next seq.
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    let prev = chock_log::sha256_hex(l[2].as_bytes());
    let forged = format!(
        "{{\"seq\":3,\"ts\":\"2026-11-30T00:00:00Z\",\"kind\":\"decision\",\"prev\":\"{prev}\",\"data\":{{\"decision\":\"allow\"}}}}\n"
    );
    l.insert(3, forged);
    write_lines(&dir, &l);
    assert_eq!(problems(&dir), vec![(4, Some(3), ProblemKind::Inserted)]);
}

#[test]
fn an_inserted_line_with_a_made_up_prev_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    let forged = format!(
        "{{\"seq\":2,\"ts\":\"2026-11-30T00:00:00Z\",\"kind\":\"note\",\"prev\":\"{}\",\"data\":{{}}}}\n",
        "0".repeat(64)
    );
    l.insert(3, forged);
    write_lines(&dir, &l);
    let found = problems(&dir);
    assert_eq!(
        found,
        vec![(4, Some(2), ProblemKind::Inserted)],
        "{found:?}"
    );
}

#[test]
fn swapped_lines_are_named_as_reordered() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 6);
    let mut l = lines(&dir);
    l.swap(3, 4);
    write_lines(&dir, &l);
    let found = problems(&dir);
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|(line, _, kind)| (4..=6).contains(line)
            && matches!(kind, ProblemKind::Reordered { .. })),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(line, seq, _)| *line == 4 && *seq == Some(4)),
        "{found:?}"
    );
}

#[test]
fn a_changed_seq_is_named() {
    // Renumbering a line changes its hash too, so the next line names it as edited.
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 4);
    let mut l = lines(&dir);
    l[2] = l[2].replacen("\"seq\":2", "\"seq\":7", 1);
    write_lines(&dir, &l);
    let found = problems(&dir);
    assert!(
        found.contains(&(3, Some(7), ProblemKind::BadSeq { expected: 2 })),
        "{found:?}"
    );
}

#[test]
fn a_log_copied_under_another_session_name_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    let other = root.path().join("20200101T000000Z-000000");
    std::fs::rename(&dir, &other).unwrap();
    let found = problems(&other);
    assert_eq!(found.len(), 1);
    assert!(
        matches!(&found[0].2, ProblemKind::BadHeader { reason } if reason.contains("20200101T000000Z-000000"))
    );
}

#[test]
fn a_header_with_a_forged_genesis_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    let mut l = lines(&dir);
    let genesis = chock_log::genesis_hash(dir.file_name().unwrap().to_str().unwrap());
    l[0] = l[0].replace(&genesis, &"f".repeat(64));
    write_lines(&dir, &l);
    let found = problems(&dir);
    // Line 1 has the wrong genesis, and line 2 no longer chains from line 1's bytes.
    assert!(
        matches!(&found[0], (1, Some(0), ProblemKind::BadHeader { .. })),
        "{found:?}"
    );
}

#[test]
fn a_torn_tail_without_newline_is_reported_and_the_rest_verifies() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let before = std::fs::metadata(log_path(&dir)).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(&dir))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":4,\"ts\":\"2026-").unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    let torn = report.torn_tail.unwrap();
    assert_eq!(
        (torn.line, torn.offset, torn.missing_newline),
        (5, before, true)
    );
    assert_eq!(report.head.unwrap().seq, 3);
}

#[test]
fn garbage_ending_in_a_newline_at_the_very_end_is_a_torn_tail() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(&dir))
        .unwrap();
    std::io::Write::write_all(&mut f, b"\0\0\0\0\n").unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.torn_tail.map(|t| (t.line, t.missing_newline)),
        Some((5, false))
    );
}

#[test]
fn a_torn_tail_does_not_hide_an_earlier_edit() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let mut l = lines(&dir);
    l[1] = l[1].replace("call-0", "call-9");
    l.push("{\"seq\":4".into());
    write_lines(&dir, &l);
    let report = verify(&dir).unwrap();
    assert!(report.torn_tail.is_some());
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].line, 2);
}

#[test]
fn reopening_moves_a_torn_tail_aside_and_the_chain_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(&dir))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":3,\"ts\"").unwrap();
    drop(f);
    let log = Log::open(&dir).unwrap();
    assert_eq!(
        log.append(EventKind::SessionEnd, None, json!({"reason": "done"}))
            .unwrap(),
        4
    );
    let report = verify(&dir).unwrap();
    assert!(
        report.is_intact() && report.torn_tail.is_none(),
        "{report:?}"
    );
    assert_eq!(
        std::fs::read(dir.join(chock_log::TORN_FILE)).unwrap(),
        b"{\"seq\":3,\"ts\""
    );
    let events = chock_log::read_events(&dir).unwrap();
    assert_eq!(events[3].kind, EventKind::Note);
    assert_eq!(events[3].data["torn_bytes"], 13);
}

#[test]
fn reopening_a_tampered_log_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let mut l = lines(&dir);
    l.remove(2);
    write_lines(&dir, &l);
    let err = Log::open(&dir).unwrap_err();
    assert!(matches!(err, chock_log::LogError::Broken { .. }), "{err}");
}

#[test]
fn read_events_returns_what_was_appended_and_skips_a_torn_tail() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(
        root.path(),
        SessionHeader {
            project: Some("/src/p".into()),
            ..Default::default()
        },
    )
    .unwrap();
    log.append(
        EventKind::Decision,
        Some("c1"),
        json!({"action": "exec.git", "decision": "allow"}),
    )
    .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(log.dir()))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"se").unwrap();
    let events = chock_log::read_events(log.dir()).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].kind, EventKind::SessionStart);
    assert_eq!(events[0].data["session_id"], log.id().as_str());
    assert_eq!(events[0].data["project"], "/src/p");
    assert_eq!(events[0].prev, chock_log::genesis_hash(log.id().as_str()));
    assert_eq!(events[1].call_id.as_deref(), Some("c1"));
    assert_eq!(events[1].data["decision"], "allow");
    assert!(
        time::OffsetDateTime::parse(
            &events[1].ts,
            &time::format_description::well_known::Rfc3339
        )
        .is_ok()
    );
}

#[test]
fn a_line_moved_to_the_end_is_named_as_reordered() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 6);
    let mut l = lines(&dir);
    let moved = l.remove(2);
    l.push(moved);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![
            (
                3,
                Some(3),
                ProblemKind::Reordered {
                    chains_from_line: 7
                }
            ),
            (
                7,
                Some(2),
                ProblemKind::Reordered {
                    chains_from_line: 2
                }
            ),
        ]
    );
}

#[test]
fn a_duplicated_line_is_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    let copy = l[3].clone();
    l.insert(4, copy);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(5, Some(3), ProblemKind::Duplicate { of_line: 4 })]
    );
}

#[test]
fn an_edited_prev_names_the_line_that_was_edited() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 5);
    let mut l = lines(&dir);
    let at = l[3].find("\"prev\":\"").unwrap() + 8;
    let replacement = if &l[3][at..=at] == "0" { "1" } else { "0" };
    l[3].replace_range(at..=at, replacement);
    write_lines(&dir, &l);
    assert_eq!(
        problems(&dir),
        vec![(4, Some(3), ProblemKind::Edited { next_line: 5 })]
    );
}

#[test]
fn a_reversed_log_points_at_the_moved_header() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 3);
    let mut l = lines(&dir);
    l.reverse();
    write_lines(&dir, &l);
    let found = problems(&dir);
    assert!(
        matches!(&found[0], (1, Some(3), ProblemKind::BadHeader { reason }) if reason.contains("on line 4")),
        "{found:?}"
    );
    assert_eq!(found.len(), 4, "{found:?}");
}
