//! Real trees of `chock` processes: every agent — the top one and each child `spawn_agent` starts
//! — asks one loopback server speaking the Anthropic wire format, which plays each agent's own
//! script (chosen by the `[agent:NAME]` tag of the task in the request's first message, the step
//! by how many replies the request already carries).

mod handover_support;
mod run_support;

use std::io::{BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_test_support::events::read_log_live as events_of;
use chock_test_support::model::{Request, serve_each, write_reply};
use handover_support::{Daemon, connect, rt};
use run_support::*;
use serde_json::{Value, json};

/// What the server does for one request.
enum Step {
    /// Answer with this reply.
    Answer(Reply),
    /// Kill the asking agent's process with SIGKILL and drop the connection.
    KillAsker,
    /// Never answer (the connection stays open until the asker goes away).
    Hang,
    /// Kill the asking agent's parent with SIGKILL, then answer.
    KillParentThen(Box<Step>),
}

type Script = dyn Fn(&str, usize, &Value) -> Step + Send + Sync;

/// The requests the server saw: (agent tag, step).
type Seen = Arc<Mutex<Vec<(String, usize)>>>;

/// A loopback Anthropic server that serves any number of agents at once, each by its script.
fn tree_server(sessions_root: PathBuf, script: Arc<Script>) -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let seen_in = Arc::clone(&seen);
    let port = serve_each(move |stream, reader, request| {
        serve_one(stream, reader, &request, &sessions_root, &*script, &seen_in)
    });
    (port, seen)
}

/// The tree's provider key, as the daemon and the top agent are given it.
const TREE_KEY: (&str, &str) = ("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789");

/// The tree's loopback model server playing `script`, the world's provider pointed at it, and a
/// daemon with the tree's key: what the handover tests of a tree start from.
fn tree_and_daemon(w: &World, script: Arc<Script>) -> (Seen, Daemon) {
    let (port, seen) = tree_server(w.sessions_root(), script);
    fake_provider(w, port, TREE_KEY.0);
    (seen, Daemon::start_with_env(w, &[TREE_KEY]))
}

/// Holds the asking agent (its model's answer) until the test writes `flag`, two minutes at most.
fn hold_until(flag: &Path) {
    let until = Instant::now() + Duration::from_secs(120);
    while !flag.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to a minute) until each agent of `tags` has asked its model (`what` says what never
/// happened, should it not).
fn wait_until_asked(seen: &Seen, tags: &[&str], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tags
        .iter()
        .all(|t| seen.lock().unwrap().iter().any(|(s, _)| s == t))
    {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to a minute) until no process runs the session in `dir` (`what` says what never
/// happened, should one still run it).
fn wait_until_ended(dir: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while matches!(
        chock_log::is_live(dir),
        Ok(chock_log::Liveness::Live { .. })
    ) {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn serve_one(
    stream: TcpStream,
    mut reader: BufReader<TcpStream>,
    request: &Request,
    root: &Path,
    script: &Script,
    seen: &Seen,
) {
    let body = request.json();
    let messages = body["messages"].as_array().unwrap();
    let first = messages[0]["content"].to_string();
    let tag = first
        .split("[agent:")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or("?")
        .to_string();
    let step = messages.iter().filter(|m| m["role"] == "assistant").count();
    seen.lock().unwrap().push((tag.clone(), step));
    let mut step = script(&tag, step, &body);
    if let Step::KillParentThen(then) = step {
        let pid = live_parent_pid_of(root, &tag).expect("the asker's parent is live");
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        step = *then;
    }
    match step {
        Step::KillParentThen(_) => unreachable!("handled above"),
        Step::Answer(reply @ Reply::Events(_)) => {
            // The asker may be gone by now (a sibling's kill): what it did is asserted elsewhere.
            let _ = write_reply(stream, reply);
        }
        Step::Answer(_) => unreachable!("the tree scripts answer"),
        Step::KillAsker => {
            let pid = live_pid_of(root, &tag).expect("the asking agent's session is live");
            let status = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        }
        Step::Hang => {
            // Hold the connection until the asker closes it.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        }
    }
}

/// The pid of the live parent of the session whose task carries `[agent:TAG]`.
fn live_parent_pid_of(root: &Path, tag: &str) -> Option<u32> {
    let needle = format!("[agent:{tag}]");
    let child = sessions_under(root).into_iter().find(|dir| {
        events_of(dir).iter().any(|(k, _, d)| {
            k == "note"
                && d["about"] == "task"
                && d["task"].as_str().is_some_and(|t| t.contains(&needle))
        })
    })?;
    let parent = events_of(&child)[0].2["parent"].as_str()?.to_string();
    match chock_log::is_live(&root.join(parent)) {
        Ok(chock_log::Liveness::Live { pid }) => Some(pid),
        _ => None,
    }
}

/// The pid of the live session whose task carries `[agent:TAG]`.
fn live_pid_of(root: &Path, tag: &str) -> Option<u32> {
    let needle = format!("[agent:{tag}]");
    for dir in sessions_under(root) {
        let asks = events_of(&dir).iter().any(|(k, _, d)| {
            k == "note"
                && d["about"] == "task"
                && d["task"].as_str().is_some_and(|t| t.contains(&needle))
        });
        if !asks {
            continue;
        }
        if let Ok(chock_log::Liveness::Live { pid }) = chock_log::is_live(&dir) {
            return Some(pid);
        }
    }
    None
}

fn call(id: &str, tokens: u64, tool: &str, input: &Value) -> Step {
    Step::Answer(reply(id, tokens, "", Some((id, tool, &input.to_string()))))
}

fn answer(id: &str, tokens: u64, text: &str) -> Step {
    Step::Answer(reply(id, tokens, text, None))
}

/// `step` as a reply of a model the price table does not know.
fn unpriced(step: Step) -> Step {
    match step {
        Step::Answer(Reply::Events(events)) => Step::Answer(Reply::Events(
            events
                .into_iter()
                .map(|e| e.replace("claude-sonnet-4-5", "claude-unpriced-1"))
                .collect(),
        )),
        other => other,
    }
}

/// The child id the last tool result of the request names (`child ID ended …`).
fn last_child(body: &Value) -> String {
    let text = body["messages"].to_string();
    let at = text.rfind("child 2026").expect("a child was reported");
    text[at + 6..at + 6 + 23].to_string()
}

/// The hash of the line of `dir`'s log whose kind is `kind` and data has `field` = `value`: the
/// `prev` of the line after it (the log verifies, so that is the line's SHA-256).
fn hash_of_line(dir: &Path, kind: &str, field: &str, value: &str) -> String {
    let text = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = lines
        .iter()
        .position(|v| v["kind"] == kind && v["data"][field] == value)
        .unwrap();
    lines[at + 1]["prev"].as_str().unwrap().to_string()
}

/// The session whose task carries `[agent:TAG]`.
fn session_of(w: &World, tag: &str) -> PathBuf {
    let needle = format!("[agent:{tag}]");
    w.sessions()
        .into_iter()
        .find(|dir| {
            events_of(dir).iter().any(|(k, _, d)| {
                k == "note" && d["about"] == "task" && d["task"].as_str().unwrap().contains(&needle)
            })
        })
        .unwrap_or_else(|| panic!("no session for {tag}"))
}

fn tokens_spent(events: &[(String, Option<String>, Value)]) -> u64 {
    events
        .iter()
        .map(|(k, _, d)| match k.as_str() {
            "model.response" => {
                let u = &d["usage"];
                u["input_tokens"].as_u64().unwrap()
                    + u["output_tokens"].as_u64().unwrap()
                    + u["cache_read_tokens"].as_u64().unwrap_or(0)
                    + u["cache_write_tokens"].as_u64().unwrap_or(0)
            }
            "agent.complete" => d["spent"]["tokens"].as_u64().unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// The scripts of the tree: T spawns A1 (which narrows its ratchet, spawns A11 and takes its
/// work, then spawns the leaf A12 with a slice too small for its second call) and takes A1's work,
/// then spawns A2, which reads what came up the tree and is killed -9 at its next request. Resumed,
/// T spawns A3.
fn tree_script(tag: &str, step: usize, body: &Value) -> Step {
    match (tag, step) {
        ("T", 0) => call(
            "t0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:A1] make a11.txt with your children"}),
        ),
        ("T", 1) => call(
            "t1",
            1100,
            "take_subagent",
            &json!({"child": last_child(body)}),
        ),
        ("T", 2) => call(
            "t2",
            1200,
            "spawn_agent",
            &json!({"task": "[agent:A2] read a11.txt"}),
        ),
        ("T", 3) => answer("t3", 1300, "T is done."),
        ("T", 4) => call(
            "t4",
            1400,
            "spawn_agent",
            &json!({"task": "[agent:A3] say hello"}),
        ),
        ("T", 5) => answer("t5", 1500, "T is done again."),
        ("A1", 0) => call(
            "a1-0",
            1000,
            "restrict_self",
            &json!({"action": "exec.*", "decision": "deny"}),
        ),
        ("A1", 1) => call(
            "a1-1",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:A11] write a11.txt"}),
        ),
        ("A1", 2) => call(
            "a1-2",
            1000,
            "take_subagent",
            &json!({"child": last_child(body)}),
        ),
        ("A1", 3) => call(
            "a1-3",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:A12] spend", "budget_tokens": 20000}),
        ),
        ("A1", 4) => answer("a1-4", 1000, "A1 is done: a11.txt is here."),
        // The table allows a widening, but not of what A11 inherited.
        ("A11", 0) => call(
            "a11-w",
            1000,
            "restrict_self",
            &json!({"action": "exec.*", "decision": "allow"}),
        ),
        ("A11", 1) => call("a11-0", 1000, "run_command", &json!({"command": "echo hi"})),
        ("A11", 2) => call(
            "a11-1",
            1000,
            "write_file",
            &json!({"path": "a11.txt", "content": "from a11\n"}),
        ),
        ("A11", 3) => answer("a11-2", 1000, "wrote a11.txt"),
        ("A12", 0) => call(
            "a12-0",
            15000,
            "write_file",
            &json!({"path": "a12.txt", "content": "x\n"}),
        ),
        ("A12", _) => answer("a12-x", 1200, "this call should never have been made"),
        ("A2", 0) => call(
            "a2-0",
            1000,
            "run_command",
            &json!({"command": "cat a11.txt"}),
        ),
        ("A2", 1) => Step::KillAsker,
        ("A3", 0) => answer("a3-0", 1000, "hello"),
        _ => panic!("no script for {tag} at step {step}"),
    }
}

#[test]
fn a_tree_three_deep_and_two_wide_with_a_leaf_out_of_budget_a_killed_child_and_a_resume() {
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"ratchet.widen_action\"\ndecision = \"allow\"\n",
    ));
    let (port, seen) = tree_server(w.sessions_root(), Arc::new(tree_script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let key = [("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")];
    let out = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--budget",
            "100000tokens",
            "[agent:T] build it with helpers",
        ],
        &key,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));

    let top = session_of(&w, "T");
    let a1 = session_of(&w, "A1");
    let a11 = session_of(&w, "A11");
    let a12 = session_of(&w, "A12");
    let a2 = session_of(&w, "A2");
    let id = |dir: &Path| dir.file_name().unwrap().to_string_lossy().into_owned();

    // Every spawn is followed by the end of the same child, in both trees' parents.
    for (parent, children) in [(&top, vec![&a1, &a2]), (&a1, vec![&a11, &a12])] {
        let events = events_of(parent);
        for child in children {
            let spawn = events
                .iter()
                .position(|(k, _, d)| k == "session.spawn" && d["child"] == id(child))
                .unwrap_or_else(|| panic!("{} spawned {}", id(parent), id(child)));
            let complete = events
                .iter()
                .position(|(k, _, d)| k == "agent.complete" && d["child"] == id(child))
                .unwrap_or_else(|| panic!("{} recorded the end of {}", id(parent), id(child)));
            assert!(spawn < complete);
            // The child's log names the parent by id and by the hash of the spawn line…
            let child_events = events_of(child);
            assert_eq!(child_events[0].2["parent"], id(parent));
            let spawned = child_events
                .iter()
                .find(|(k, _, d)| k == "note" && d["about"] == "spawned")
                .expect("the child notes its parent");
            assert_eq!(
                spawned.2["parent_head"],
                hash_of_line(parent, "session.spawn", "child", &id(child))
            );
            // …and the parent's record of its end names the child's head.
            if child != &a2 {
                let head = chock_log::verify(child).unwrap().head.unwrap().hash;
                assert_eq!(events[complete].2["child_head"], head.as_str());
            }
            assert!(chock_log::verify(child).unwrap().problems.is_empty());
        }
    }
    let ended = |parent: &Path, child: &Path| -> Value {
        events_of(parent)
            .into_iter()
            .find(|(k, _, d)| k == "agent.complete" && d["child"] == id(child))
            .unwrap()
            .2
    };
    assert_eq!(ended(&top, &a1)["ended"], "done");
    assert_eq!(ended(&a1, &a11)["ended"], "done");
    assert_eq!(ended(&a1, &a12)["ended"], "out_of_budget");
    assert_eq!(ended(&top, &a2)["ended"], "crashed");

    // The leaf's budget ran out: it never made its second call, and spent no more than its slice.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().filter(|(t, _)| t == "A12").count(),
        1,
        "{seen:?}"
    );
    let a12_events = events_of(&a12);
    assert!(
        a12_events
            .iter()
            .any(|(k, _, d)| k == "note" && d["about"] == "budget_exhausted")
    );
    let slice = events_of(&a1)
        .into_iter()
        .find(|(k, _, d)| k == "session.spawn" && d["child"] == id(&a12))
        .unwrap()
        .2["budget"]["tokens"]
        .as_u64()
        .unwrap();
    assert_eq!(slice, 20000);
    assert!(tokens_spent(&a12_events) <= slice);

    // The ratchet A1 narrowed reached its child: A11's command was refused by it, and T's was
    // never narrowed (A2, its child, ran its command).
    let a11_events = events_of(&a11);
    let refused = a11_events
        .iter()
        .find(|(k, c, _)| k == "decision" && c.as_deref() == Some("a11-0"))
        .unwrap();
    assert_eq!(refused.2["allowed"], false, "{refused:?}");
    assert!(
        refused.2["decided_by"]
            .as_str()
            .unwrap()
            .contains("ratchet"),
        "{refused:?}"
    );
    let widen = a11_events
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("a11-w"))
        .unwrap();
    assert_eq!(widen.2["is_error"], true, "{widen:?}");
    assert!(
        widen.2["output"].as_str().unwrap().contains("inherited"),
        "{widen:?}"
    );
    // A2 worked on T's workspace as it stood: a11.txt had come up from A11 through A1.
    let a2_read = events_of(&a2)
        .into_iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("a2-0"))
        .unwrap();
    assert!(
        a2_read.2["output"].as_str().unwrap().contains("from a11"),
        "{a2_read:?}"
    );
    // T's own workspace holds it too (taken through the pipeline: a decision for subagent.take).
    let top_events = events_of(&top);
    assert!(top_events.iter().any(|(k, c, d)| k == "decision"
        && c.as_deref() == Some("t1")
        && d["action"] == "subagent.take"
        && d["allowed"] == true));
    let diff = w.chock(&["diff", &id(&top)]);
    assert!(
        text(&diff.stdout).contains("a11.txt"),
        "{}",
        text(&diff.stdout)
    );
    assert!(!text(&diff.stdout).contains("a12.txt"));
    // Each child's cost is in T's summary.
    for child in [&a1, &a2] {
        assert!(
            stdout.contains(&format!("child       {}", id(child))),
            "{stdout}"
        );
    }

    // Resumed, T hands out a slice of what is left after everything it spent and its children
    // spent — not of the whole budget again.
    let out = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--resume",
            &id(&top),
            "[agent:T] once more",
        ],
        &key,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let top_events = events_of(&top);
    let a3 = session_of(&w, "A3");
    let spawn_at = top_events
        .iter()
        .position(|(k, _, d)| k == "session.spawn" && d["child"] == id(&a3))
        .unwrap();
    let before = tokens_spent(&top_events[..spawn_at]);
    let a3_slice = top_events[spawn_at].2["budget"]["tokens"].as_u64().unwrap();
    assert_eq!(a3_slice, (100_000 - before) / 2);
    assert!(before > 8000, "the children's spend counts: {before}");
    assert!(
        top_events[spawn_at..]
            .iter()
            .any(|(k, _, d)| k == "agent.complete"
                && d["child"] == id(&a3)
                && d["ended"] == "done")
    );
    for dir in w.sessions() {
        assert!(
            chock_log::verify(&dir).unwrap().problems.is_empty(),
            "{}",
            dir.display()
        );
        // Every line of every log is exactly its kind's type.
        for (kind, _, data) in events_of(&dir) {
            typed(&kind, &data);
        }
    }
}

fn hang_script(tag: &str, step: usize, _body: &Value) -> Step {
    match (tag, step) {
        ("P", 0) => call(
            "p0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:C] wait for the model"}),
        ),
        ("C", 0) => call(
            "c0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:G] wait for the model"}),
        ),
        ("G", 0) => Step::Hang,
        _ => answer("x", 1000, "done"),
    }
}

#[test]
fn interrupting_the_parent_interrupts_its_children_and_each_end_is_recorded() {
    let w = World::new();
    let (port, seen) = tree_server(w.sessions_root(), Arc::new(hang_script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let top = w
        .command(&["run", "--provider", "fake", "[agent:P] wait"])
        .env("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the grandchild is waiting for its model.
    wait_until_asked(&seen, &["G"], "the grandchild never asked");
    let status = std::process::Command::new("kill")
        .args(["-INT", &top.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = top.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let (p, c, g) = (
        session_of(&w, "P"),
        session_of(&w, "C"),
        session_of(&w, "G"),
    );
    for (parent, child) in [(&p, &c), (&c, &g)] {
        let child_id = child.file_name().unwrap().to_string_lossy().into_owned();
        let complete = events_of(parent)
            .into_iter()
            .find(|(k, _, d)| k == "agent.complete" && d["child"] == child_id.as_str())
            .unwrap_or_else(|| panic!("the end of {child_id} is recorded"));
        assert_eq!(complete.2["ended"], "interrupted", "{complete:?}");
        let end = events_of(child)
            .into_iter()
            .find(|(k, _, _)| k == "session.end")
            .expect("the child ended its log");
        assert_eq!(end.2["reason"], "interrupted");
        assert!(matches!(
            chock_log::is_live(child).unwrap(),
            chock_log::Liveness::Stale { .. } | chock_log::Liveness::NoLock
        ));
    }
}

#[test]
fn a_budget_in_chock_toml_stops_the_model_calls_and_a_bad_budget_flag_is_refused() {
    let w = World::new();
    w.write("chock.toml", "[budget]\ntokens = 20000\n");
    let script = |tag: &str, step: usize, _body: &Value| match (tag, step) {
        ("B", 0) => call(
            "b0",
            15_000,
            "write_file",
            &json!({"path": "b.txt", "content": "b\n"}),
        ),
        _ => answer("b-x", 1000, "this call should never have been made"),
    };
    let (port, seen) = tree_server(w.sessions_root(), Arc::new(script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let key = [("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")];
    let out = w.chock_with_env(&["run", "--provider", "fake", "[agent:B] spend"], &key);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("ended       out_of_budget"), "{stdout}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let events = w.events_exact();
    assert!(
        events.iter().any(|(k, _, d)| k == "note"
            && d["about"] == "budget"
            && d["limit"]["tokens"] == 20000)
    );
    let end = events.iter().find(|(k, _, _)| k == "session.end").unwrap();
    assert_eq!(end.2["reason"], "out_of_budget");

    for (flag, says) in [
        ("nothing", "write dollars as $0.50"),
        ("$-1", "more than 0"),
        ("0tokens", "at least 1"),
    ] {
        let out = w.chock(&["run", "--provider", "demo", "--budget", flag, "x"]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(says),
            "{flag}: {}",
            text(&out.stderr)
        );
    }
}

fn orphan_script(tag: &str, step: usize, _body: &Value) -> Step {
    match (tag, step) {
        ("O", 0) => call(
            "o0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:K] outlive your parent"}),
        ),
        ("O", _) => answer("o1", 1000, "O goes on."),
        // The child's first request kills its parent with SIGKILL; the child itself ends normally.
        ("K", 0) => Step::KillParentThen(Box::new(answer("k0", 2000, "K is done."))),
        _ => panic!("no script for {tag} at step {step}"),
    }
}

#[test]
fn a_parent_killed_while_its_child_runs_records_the_end_of_the_child_when_resumed() {
    let w = World::new();
    let (port, _seen) = tree_server(w.sessions_root(), Arc::new(orphan_script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let key = [("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")];
    let out = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--budget",
            "50000tokens",
            "[agent:O] delegate",
        ],
        &key,
    );
    assert_eq!(out.status.code(), None, "killed: {}", text(&out.stderr));
    let (parent, child) = (session_of(&w, "O"), session_of(&w, "K"));
    wait_until_ended(&child, "the child never ended");
    let child_id = child.file_name().unwrap().to_string_lossy().into_owned();
    let completes = |events: &[(String, Option<String>, Value)]| {
        events
            .iter()
            .filter(|(k, _, d)| k == "agent.complete" && d["child"] == child_id.as_str())
            .count()
    };
    assert_eq!(completes(&events_of(&parent)), 0);
    let out = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--resume",
            &id_of(&parent),
            "[agent:O] go on",
        ],
        &key,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let events = events_of(&parent);
    assert_eq!(completes(&events), 1);
    let complete = events
        .iter()
        .find(|(k, _, d)| k == "agent.complete" && d["child"] == child_id.as_str())
        .unwrap();
    assert_eq!(complete.2["ended"], "done");
    assert_eq!(
        complete.1.as_deref(),
        Some("o0"),
        "under the spawn's call id"
    );
    assert_eq!(
        complete.2["child_head"],
        chock_log::verify(&child)
            .unwrap()
            .head
            .unwrap()
            .hash
            .as_str()
    );
    // The model is told the child's end in the resumed conversation.
    let told = events
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("o0"))
        .unwrap();
    assert!(
        told.2["output"].as_str().unwrap().contains("K is done."),
        "{told:?}"
    );
    let spent = complete.2["spent"]["tokens"].as_u64().unwrap();
    assert_eq!(spent, 2010);
    let end = events
        .iter()
        .rev()
        .find(|(k, _, _)| k == "session.end")
        .unwrap();
    let children = end.2["summary"]["children"].as_array().unwrap();
    assert_eq!(children[0]["session"], child_id.as_str());
    assert_eq!(children[0]["tokens"], 2010);
}

fn id_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// The names of the tools a request offers.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

const SPAWNING: [&str; 3] = ["spawn_agent", "spawn_agents", "take_subagent"];

/// The tool names each request offered, by the asking agent's tag.
type Offered = Arc<Mutex<Vec<(String, Vec<String>)>>>;

#[test]
fn at_max_depth_no_spawning_tool_is_offered_and_a_call_of_one_is_refused() {
    let w = World::new();
    w.write("chock.toml", "[subagents]\nmax_depth = 0\n");
    let offered: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let record = Arc::clone(&offered);
    let script = move |tag: &str, step: usize, body: &Value| {
        record.lock().unwrap().push(tool_names(body));
        match (tag, step) {
            ("D", 0) => call(
                "d0",
                1000,
                "spawn_agent",
                &json!({"task": "[agent:E] never"}),
            ),
            ("D", _) => answer("d1", 1000, "no children here"),
            _ => panic!("no script for {tag}"),
        }
    };
    let (port, seen) = tree_server(w.sessions_root(), Arc::new(script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "[agent:D] try"],
        &[("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(w.sessions().len(), 1, "no child session was made");
    assert!(seen.lock().unwrap().iter().all(|(t, _)| t == "D"));
    for tools in offered.lock().unwrap().iter() {
        assert!(tools.iter().any(|t| t == "read_file"), "{tools:?}");
        assert!(
            !tools.iter().any(|t| SPAWNING.contains(&t.as_str())),
            "{tools:?}"
        );
    }
    let events = w.events_exact();
    assert!(!events.iter().any(|(k, _, _)| k == "session.spawn"));
    let result = events
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("d0"))
        .unwrap();
    assert_eq!(result.2["is_error"], true);
    assert!(
        result.2["output"]
            .as_str()
            .unwrap()
            .contains("there is no tool named spawn_agent"),
        "{result:?}"
    );
}

#[test]
fn a_child_at_max_depth_is_not_offered_spawn_agent_where_its_parent_is() {
    let w = World::new();
    w.write("chock.toml", "[subagents]\nmax_depth = 1\n");
    let offered: Offered = Arc::default();
    let record = Arc::clone(&offered);
    let script = move |tag: &str, step: usize, body: &Value| {
        record
            .lock()
            .unwrap()
            .push((tag.to_string(), tool_names(body)));
        unpriced(match (tag, step) {
            ("P", 0) => call(
                "p0",
                1000,
                "spawn_agent",
                &json!({"task": "[agent:C] try to go deeper"}),
            ),
            ("P", _) => answer("p1", 1000, "P is done."),
            ("C", 0) => call(
                "c0",
                1000,
                "spawn_agent",
                &json!({"task": "[agent:G] never"}),
            ),
            ("C", _) => answer("c1", 1000, "no grandchildren"),
            _ => panic!("no script for {tag}"),
        })
    };
    let (port, _seen) = tree_server(w.sessions_root(), Arc::new(script));
    // A model with no price: the child's cost is as unknown as its parent's, never $0.0000.
    w.config_toml(&format!(
        "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"CHOCK_TEST_TREE_KEY\"\nmodel = \"claude-unpriced-1\"\n"
    ));
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "[agent:P] spawn one"],
        &[("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cost        unknown ("), "{stdout}");
    let child_line = stdout
        .lines()
        .find(|l| l.starts_with("child "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(child_line.contains(": unknown ("), "{child_line}");
    assert!(!stdout.contains("$0.0000"), "{stdout}");
    let offered = offered.lock().unwrap();
    for (tag, tools) in offered.iter() {
        let spawning: Vec<&str> = tools
            .iter()
            .map(String::as_str)
            .filter(|t| SPAWNING.contains(t))
            .collect();
        match tag.as_str() {
            "P" => assert_eq!(spawning, SPAWNING, "{tools:?}"),
            _ => assert!(spawning.is_empty(), "{tag}: {tools:?}"),
        }
    }
    assert!(offered.iter().any(|(tag, _)| tag == "C"), "the child asked");
    let parent = events_of(&session_of(&w, "P"));
    let spawned = parent
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("p0"))
        .unwrap();
    let told = spawned.2["output"].as_str().unwrap();
    assert!(told.contains("it spent unknown ("), "{told}");
    let child = events_of(&session_of(&w, "C"));
    let result = child
        .iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("c0"))
        .unwrap();
    assert!(
        result.2["output"]
            .as_str()
            .unwrap()
            .contains("there is no tool named spawn_agent"),
        "{result:?}"
    );
}

/// A script whose two children each wait, at their first request, until the other has asked too:
/// they only both finish if they run at the same time.
fn wide_script(met: Arc<Mutex<Vec<String>>>) -> Arc<Script> {
    Arc::new(
        move |tag: &str, step: usize, _body: &Value| match (tag, step) {
            ("W", 0) => call(
                "w0",
                1000,
                "spawn_agents",
                &json!({"agents": [{"task": "[agent:W1] one"}, {"task": "[agent:W2] two"}]}),
            ),
            ("W", _) => answer("w1", 1000, "both ran"),
            ("W1" | "W2", 0) => {
                met.lock().unwrap().push(tag.to_string());
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while met.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                answer(&format!("{tag}-0"), 1000, &format!("{tag} done"))
            }
            _ => panic!("no script for {tag} at step {step}"),
        },
    )
}

#[test]
fn spawn_agents_runs_children_at_once_within_max_width() {
    let key = [("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")];
    let w = World::new();
    let met: Arc<Mutex<Vec<String>>> = Arc::default();
    let (port, _seen) = tree_server(w.sessions_root(), wide_script(Arc::clone(&met)));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let started = std::time::Instant::now();
    let out = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--budget",
            "90000tokens",
            "[agent:W] fan out",
        ],
        &key,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the two children ran one after the other"
    );
    let top = session_of(&w, "W");
    let events = events_of(&top);
    let spawns: Vec<&Value> = events
        .iter()
        .filter(|(k, _, _)| k == "session.spawn")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(spawns.len(), 2);
    // An equal share of what was left after the top's first call (1010 tokens).
    for spawn in &spawns {
        assert_eq!(spawn["budget"]["tokens"], (90_000 - 1010) / 2);
    }
    let completes = events
        .iter()
        .filter(|(k, _, d)| k == "agent.complete" && d["ended"] == "done")
        .count();
    assert_eq!(completes, 2);
    // Two decisions, one per child, before either started.
    let decisions = events
        .iter()
        .filter(|(k, c, d)| {
            k == "decision" && c.as_deref() == Some("w0") && d["action"] == "subagent.spawn"
        })
        .count();
    assert_eq!(decisions, 2);

    // With max_width = 1 the same call is refused by name, and nothing starts.
    let narrow = World::new();
    narrow.write("chock.toml", "[subagents]\nmax_width = 1\n");
    let (port, seen) = tree_server(narrow.sessions_root(), wide_script(Arc::default()));
    fake_provider(&narrow, port, "CHOCK_TEST_TREE_KEY");
    let out = narrow.chock_with_env(&["run", "--provider", "fake", "[agent:W] fan out"], &key);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(narrow.sessions().len(), 1);
    assert!(seen.lock().unwrap().iter().all(|(t, _)| t == "W"));
    let result = narrow
        .events()
        .into_iter()
        .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("w0"))
        .unwrap();
    assert!(
        result.2["output"]
            .as_str()
            .unwrap()
            .contains("max_width is 1"),
        "{result:?}"
    );
}

#[test]
fn interrupting_a_parent_reaches_every_child_of_one_spawn_agents_call() {
    let w = World::new();
    let script = |tag: &str, step: usize, _body: &Value| match (tag, step) {
        ("Q", 0) => call(
            "q0",
            1000,
            "spawn_agents",
            &json!({"agents": [{"task": "[agent:H1] wait"}, {"task": "[agent:H2] wait"}]}),
        ),
        ("H1" | "H2", 0) => Step::Hang,
        _ => answer("x", 1000, "done"),
    };
    let (port, seen) = tree_server(w.sessions_root(), Arc::new(script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let top = w
        .command(&["run", "--provider", "fake", "[agent:Q] wait"])
        .env("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_asked(&seen, &["H1", "H2"], "the children never asked");
    let status = std::process::Command::new("kill")
        .args(["-INT", &top.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = top.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let parent = session_of(&w, "Q");
    for tag in ["H1", "H2"] {
        let child = session_of(&w, tag);
        let child_id = id_of(&child);
        let complete = events_of(&parent)
            .into_iter()
            .find(|(k, _, d)| k == "agent.complete" && d["child"] == child_id.as_str())
            .unwrap_or_else(|| panic!("the end of {tag} is recorded"));
        assert_eq!(complete.2["ended"], "interrupted", "{complete:?}");
    }
}

/// A child's removal comes up with its take: the file it removed is gone from the parent's
/// workspace too (hidden by a whiteout in the overlay), the take says so, and the real project
/// is untouched until an apply.
#[test]
fn a_take_removes_what_the_child_removed() {
    let w = World::new();
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n",
    );
    w.write("old.txt", "to go\n");
    w.write("keep.txt", "stays\n");
    let script = |tag: &str, step: usize, body: &Value| match (tag, step) {
        ("P", 0) => call(
            "p0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:C] remove old.txt"}),
        ),
        ("P", 1) => call(
            "p1",
            1000,
            "take_subagent",
            &json!({"child": last_child(body)}),
        ),
        ("P", 2) => call("p2", 1000, "run_command", &json!({"command": "ls"})),
        ("P", _) => answer("p3", 1000, "taken"),
        ("C", 0) => call("c0", 1000, "run_command", &json!({"command": "rm old.txt"})),
        ("C", _) => answer("c1", 1000, "removed"),
        _ => panic!("no script for {tag}"),
    };
    let (port, _seen) = tree_server(w.sessions_root(), Arc::new(script));
    fake_provider(&w, port, "CHOCK_TEST_TREE_KEY");
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "[agent:P] go"],
        &[("CHOCK_TEST_TREE_KEY", "sk-ant-tree-0123456789")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let parent = session_of(&w, "P");
    let events = events_of(&parent);
    let output = |call: &str| {
        events
            .iter()
            .find(|(k, c, _)| k == "tool.result" && c.as_deref() == Some(call))
            .map(|(_, _, d)| d["output"].as_str().unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("no result for {call}"))
    };
    assert!(
        output("p1").contains("removed, as the child did: old.txt"),
        "{}",
        output("p1")
    );
    let listed = output("p2");
    assert!(
        listed.contains("keep.txt") && !listed.contains("old.txt"),
        "{listed}"
    );
    assert_eq!(w.read("old.txt"), "to go\n", "nothing applied yet");
}

/// A child that outlives its parent killed outright is adopted with the parent (`chock detach`):
/// the daemon waits for it by its pid file descriptor and its log's lock, records its
/// `agent.complete`, gives the `spawn_agent` call its result and goes on (docs/handover.md).
#[test]
fn a_child_that_outlives_its_killed_parent_is_adopted_with_it_and_its_end_recorded() {
    let w = World::with_git_project();
    let flag = w.tmp().join("let-the-child-answer");
    let wait_for = flag.clone();
    let script = move |tag: &str, step: usize, _body: &Value| match (tag, step) {
        ("P", 0) => call(
            "p0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:C] take your time"}),
        ),
        ("C", 0) => {
            hold_until(&wait_for);
            answer("c0", 1000, "the child is done")
        }
        _ => answer("p1", 1000, "the parent is done"),
    };
    let (seen, daemon) = tree_and_daemon(&w, Arc::new(script));
    let key = TREE_KEY;
    let mut top = top_agent(&w, key, "[agent:P] spawn one");
    wait_until_asked(&seen, &["C"], "the child never asked its model");
    let parent = session_of(&w, "P");
    let child = session_of(&w, "C");
    let id = id_of(&parent);
    let child_id = id_of(&child);
    top.kill().unwrap();
    top.wait().unwrap();
    let out = w.chock(&["detach", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        matches!(
            chock_log::is_live(&child),
            Ok(chock_log::Liveness::Live { .. })
        ),
        "the child still runs once the parent is adopted"
    );
    std::fs::write(&flag, "go").unwrap();
    wait_for_events(&parent, "the parent went on", |e| {
        e.iter().any(|(k, _, d)| k == "turn.end" && d["turn"] == 2)
    });
    daemon.stop();
    let events = events_of(&parent);
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .expect("a handover");
    assert_eq!(events[at].2["how"], "found_dead");
    assert!(events[at].2.get("unknown").is_none(), "{:?}", events[at].2);
    let spawns = events
        .iter()
        .filter(|(k, _, _)| k == "session.spawn")
        .count();
    let completes: Vec<&Value> = events
        .iter()
        .filter(|(k, _, _)| k == "agent.complete")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!((spawns, completes.len()), (1, 1), "{events:#?}");
    assert_eq!(completes[0]["child"], child_id);
    let complete_at = events
        .iter()
        .position(|(k, _, _)| k == "agent.complete")
        .unwrap();
    assert!(complete_at > at, "recorded by the new owner");
    let told: Vec<&Value> = events
        .iter()
        .filter(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("p0"))
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(told.len(), 1, "{events:#?}");
    assert!(
        !told[0]["output"]
            .as_str()
            .unwrap()
            .contains("outcome unknown"),
        "{told:?}"
    );
    for dir in [&parent, &child] {
        let report = chock_log::verify(dir).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// `chock run` of the tree's top agent on `task`, in the background.
fn top_agent(w: &World, key: (&str, &str), task: &str) -> std::process::Child {
    w.command(&["run", "--provider", "fake", task])
        .env(key.0, key.1)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (up to a minute) until `ready` holds of the log in `dir`.
fn wait_for_events(
    dir: &Path,
    what: &str,
    ready: impl Fn(&[(String, Option<String>, Value)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = events_of(dir);
        if ready(&events) {
            return;
        }
        assert!(Instant::now() < deadline, "never {what}: {events:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The session's interrupt reaches a child adopted with its parent: the daemon's wait for it is
/// not held until the child ends on its own. The child (its model never answers) is sent SIGINT
/// as a child `spawn_agent` runs itself is, ends its turn interrupted and writes its end; the
/// parent records its `agent.complete` and ends the turn as interrupted, and is idle again.
#[test]
fn an_interrupt_reaches_a_child_adopted_with_its_killed_parent() {
    let w = World::with_git_project();
    let script = |tag: &str, step: usize, _body: &Value| match (tag, step) {
        ("P", 0) => call(
            "p0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:C] wait for the model"}),
        ),
        ("C", 0) => Step::Hang,
        _ => answer("x", 1000, "done"),
    };
    let (seen, daemon) = tree_and_daemon(&w, Arc::new(script));
    let key = TREE_KEY;
    let mut top = top_agent(&w, key, "[agent:P] spawn one");
    wait_until_asked(&seen, &["C"], "the child never asked its model");
    let parent = session_of(&w, "P");
    let child = session_of(&w, "C");
    let id = id_of(&parent);
    let child_id = id_of(&child);
    top.kill().unwrap();
    top.wait().unwrap();
    let out = w.chock(&["detach", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let interrupted = Instant::now();
    rt().block_on(async {
        let mut client = connect(&w).await;
        let _: chock_protocol::rpc::Done = client
            .call(&chock_protocol::rpc::Call::SessionsInterrupt(
                chock_protocol::rpc::SessionParams {
                    session: id.clone(),
                },
            ))
            .await
            .unwrap();
    });
    wait_for_events(&parent, "the turn ended interrupted", |e| {
        e.iter()
            .any(|(k, _, d)| k == "turn.end" && d["reason"] == "interrupted")
    });
    assert!(
        interrupted.elapsed() < Duration::from_secs(30),
        "the interrupt waited {:?}",
        interrupted.elapsed()
    );
    daemon.stop();
    let events = events_of(&parent);
    let completes: Vec<&Value> = events
        .iter()
        .filter(|(k, _, _)| k == "agent.complete")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(completes.len(), 1, "{events:#?}");
    assert_eq!(completes[0]["child"], child_id);
    assert_eq!(completes[0]["ended"], "interrupted");
    let end = events_of(&child)
        .into_iter()
        .find(|(k, _, _)| k == "session.end")
        .expect("the child ended its log");
    assert_eq!(end.2["reason"], "interrupted");
    for dir in [&parent, &child] {
        let report = chock_log::verify(dir).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// With `spawn_agents`, a parent killed while its two children run: one child ends before the
/// parent is adopted, the other after. The call's one result, given by the new owner once both
/// have ended, names both children in the order they were spawned (as the call itself would
/// have), and each gets its `agent.complete`.
#[test]
fn spawn_agents_children_of_a_killed_parent_are_all_named_in_the_calls_result() {
    let w = World::with_git_project();
    let (flag_a, flag_b) = (w.tmp().join("a-may-end"), w.tmp().join("b-may-end"));
    let (wait_a, wait_b) = (flag_a.clone(), flag_b.clone());
    let script = move |tag: &str, step: usize, _body: &Value| {
        let wait = |flag: &Path| {
            let until = Instant::now() + Duration::from_secs(120);
            while !flag.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        match (tag, step) {
            ("P", 0) => call(
                "p0",
                1000,
                "spawn_agents",
                &json!({"agents": [
                    {"task": "[agent:A] the first"},
                    {"task": "[agent:B] the second"}
                ]}),
            ),
            ("A", 0) => {
                wait(&wait_a);
                answer("a0", 1000, "A is done")
            }
            ("B", 0) => {
                wait(&wait_b);
                answer("b0", 1000, "B is done")
            }
            _ => answer("p1", 1000, "the parent is done"),
        }
    };
    let (seen, daemon) = tree_and_daemon(&w, Arc::new(script));
    let key = TREE_KEY;
    let mut top = top_agent(&w, key, "[agent:P] spawn two");
    wait_until_asked(&seen, &["A", "B"], "the children never asked");
    let (parent, a, b) = (
        session_of(&w, "P"),
        session_of(&w, "A"),
        session_of(&w, "B"),
    );
    let id = id_of(&parent);
    let name = |dir: &PathBuf| id_of(dir);
    top.kill().unwrap();
    top.wait().unwrap();
    // A ends before the adopt; B still runs then.
    std::fs::write(&flag_a, "go").unwrap();
    wait_until_ended(&a, "A never ended");
    let out = w.chock(&["detach", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::write(&flag_b, "go").unwrap();
    wait_for_events(&parent, "the parent went on", |e| {
        e.iter().any(|(k, _, d)| k == "turn.end" && d["turn"] == 2)
    });
    daemon.stop();
    let events = events_of(&parent);
    let completes: Vec<String> = events
        .iter()
        .filter(|(k, _, _)| k == "agent.complete")
        .map(|(_, _, d)| d["child"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(completes, [name(&a), name(&b)], "{events:#?}");
    let told: Vec<&Value> = events
        .iter()
        .filter(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("p0"))
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(told.len(), 1, "{events:#?}");
    let output = told[0]["output"].as_str().unwrap();
    assert_eq!(told[0]["tool"], "spawn_agents");
    let first = output.find(&format!("[1] child {}", name(&a)));
    let second = output.find(&format!("[2] child {}", name(&b)));
    assert!(
        first.is_some() && second.is_some() && first < second,
        "{output}"
    );
    assert!(
        output.contains("A is done") && output.contains("B is done"),
        "{output}"
    );
    for dir in [&parent, &a, &b] {
        let report = chock_log::verify(dir).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// A background subagent moves with its parent (docs/handover.md): `spawn_agent {background:
/// true}` returns once the child runs; the parent's turn goes on; the parent is moved to the
/// daemon at its turn boundary (`chock detach`) and its `chock run` SIGKILLed while the child
/// still waits for its model. The first process records nothing of the child's end and does not
/// wait for it; the daemon adopts the child by its log's lock and pid file descriptor, records
/// its `agent.complete` once it ends, and the model, asked through a client, reads its report
/// with read_output. One `session.spawn`, one `agent.complete`, one result for the spawn's call.
#[test]
fn a_background_child_moves_with_its_parent_and_the_new_owner_records_its_end() {
    let w = World::with_git_project();
    let flag = w.tmp().join("let-the-child-answer");
    let wait_for = flag.clone();
    let script = move |tag: &str, step: usize, _body: &Value| match (tag, step) {
        ("P", 0) => call(
            "p0",
            1000,
            "spawn_agent",
            &json!({"task": "[agent:C] take your time", "background": true}),
        ),
        ("P", 1) => call("p1", 1000, "run_command", &json!({"command": "sleep 2"})),
        ("P", 2) => answer("p2", 1000, "the parent carries on"),
        ("P", 3) => call("p3", 1000, "read_output", &json!({"handle": "bg-p0"})),
        ("C", 0) => {
            hold_until(&wait_for);
            answer("c0", 1000, "the background child is done")
        }
        _ => answer("x", 1000, "done"),
    };
    let (seen, daemon) = tree_and_daemon(&w, Arc::new(script));
    let key = TREE_KEY;
    let mut top = top_agent(&w, key, "[agent:P] spawn one in the background");
    wait_until_asked(&seen, &["C"], "the child never asked its model");
    let parent = session_of(&w, "P");
    let child = session_of(&w, "C");
    let id = parent.file_name().unwrap().to_string_lossy().into_owned();
    let child_id = child.file_name().unwrap().to_string_lossy().into_owned();
    wait_for_events(&parent, "the spawn's call answered", |e| {
        e.iter()
            .any(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("p0"))
    });
    let out = w.chock(&["detach", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    top.kill().unwrap();
    top.wait().unwrap();
    assert!(
        matches!(
            chock_log::is_live(&child),
            Ok(chock_log::Liveness::Live { .. })
        ),
        "the child still runs once the parent is adopted"
    );
    std::fs::write(&flag, "go").unwrap();
    wait_for_events(&parent, "the daemon records the child's end", |e| {
        e.iter().any(|(k, _, _)| k == "agent.complete")
    });
    rt().block_on(async {
        let mut client = connect(&w).await;
        handover_support::send_input(&mut client, &id, "what did the child say?").await;
    });
    wait_for_events(&parent, "the follow-up read the child's report", |e| {
        e.iter()
            .any(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("p3"))
    });
    rt().block_on(async {
        let mut client = connect(&w).await;
        handover_support::end_session(&mut client, &id).await;
    });
    daemon.stop();
    let events = events_of(&parent);
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .expect("a handover");
    assert_eq!(events[at].2["how"], "released");
    let spawns = events
        .iter()
        .filter(|(k, _, _)| k == "session.spawn")
        .count();
    let completes: Vec<(usize, &Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, (k, _, _))| k == "agent.complete")
        .map(|(i, (_, _, d))| (i, d))
        .collect();
    assert_eq!((spawns, completes.len()), (1, 1), "{events:#?}");
    assert_eq!(completes[0].1["child"], child_id);
    assert_eq!(completes[0].1["ended"], "done");
    assert!(completes[0].0 > at, "recorded by the new owner");
    let results = |call: &str| -> Vec<String> {
        events
            .iter()
            .filter(|(k, c, _)| k == "tool.result" && c.as_deref() == Some(call))
            .map(|(_, _, d)| d["output"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let spawned = results("p0");
    assert_eq!(spawned.len(), 1, "{events:#?}");
    assert!(spawned[0].contains("runs in the background"), "{spawned:?}");
    let read = results("p3");
    assert_eq!(read.len(), 1, "{events:#?}");
    assert!(read[0].contains("the background child is done"), "{read:?}");
    assert_eq!(
        events.iter().filter(|(k, _, _)| k == "session.end").count(),
        1
    );
    for dir in [&parent, &child] {
        let report = chock_log::verify(dir).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
