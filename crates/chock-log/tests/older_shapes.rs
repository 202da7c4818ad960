//! Logs written by an older Chock still load and verify: a field an event no longer has is read
//! past, and the chain, which covers each line as it was written, still holds.

use chock_log::{EventData, EventKind, Log, SessionHeader, read_events, verify};
use chock_protocol::log::McpServer;
use serde_json::json;

/// Before MCP servers were held through their confiner's handle, `mcp.server` `started` carried
/// the host pid of the server's sandbox init.
#[test]
fn an_mcp_server_start_with_a_host_pid_still_loads_and_verifies() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    log.append(
        EventKind::McpServer,
        None,
        json!({
            "phase": "started",
            "server": "time",
            "origin": "user",
            "transport": "stdio",
            "definition": "9f2c",
            "pid": 4242,
            "network": false,
        }),
    )
    .unwrap();
    log.sync().unwrap();
    let dir = log.dir().to_path_buf();
    drop(log);

    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    let events = read_events(&dir).unwrap();
    let started = events
        .iter()
        .find(|e| e.kind == EventKind::McpServer)
        .expect("the mcp.server line");
    // The line is kept as written (the pid is still in its data) ...
    assert_eq!(started.data["pid"], 4242);
    // ... and reads as today's type, without it.
    match started.payload().unwrap() {
        EventData::McpServer(McpServer::Started {
            server, network, ..
        }) => assert_eq!((server.as_str(), network), ("time", false)),
        other => panic!("{other:?}"),
    }
}
