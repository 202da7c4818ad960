//! Sealing signs the head; verify checks the signature, the sealed line, and (given one) the key.

mod common;

use std::os::unix::fs::PermissionsExt;

use chock_log::{
    EventKind, KeyCheck, Log, LogError, SealCheck, VerifyOptions, public_key_path, read_public_key,
    seal, verify, verify_with,
};
use common::{lines, session_with, write_lines};
use serde_json::json;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn first_seal_creates_a_private_key_and_a_public_key_beside_it() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let key = data.path().join("chock").join("seal.key");
    let dir = session_with(root.path(), 3);
    let s = seal(&dir, &key).unwrap();
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(key.parent().unwrap()), 0o700);
    let public = read_public_key(&public_key_path(&key)).unwrap();
    assert_eq!(hex::encode(public.as_bytes()), s.public_key);
    assert_eq!(s.head_seq, 3);
    assert!(
        std::fs::read_to_string(public_key_path(&key))
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----")
    );
    // The same key is used next time.
    let again = seal(&dir, &key).unwrap();
    assert_eq!(again.public_key, s.public_key);
}

#[test]
fn verify_checks_the_seal_with_and_without_a_trusted_key() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let key = data.path().join("seal.key");
    let dir = session_with(root.path(), 3);
    let s = seal(&dir, &key).unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact());
    assert_eq!(
        report.seal,
        SealCheck::Sealed {
            seq: 3,
            events_after: 0,
            public_key: s.public_key.clone(),
            key: KeyCheck::NotChecked
        }
    );
    let trusted = read_public_key(&public_key_path(&key)).unwrap();
    let report = verify_with(
        &dir,
        &VerifyOptions {
            trusted_key: Some(trusted),
        },
    )
    .unwrap();
    assert!(
        matches!(
            report.seal,
            SealCheck::Sealed {
                key: KeyCheck::Trusted,
                ..
            }
        ),
        "{report:?}"
    );
}

#[test]
fn a_public_key_as_hex_works_too() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let key = data.path().join("seal.key");
    let dir = session_with(root.path(), 1);
    let s = seal(&dir, &key).unwrap();
    let hex_file = data.path().join("key.hex");
    std::fs::write(&hex_file, format!("{}\n", s.public_key)).unwrap();
    let trusted = read_public_key(&hex_file).unwrap();
    assert!(
        verify_with(
            &dir,
            &VerifyOptions {
                trusted_key: Some(trusted)
            }
        )
        .unwrap()
        .is_intact()
    );
}

#[test]
fn a_seal_by_another_key_fails_against_the_trusted_key() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    seal(&dir, &data.path().join("attacker.key")).unwrap();
    chock_log::load_or_create_key(&data.path().join("mine.key")).unwrap();
    let mine = read_public_key(&data.path().join("mine.pub")).unwrap();
    let report = verify_with(
        &dir,
        &VerifyOptions {
            trusted_key: Some(mine),
        },
    )
    .unwrap();
    assert!(!report.is_intact());
    assert!(
        matches!(&report.seal, SealCheck::Broken { reason } if reason.contains("not by the trusted key"))
    );
}

#[test]
fn a_log_that_grew_after_the_seal_says_how_many_events_came_after() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 2);
    seal(&dir, &data.path().join("seal.key")).unwrap();
    let log = Log::open(&dir).unwrap();
    log.append(EventKind::Note, None, json!({"text": "after"}))
        .unwrap();
    log.append(EventKind::SessionEnd, None, json!({"reason": "done"}))
        .unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact());
    assert!(
        matches!(
            report.seal,
            SealCheck::Sealed {
                seq: 2,
                events_after: 2,
                ..
            }
        ),
        "{report:?}"
    );
}

#[test]
fn removing_sealed_lines_from_the_end_is_caught_by_the_seal() {
    // The chain alone cannot see a deleted last line; the seal can.
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 4);
    seal(&dir, &data.path().join("seal.key")).unwrap();
    let mut l = lines(&dir);
    l.pop();
    write_lines(&dir, &l);
    let report = verify(&dir).unwrap();
    assert!(report.problems.is_empty());
    assert!(!report.is_intact());
    assert!(
        matches!(&report.seal, SealCheck::Broken { reason } if reason.contains("removed from the end")),
        "{report:?}"
    );
}

#[test]
fn editing_the_sealed_last_line_is_caught_by_the_seal() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 4);
    seal(&dir, &data.path().join("seal.key")).unwrap();
    let mut l = lines(&dir);
    let last = l.len() - 1;
    l[last] = l[last].replace("run_command", "curl_evil");
    write_lines(&dir, &l);
    let report = verify(&dir).unwrap();
    assert!(
        matches!(&report.seal, SealCheck::Broken { reason } if reason.contains("hash changed")),
        "{report:?}"
    );
}

#[test]
fn an_edited_seal_file_fails_its_signature() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 4);
    seal(&dir, &data.path().join("seal.key")).unwrap();
    let path = dir.join("seal.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"head_seq\": 4", "\"head_seq\": 2");
    std::fs::write(&path, text).unwrap();
    let report = verify(&dir).unwrap();
    assert!(
        matches!(&report.seal, SealCheck::Broken { reason } if reason.contains("signature")),
        "{report:?}"
    );
}

#[test]
fn a_broken_log_is_not_sealed() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 4);
    let mut l = lines(&dir);
    l.remove(2);
    write_lines(&dir, &l);
    let err = seal(&dir, &data.path().join("seal.key")).unwrap_err();
    assert!(matches!(err, LogError::CannotSeal { .. }), "{err}");
    assert!(!dir.join("seal.json").exists());
}

#[test]
fn a_seal_key_others_can_read_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let key = data.path().join("seal.key");
    chock_log::load_or_create_key(&key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dir = session_with(root.path(), 1);
    let err = seal(&dir, &key).unwrap_err();
    assert!(err.to_string().contains("chmod 600"), "{err}");
}

/// `seal.pub` is what others trust: one replaced by another key's half is put right the next
/// time the seal key is loaded, so `verify --pubkey seal.pub` never trusts a stranger's key.
#[test]
fn a_replaced_seal_pub_is_written_again_from_the_key() {
    let data = tempfile::tempdir().unwrap();
    let key_path = data.path().join("seal.key");
    let key = chock_log::load_or_create_key(&key_path).unwrap();
    let pub_path = chock_log::public_key_path(&key_path);
    let stranger = data.path().join("other").join("seal.key");
    chock_log::load_or_create_key(&stranger).unwrap();
    std::fs::copy(chock_log::public_key_path(&stranger), &pub_path).unwrap();
    assert_ne!(
        chock_log::read_public_key(&pub_path).unwrap(),
        key.verifying_key()
    );
    chock_log::load_or_create_key(&key_path).unwrap();
    assert_eq!(
        chock_log::read_public_key(&pub_path).unwrap(),
        key.verifying_key()
    );
}
