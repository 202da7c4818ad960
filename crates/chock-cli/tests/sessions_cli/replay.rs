//! `chock sessions replay` against logs written by real sessions (`chock run` with the offline
//! providers, `chock exec`), in the one hermetic test world (run_support).

use crate::run_support::{World, text};

/// Writes a table outside the project and returns its path.
fn table(w: &World, name: &str, toml: &str) -> String {
    let path = w.base.join("tables").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, toml).unwrap();
    path.display().to_string()
}

fn settings(w: &World) -> insta::Settings {
    let mut s = w.settings();
    s.set_snapshot_path("../snapshots");
    s.add_filter(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "[ID]");
    s.add_filter(
        r"net\.connect\.1\.0\.0\.127\.\d+",
        "net.connect.1.0.0.127.[PORT]",
    );
    s
}

struct Replayed {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    summary: serde_json::Value,
    acts: Vec<serde_json::Value>,
}

/// Replays the world's only session under `table`, as text and as JSON.
fn replay(w: &World, table: &str) -> Replayed {
    let id = w.session_id();
    let out = w.chock(&["sessions", "replay", &id, "--policy", table]);
    let json = w.chock(&["sessions", "replay", &id, "--policy", table, "--json"]);
    assert_eq!(
        out.status.code(),
        json.status.code(),
        "{}",
        text(&json.stderr)
    );
    let lines: Vec<serde_json::Value> = text(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, steps) = lines.split_last().expect("a summary line");
    assert_eq!(summary["line"], "summary");
    Replayed {
        status: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
        summary: summary.clone(),
        acts: steps
            .iter()
            .filter(|s| s["line"] == "act")
            .cloned()
            .collect(),
    }
}

fn count(r: &Replayed, field: &str) -> u64 {
    r.summary[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field}: {}", r.summary))
}

/// The demo session in a plain directory: under the table it ran with (none: the shipped
/// defaults) nothing differs; under one that denies `exec.*` and asks about `fs.write`, exactly
/// those acts are marked.
#[test]
fn a_demo_session_replays_the_same_under_its_own_table_and_marks_each_changed_decision() {
    let w = World::new();
    w.write("README.md", "a project\n");
    let out = w.chock(&["run", "--provider", "demo", "add a note"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let same = replay(&w, &table(&w, "same.toml", ""));
    assert_eq!(same.status, Some(0), "{}{}", same.stdout, same.stderr);
    assert_eq!(
        (count(&same, "acts"), count(&same, "differ")),
        (5, 0),
        "{}",
        same.stdout
    );

    let changed = table(
        &w,
        "changed.toml",
        "[[rule]]\naction = \"exec.*\"\ndecision = \"deny\"\n\n[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n",
    );
    let r = replay(&w, &changed);
    assert_eq!(r.status, Some(1), "{}{}", r.stdout, r.stderr);
    assert_eq!(count(&r, "acts"), 5);
    assert_eq!(count(&r, "differ"), 3, "{}", r.stdout);
    assert_eq!(count(&r, "now_refused"), 1);
    assert_eq!(count(&r, "now_asked"), 2);
    assert_eq!(count(&r, "now_allowed"), 0);
    let differing: Vec<&str> = r
        .acts
        .iter()
        .filter(|a| a["judged"] == "differs")
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(differing, ["fs.write", "fs.write", "exec.system.sh"]);
    assert_eq!(r.stdout.matches('≠').count(), 3);
    settings(&w).bind(|| insta::assert_snapshot!(r.stdout));
}

/// A narrowing the agent made is applied where it was made: acts before it are judged by the new
/// table alone, acts after it under the narrowing too.
#[test]
fn a_ratchet_narrowing_is_replayed_in_order() {
    let w = World::with_git_project();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo before > a.txt" }
expect = { is_error = false }

[[turn]]
[[turn.call]]
tool = "restrict_self"
input = { action = "exec.*", decision = "deny" }
expect = { is_error = false, contains = "restricted" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo after > b.txt" }
expect = { is_error = true, contains = "ratchet" }

[[turn]]
text = "done"
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "narrow"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let same = replay(&w, &table(&w, "same.toml", ""));
    assert_eq!(same.status, Some(0), "{}{}", same.stdout, same.stderr);
    assert_eq!(count(&same, "differ"), 0, "{}", same.stdout);
    assert!(
        same.stdout
            .contains("(ratchet: restrict `exec.*` to deny, applied)"),
        "{}",
        same.stdout
    );

    // Asking about every system program: the command before the narrowing would now be asked;
    // the one after it is still denied by the narrowing, as it was.
    let asks = table(
        &w,
        "asks.toml",
        "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n",
    );
    let r = replay(&w, &asks);
    assert_eq!(r.status, Some(1), "{}{}", r.stdout, r.stderr);
    let execs: Vec<(&str, &str)> = r
        .acts
        .iter()
        .filter(|a| a["action"] == "exec.system.sh")
        .map(|a| {
            (
                a["judged"].as_str().unwrap(),
                a["replayed"]["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        execs,
        [("differs", "ask"), ("same", "deny")],
        "{}",
        r.stdout
    );
    assert!(
        r.acts.iter().any(|a| a["judged"] == "no_capability"),
        "{}",
        r.stdout
    );
    assert_eq!((count(&r, "differ"), count(&r, "now_asked")), (1, 1));
    settings(&w).bind(|| insta::assert_snapshot!(r.stdout));
}

/// `chock exec` with a connection through the egress proxy: a `net.decision` gate is an act, and a
/// row added for its host and port marks it.
#[test]
fn a_connection_gate_is_an_act_and_an_added_net_connect_row_marks_it() {
    if !chock_test_support::requires(
        crate::run_support::on_path("curl"),
        "curl is not on PATH (see .ci/run)",
    ) {
        return;
    }
    let port = http_server();
    let w = World::new();
    let allow =
        format!("[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n");
    w.write("chock.toml", &allow);
    let url = format!("http://127.0.0.1:{port}/");
    let out = w.chock(&["exec", "--", "curl", "-sf", "--max-time", "20", &url]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let same = replay(&w, &table(&w, "same.toml", &allow));
    assert_eq!(same.status, Some(0), "{}{}", same.stdout, same.stderr);
    assert_eq!(count(&same, "differ"), 0, "{}", same.stdout);
    let connection = format!("net.connect.1.0.0.127.{port}");
    assert!(
        same.acts.iter().any(|a| a["action"] == connection.as_str()),
        "{}",
        same.stdout
    );

    // The same row, now denying.
    let denied = table(&w, "denied.toml", &allow.replace("\"allow\"", "\"deny\""));
    let r = replay(&w, &denied);
    assert_eq!(r.status, Some(1), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        (count(&r, "differ"), count(&r, "now_refused")),
        (1, 1),
        "{}",
        r.stdout
    );
    settings(&w).bind(|| insta::assert_snapshot!(r.stdout));
}

/// A loopback HTTP server answering every request with a short body; returns its port.
fn http_server() -> u16 {
    chock_test_support::model::page_server(None, "ok")
}

/// A table that does not load, or cannot be read, is bad input (2) naming the file and the line;
/// so is an unknown session.
#[test]
fn a_bad_policy_file_or_an_unknown_session_exits_2_naming_it() {
    let w = World::new();
    let out = w.chock(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = w.session_id();
    let bad = table(
        &w,
        "bad.toml",
        "[[rule]]\naction = \"git.pussh\"\ndecision = \"allow\"\n",
    );
    let missing = w.base.join("tables/missing.toml").display().to_string();
    let org = table(
        &w,
        "org.toml",
        "[[rule]]\naction = \"git.*\"\ndecision = \"alow\"\n",
    );
    let good = table(&w, "good.toml", "");
    for (args, names) in [
        (vec!["--policy", bad.as_str()], format!("{bad}:2:10: ")),
        (
            vec!["--policy", missing.as_str()],
            format!("{missing}: cannot read"),
        ),
        (
            vec!["--policy", good.as_str(), "--org", org.as_str()],
            format!("{org}:3:12: "),
        ),
    ] {
        let mut full = vec!["sessions", "replay", id.as_str()];
        full.extend(args);
        let out = w.chock(&full);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{full:?}: {}",
            text(&out.stdout)
        );
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with(&format!("chock: {names}")),
            "{full:?}: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "nothing is replayed: {}",
            text(&out.stdout)
        );
    }
    let out = w.chock(&["sessions", "replay", "nope", "--policy", &good]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown session"),
        "{}",
        text(&out.stderr)
    );
}
