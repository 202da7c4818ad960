//! `chock acp` driven by an editor built on the official ACP Python SDK (`agent-client-protocol`
//! from PyPI, the SDK editors' plugins use), over a real pipe: every message Chock sends is parsed
//! by the SDK's own schema models, so a field spelled differently from the published schema fails
//! here. The session asks about its write, the SDK's client answers, the turn's work is offered as
//! an apply and lands; the editor's file and terminal methods are offered and never used.
//!
//! `.ci/run` installs the SDK into `/opt/chock-acp/venv` (world-readable, so the unprivileged run
//! uses it too); `CHOCK_ACP_PYTHON` names another interpreter. Missing, the test fails in CI
//! (`CI=true`) and skips, saying why, elsewhere.

mod run_support;

use std::path::PathBuf;

use run_support::*;
use serde_json::Value;

const DEFAULT_PYTHON: &str = "/opt/chock-acp/venv/bin/python3";

/// `fs.write` asks, so the recorded model's write is a question for the editor.
const ASK_WRITES: &str = "[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n";

/// A model that plans, runs a command, writes a note and says it is done.
const SCRIPT: &str = r#"
[[turn]]
text = "Looking first."
[[turn.call]]
tool = "update_plan"
input = { steps = [{ step = "look", status = "in_progress" }, { step = "note it" }] }
[[turn.call]]
tool = "run_command"
input = { command = "sh test.sh || true" }
[[turn.call]]
tool = "write_file"
input = { path = "BUG.md", content = "calc.sh subtracts\n" }

[[turn]]
text = "BUG.md says what is wrong."
"#;

/// The interpreter that has the SDK, or `None` outside CI (`requires` fails the test in CI).
fn sdk_python() -> Option<PathBuf> {
    let python = PathBuf::from(
        std::env::var("CHOCK_ACP_PYTHON").unwrap_or_else(|_| DEFAULT_PYTHON.to_string()),
    );
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", "import acp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_sdk {
        return Some(python);
    }
    chock_test_support::requires(
        false,
        format_args!(
            "{} cannot import the ACP SDK (`pip install agent-client-protocol`, as .ci/run does)",
            python.display()
        ),
    );
    None
}

#[test]
#[cfg_attr(
    not(feature = "acp-sdk"),
    ignore = "needs the ACP Python SDK: the `acp-sdk` feature (.ci/run tests with --all-features)"
)]
fn the_official_acp_sdk_drives_a_session_parses_every_message_and_applies_the_work() {
    let Some(python) = sdk_python() else { return };
    let w = World::with_git_project_and_policy(Some(ASK_WRITES));
    let provider = w.script(SCRIPT);
    let editor = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/acp_sdk_editor.py"
    );
    let out = w
        .program(&python)
        .arg(editor)
        .arg(CHOCK)
        .arg(&w.project)
        .arg(&provider)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK's editor failed:\n{stderr}");
    let seen: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("no summary from the SDK's editor ({e}):\n{stderr}"));
    assert_eq!(seen["protocol_version"], 1, "{seen}");
    assert_eq!(seen["load_session"], true, "{seen}");
    assert_eq!(seen["stop_reason"], "end_turn", "{seen}");
    for kind in [
        "agent_message_chunk",
        "plan",
        "tool_call",
        "tool_call_update",
    ] {
        assert!(
            seen["updates"]
                .as_array()
                .unwrap()
                .iter()
                .any(|u| u == kind),
            "no {kind} update: {seen}"
        );
    }
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "the write, then the apply: {seen}");
    assert!(
        asked[1]["call"].as_str().unwrap().starts_with("apply-"),
        "{seen}"
    );
    for question in asked {
        let kinds = question["kinds"].as_array().unwrap();
        assert!(
            kinds.iter().any(|k| k == "allow_once") && kinds.iter().any(|k| k == "reject_once"),
            "{question}"
        );
    }
    assert_eq!(
        seen["acted"],
        serde_json::json!([]),
        "Chock used the editor to act"
    );
    assert_eq!(w.read("BUG.md"), "calc.sh subtracts\n");
    w.assert_log_verifies();
}
