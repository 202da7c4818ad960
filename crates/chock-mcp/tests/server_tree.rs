//! A stdio server is held through its confiner's handle, never a host pid: when its session
//! stops it (`McpHub::stop`, logged `stopped`) or goes without stopping it (the hub dropped with
//! the session), no process of its sandbox is left. Checked from outside, on the host, by the
//! command line in /proc of a child the server's command left running beside it.

mod support;

use std::time::{Duration, Instant};

use chock_policy::mcp::RawServer;
use support::{World, hostile_script, python_server, user_server};

const ALLOW_ALL: &str = "[[rule]]\naction = \"mcp.hostile.tool.*\"\ndecision = \"allow\"\n\
                         [[rule]]\naction = \"mcp.hostile.network\"\ndecision = \"deny\"\n";

/// A number no other process on the machine sleeps for: this test's mark in /proc.
fn mark(which: u32) -> String {
    chock_test_support::processes::mark(2_000_000, which)
}

use chock_test_support::processes::sleeping;

/// The hostile server, started by a shell that first leaves `sleep <mark>` running in the
/// server's sandbox.
fn server_leaving_a_child(mark: &str) -> Option<RawServer> {
    let mut raw = python_server(&hostile_script(), &[])?;
    let python = raw.command.take()?;
    let mut args = vec![
        "-c".to_string(),
        format!("sleep {mark} & exec \"$0\" \"$@\""),
        python,
    ];
    args.append(&mut raw.args);
    raw.command = Some("/bin/sh".into());
    raw.args = args;
    Some(raw)
}

/// Starts the server in `world`; its hub, once the mark's child shows on the host.
fn started(world: &World, mark: &str) -> Option<chock_mcp::McpHub> {
    let raw = server_leaving_a_child(mark)?;
    let pipeline = world.pipeline(None);
    let hub = world.start(&[user_server("hostile", &raw)], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let deadline = Instant::now() + Duration::from_secs(10);
    while sleeping(mark).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the server's child never showed in /proc"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(hub)
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_stopped_servers_sandbox_leaves_no_process() {
    let world = World::new(ALLOW_ALL);
    let mark = mark(0);
    let Some(mut hub) = started(&world, &mark) else {
        return;
    };
    world.stop(&mut hub, "the session ended");
    assert_eq!(
        sleeping(&mark),
        Vec::<u32>::new(),
        "a process of the server's sandbox outlived its stop"
    );
    let stopped = world
        .events()
        .into_iter()
        .filter(|e| e.kind.to_string() == "mcp.server")
        .any(|e| e.data["phase"] == "stopped" && e.data["reason"] == "the session ended");
    assert!(stopped, "its stop is logged");
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_server_whose_session_goes_without_stopping_it_leaves_no_process() {
    let world = World::new(ALLOW_ALL);
    let mark = mark(1);
    let Some(hub) = started(&world, &mark) else {
        return;
    };
    drop(hub);
    assert_eq!(
        sleeping(&mark),
        Vec::<u32>::new(),
        "a process of the server's sandbox outlived its hub"
    );
}
