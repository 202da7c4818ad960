//! The rule of the session runtime: front ends depend on the runtime, the client and the
//! protocol — not on the crates that run a session (its log, its sandbox, its workspace, the
//! session itself). This test reads the workspace's graph (`cargo metadata`) and fails when a
//! front end gains a direct dependency on one of them that is not listed below as a known
//! exception, when a listed exception is no longer needed (delete its line), and when anything
//! that runs a session creeps into the client's own dependencies, however indirectly.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// The crates a front end must not depend on directly.
const FORBIDDEN: &[&str] = &[
    "chock-session",
    "chock-sandbox",
    "chock-workspace",
    "chock-log",
];

/// The front ends the rule holds for. chock-cli is the binary that also runs `chock serve`,
/// `chock exec` and `chock doctor`, so its exceptions will stay longest.
const FRONT_ENDS: &[&str] = &[
    "chock-client",
    "chock-tui",
    "chock-acp",
    "chock-daemon",
    "chock-cli",
];

/// Today's exceptions, one a line: (front end, forbidden crate, what still needs it). Moving
/// that use behind the runtime or the client removes the line; a new forbidden dependency needs
/// a line here, in review. chock-client has none and may have none.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    // chock-tui: none (it reaches sessions through chock-runtime and chock-client only)
    // chock-acp
    (
        "chock-acp",
        "chock-log",
        "session/load finds and reads a session's log (find_session, read_events); apply logs",
    ),
    (
        "chock-acp",
        "chock-workspace",
        "the end-of-turn apply shows each file's whole text (the handle's diff has hunks only)",
    ),
    // chock-daemon
    (
        "chock-daemon",
        "chock-log",
        "listing and finding sessions, and a session another process runs (read from its file)",
    ),
    (
        "chock-daemon",
        "chock-workspace",
        "review.undo finds the apply's session and plans it (session_dir_of_apply, plan_undo)",
    ),
    // chock-cli
    (
        "chock-cli",
        "chock-log",
        "sessions list/show/verify/replay, seal keys, apply and workspace commands",
    ),
    (
        "chock-cli",
        "chock-session",
        "chock exec runs one confined command as a session; sessions fork",
    ),
    (
        "chock-cli",
        "chock-sandbox",
        "chock doctor probes the sandbox's layers; chock exec describes its mounts",
    ),
    (
        "chock-cli",
        "chock-workspace",
        "chock diff/apply/workspace render, list and remove workspaces",
    ),
];

/// The only workspace crates a client may reach, however indirectly.
const CLIENT_MAY_REACH: &[&str] = &["chock-client", "chock-protocol", "chock-dirs"];

fn metadata() -> Value {
    // The cargo running the tests, else the one that built them (a test binary run by hand).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .unwrap_or_else(|e| {
            panic!("running {cargo} metadata (the check reads the build graph): {e}")
        });
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

/// A dependency that is part of the crate (normal or build), not only of its tests.
fn not_dev(kind: &Value) -> bool {
    kind.as_str() != Some("dev")
}

/// Each workspace crate's direct non-dev dependencies.
fn direct(meta: &Value) -> HashMap<String, BTreeSet<String>> {
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| not_dev(&d["kind"]))
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The forbidden direct dependencies of the front ends that no exception lists, and the
/// exceptions that no dependency needs any more.
fn violations(direct: &HashMap<String, BTreeSet<String>>) -> (Vec<String>, Vec<String>) {
    let mut broken = Vec::new();
    for front in FRONT_ENDS {
        let deps = direct
            .get(*front)
            .unwrap_or_else(|| panic!("{front} is not in the workspace: update FRONT_ENDS"));
        for dep in deps.iter().filter(|d| FORBIDDEN.contains(&d.as_str())) {
            if !EXCEPTIONS.iter().any(|(f, d, _)| f == front && d == dep) {
                broken.push(format!(
                    "{front} depends on {dep}: a front end reaches a session through chock-runtime \
                     or chock-client (or, until it can, list it in EXCEPTIONS with what needs it)"
                ));
            }
        }
    }
    let stale = EXCEPTIONS
        .iter()
        .filter(|(front, dep, _)| !direct.get(*front).is_some_and(|d| d.contains(*dep)))
        .map(|(front, dep, _)| format!("{front} no longer depends on {dep}: delete its exception"))
        .collect();
    (broken, stale)
}

#[test]
fn front_ends_reach_sessions_only_through_the_runtime_and_the_client() {
    let (broken, stale) = violations(&direct(&metadata()));
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

#[test]
fn the_rule_fails_on_a_new_forbidden_dependency() {
    let mut graph = direct(&metadata());
    let (before, _) = violations(&graph);
    graph
        .get_mut("chock-client")
        .unwrap()
        .insert("chock-session".into());
    graph
        .get_mut("chock-tui")
        .unwrap()
        .insert("chock-sandbox".into());
    let (after, _) = violations(&graph);
    let broken: Vec<&String> = after.iter().filter(|v| !before.contains(v)).collect();
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].starts_with("chock-client depends on chock-session"));
    assert!(broken[1].starts_with("chock-tui depends on chock-sandbox"));
}

#[test]
fn the_client_has_no_exception_and_reaches_nothing_that_runs_a_session() {
    assert!(
        !EXCEPTIONS
            .iter()
            .any(|(front, _, _)| *front == "chock-client")
    );
    let meta = metadata();
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let local: BTreeSet<&str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let client = names
        .iter()
        .find(|(_, name)| **name == "chock-client")
        .map(|(id, _)| *id)
        .unwrap();
    let mut reached = BTreeSet::new();
    let mut todo = vec![client];
    while let Some(id) = todo.pop() {
        if !reached.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            if dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| not_dev(&k["kind"]))
            {
                todo.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    let workspace_reached: Vec<&str> = reached
        .iter()
        .map(|id| names[id])
        .filter(|name| local.contains(name) && !CLIENT_MAY_REACH.contains(name))
        .collect();
    assert!(
        workspace_reached.is_empty(),
        "chock-client reaches {workspace_reached:?}: a client needs the protocol and where the \
         socket is, nothing that runs a session"
    );
}
