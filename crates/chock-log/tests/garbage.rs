//! verify and read_events never panic, whatever the bytes: seeded random damage to real logs.

mod common;

use common::{log_path, session_with};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn random_damage_is_reported_never_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_with(root.path(), 6);
    let original = std::fs::read(log_path(&dir)).unwrap();
    let mut rng = StdRng::seed_from_u64(0x00c0_ffee);
    for round in 0..300 {
        let mut bytes = original.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..bytes.len());
            match rng.gen_range(0..4) {
                0 => bytes[at] = rng.r#gen(),
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, b"\n{}\"0123456789:,[]"[rng.gen_range(0..17)]),
                _ => bytes.truncate(at),
            }
        }
        std::fs::write(log_path(&dir), &bytes).unwrap();
        let report = chock_log::verify(&dir).unwrap();
        let _ = chock_log::read_events(&dir);
        if bytes != original && original.starts_with(&bytes) {
            if bytes.contains(&b'\n') {
                // Cut short: only the tail is affected, which the chain cannot see without a seal.
                assert!(report.problems.is_empty(), "round {round}: {report:?}");
            } else {
                // Cut inside line 1: no session.start is left, and verify says so.
                assert_eq!(report.problems.len(), 1, "round {round}: {report:?}");
            }
        }
    }
    // Extreme numbers where arithmetic could overflow.
    let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let genesis = chock_log::genesis_hash(&id);
    let text = format!(
        "{{\"seq\":0,\"ts\":\"t\",\"kind\":\"session.start\",\"prev\":\"{genesis}\",\"data\":{{\"session_id\":\"{id}\"}}}}\n{{\"seq\":18446744073709551615,\"ts\":\"t\",\"kind\":\"note\",\"prev\":\"x\",\"data\":{{}}}}\n{{\"seq\":18446744073709551615,\"ts\":\"t\",\"kind\":\"note\",\"prev\":\"y\",\"data\":{{}}}}\n"
    );
    std::fs::write(log_path(&dir), text).unwrap();
    assert!(!chock_log::verify(&dir).unwrap().is_intact());
}
