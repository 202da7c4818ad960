//! A per-call sandbox built while the call's decision is still being made durable
//! ([`chock_sandbox::ReadyCall::build`]): every layer is up, but the command starts only once the
//! gate's key is opened — rule 3 holds with the sandbox made early. Layer: the init's wait at the
//! gate (`init.rs`, `wait_at_gate`), after Landlock and seccomp and before the command exists.

mod escape_support;

use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, SocketIndex, StdioMode};
use escape_support::{Backing, Fixture};

fn writes_a_file(fx: &Fixture) -> Plan {
    let mut plan = fx.plan(vec![
        "/bin/sh".into(),
        "-c".into(),
        "echo ran >> ran.txt".into(),
    ]);
    plan.timeout = Some(Duration::from_secs(30));
    plan
}

/// Built and waiting, nothing runs; with the key dropped (the call refused) nothing ever runs, and
/// starting it anyway is an error, not a run.
#[test]
fn a_built_call_runs_nothing_until_its_key_is_opened() {
    let fx = Fixture::new(Backing::Overlay);
    let index = SocketIndex::new();
    let plan = writes_a_file(&fx);
    let ran = fx.landed("ran.txt");

    let mut waiting = chock_sandbox::ready_in_session(&plan, None, &index).unwrap();
    let (gate, key) = chock_sandbox::gate().unwrap();
    waiting.build(StdioMode::Null, gate).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ran.exists(), "the command ran while its key was shut");
    drop(waiting);
    drop(key);

    let mut refused = chock_sandbox::ready_in_session(&plan, None, &index).unwrap();
    let (gate, key) = chock_sandbox::gate().unwrap();
    refused.build(StdioMode::Null, gate).unwrap();
    drop(key);
    assert!(
        refused.start(StdioMode::Null).is_err(),
        "a call whose key was dropped started"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!ran.exists(), "a refused call ran");
}

/// The key may be opened before the sandbox is even built (the session opens it the moment the
/// decision is durable); the call then runs once, confined as any other.
#[test]
fn a_key_opened_before_the_build_lets_the_call_run_once() {
    let fx = Fixture::new(Backing::Overlay);
    let index = SocketIndex::new();
    let plan = writes_a_file(&fx);
    let (gate, key) = chock_sandbox::gate().unwrap();
    key.open();
    let mut ready = chock_sandbox::ready_in_session(&plan, None, &index).unwrap();
    ready.build(StdioMode::Null, gate).unwrap();
    let mut child = ready.start(StdioMode::Null).unwrap();
    assert_eq!(child.wait().unwrap().status, ExitStatus::Exited(0));
    assert_eq!(
        std::fs::read_to_string(fx.landed("ran.txt")).unwrap(),
        "ran\n"
    );
}
