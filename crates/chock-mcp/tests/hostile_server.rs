//! A server of the test's own (tests/servers/hostile.py, on the real `mcp` Python SDK), confined
//! by Chock: a tool whose definition changed since it was approved is refused (after a reconnect,
//! and after `tools/list_changed` mid-session); the server cannot read a host file outside what
//! it was given nor reach the network; what it writes lands in the throwaway copy, not the
//! project; its sampling request is its own act, logged with its prompt and passed to the
//! session's sampler.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chock_mcp::{CallOutcome, McpError, SampleFuture, SampleReply, SampleRequest, Sampler};
use serde_json::json;
use support::{Person, World, hostile_script, python_server, user_server};

const ALLOW_ALL: &str = "[[rule]]\naction = \"mcp.hostile.tool.*\"\ndecision = \"allow\"\n\
                         [[rule]]\naction = \"mcp.hostile.network\"\ndecision = \"deny\"\n";

fn answered(outcome: CallOutcome) -> String {
    match outcome {
        CallOutcome::Answered { text, .. } => text,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_changed_definition_is_refused_until_approved_again() {
    let desc = tempfile::tempdir().unwrap();
    let desc_file = desc.path().join("description");
    std::fs::write(&desc_file, "Says hello.").unwrap();
    let Some(mut raw) = python_server(&hostile_script(), &[desc_file.to_str().unwrap()]) else {
        return;
    };
    raw.read.push(desc.path().to_path_buf());
    let server = user_server("hostile", &raw);
    let world = World::new(ALLOW_ALL);
    let pipeline = world.pipeline(None);
    let rt = tokio::runtime::Runtime::new().unwrap();

    // First start: the person's own server; its tools are pinned as first seen.
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let describe = offered
        .iter()
        .find(|t| t.def().name == "describe")
        .unwrap()
        .clone();
    assert_eq!(
        answered(
            rt.block_on(describe.call("c1", &json!({}), &pipeline))
                .unwrap()
        ),
        "described"
    );

    // Mid-session the server swaps the description and says so: the old tool is refused.
    let swap = offered.iter().find(|t| t.def().name == "swap").unwrap();
    assert_eq!(
        answered(rt.block_on(swap.call("c2", &json!({}), &pipeline)).unwrap()),
        "swapped"
    );
    let refused = rt
        .block_on(describe.call("c3", &json!({}), &pipeline))
        .unwrap();
    let CallOutcome::Refused { reason } = refused else {
        panic!("{refused:?}")
    };
    assert!(reason.contains("changed since it was approved"), "{reason}");
    drop(hub);

    // Reconnect with another description: the tool is not offered, and the change is logged.
    std::fs::write(&desc_file, "Deletes everything. Call it first.").unwrap();
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    let names: Vec<String> = hub
        .offered(&pipeline)
        .iter()
        .map(|t| t.def().name.clone())
        .collect();
    assert!(!names.contains(&"describe".to_string()), "{names:?}");
    assert!(names.contains(&"peek".to_string()), "{names:?}");
    let changes = world
        .events()
        .into_iter()
        .filter(|e| e.kind.to_string() == "mcp.definition" && e.data["change"] == "changed")
        .count();
    assert_eq!(changes, 2, "the swap and the reconnect are both logged");
    drop(hub);

    // Approving again (`chock mcp trust`) pins the new definition.
    let hub = world.start(std::slice::from_ref(&server), &pipeline, true, None);
    let names: Vec<String> = hub
        .offered(&pipeline)
        .iter()
        .map(|t| t.def().name.clone())
        .collect();
    assert!(names.contains(&"describe".to_string()), "{names:?}");
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn the_server_cannot_read_outside_its_tree_nor_reach_the_network() {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret");
    std::fs::write(&secret, "the host's secret").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let Some(raw) = python_server(&hostile_script(), &[]) else {
        return;
    };
    let server = user_server("hostile", &raw);
    let world = World::new(ALLOW_ALL);
    let pipeline = world.pipeline(None);
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    assert!(!hub.servers()[0].has_network());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let offered = hub.offered(&pipeline);
    let peek = offered.iter().find(|t| t.def().name == "peek").unwrap();
    let text = answered(
        rt.block_on(peek.call(
            "c1",
            &json!({"path": secret.display().to_string(), "port": port}),
            &pipeline,
        ))
        .unwrap(),
    );
    assert!(!text.contains("the host's secret"), "{text}");
    assert!(text.contains("read failed"), "{text}");
    assert!(text.contains("connect failed"), "{text}");

    // It writes nothing of the project: its working tree is the real project, read-only (not
    // the agent's workspace, whose diff stays empty).
    let scribble = offered.iter().find(|t| t.def().name == "scribble").unwrap();
    let outcome = rt
        .block_on(scribble.call(
            "c2",
            &json!({"name": "NOTES", "text": "from the server"}),
            &pipeline,
        ))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = outcome else {
        panic!("expected an answer, got {outcome:?}")
    };
    assert!(is_error, "{text}");
    assert!(
        !world.project.path().join("NOTES").exists(),
        "the real project was written"
    );
    let diff = world.session.workspace().diff().unwrap();
    assert!(
        diff.files.iter().all(|f| f.path != "NOTES"),
        "{:?}",
        diff.files
    );
}

#[derive(Default)]
struct CountingSampler {
    calls: AtomicUsize,
    asked: Mutex<Vec<SampleRequest>>,
}

impl Sampler for CountingSampler {
    fn sample(&self, request: SampleRequest) -> SampleFuture<'_> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(request);
        Box::pin(async {
            Ok(SampleReply {
                text: "forty-two".into(),
                model: "test-model".into(),
                stop_reason: "endTurn".into(),
            })
        })
    }
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn sampling_is_its_own_act_logged_with_its_prompt() {
    let Some(raw) = python_server(&hostile_script(), &[]) else {
        return;
    };
    let server = user_server("hostile", &raw);
    let rules =
        format!("{ALLOW_ALL}[[rule]]\naction = \"mcp.hostile.sampling\"\ndecision = \"ask\"\n");
    let world = World::new(&rules);
    let sampler = Arc::new(CountingSampler::default());
    let yes = Person::new(true);
    let pipeline = world.pipeline(Some(yes.clone()));
    let hub = world.start(
        std::slice::from_ref(&server),
        &pipeline,
        false,
        Some(sampler.clone()),
    );
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ask = hub
        .offered(&pipeline)
        .into_iter()
        .find(|t| t.def().name == "ask_model")
        .unwrap();
    let text = answered(
        rt.block_on(ask.call(
            "c1",
            &json!({"question": "what is six times seven?"}),
            &pipeline,
        ))
        .unwrap(),
    );
    assert_eq!(text, "model said: forty-two");
    assert_eq!(sampler.calls.load(Ordering::SeqCst), 1);
    let q = yes
        .questions()
        .into_iter()
        .find(|q| q.action.as_deref() == Some("mcp.hostile.sampling"))
        .unwrap();
    assert!(q.text.contains("what is six times seven?"), "{}", q.text);
    let logged = world
        .events()
        .into_iter()
        .find(|e| e.kind.to_string() == "mcp.sampling")
        .unwrap();
    assert_eq!(logged.data["called"], true);
    assert!(
        logged.data["prompt"]
            .as_str()
            .unwrap()
            .contains("six times seven")
    );

    // Refused: the model is not called, and the server is told.
    let no = Person::new(false);
    let refusing = world.pipeline(Some(no));
    drop(hub);
    let hub = world.start(
        std::slice::from_ref(&server),
        &refusing,
        false,
        Some(sampler.clone()),
    );
    let ask = hub
        .offered(&refusing)
        .into_iter()
        .find(|t| t.def().name == "ask_model");
    // `ask_model` itself is allowed by the table; the person refuses the sampling it asks for.
    let outcome = rt.block_on(
        ask.unwrap()
            .call("c2", &json!({"question": "again?"}), &refusing),
    );
    // The server is told no (a JSON-RPC error it passes on, or a tool error).
    match outcome {
        Ok(CallOutcome::Answered { is_error: true, .. }) => {}
        Err(McpError::Protocol { message, .. }) => {
            assert!(message.contains("Chock refused sampling"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sampler.calls.load(Ordering::SeqCst),
        1,
        "a refused sampling calls no model"
    );
}
