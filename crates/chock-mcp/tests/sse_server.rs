//! The legacy HTTP+SSE transport against the real third-party
//! `@modelcontextprotocol/server-everything` (npm, `sse`) on loopback: reached by the host through
//! the broker's door like a streamable HTTP server, its tools listed and pinned, a call allowed by
//! the table answered, and its connections decided as `net.connect` before they open.

mod support;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chock_mcp::CallOutcome;
use chock_policy::mcp::RawServer;
use serde_json::json;
use support::{Person, World, installed, user_server};

/// server-everything's SSE transport on a free port, killed when dropped.
struct Everything {
    child: Child,
    port: u16,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn everything_sse() -> Option<Everything> {
    let entry =
        installed("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let child = Command::new("node")
        .arg(&entry)
        .arg("sse")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start node");
    let server = Everything { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything listens");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(server)
}

#[test]
fn the_everything_server_over_legacy_sse_is_reached_through_the_broker() {
    let Some(server) = everything_sse() else {
        return;
    };
    let port = server.port;
    let action = format!("net.connect.1.0.0.127.{port}");
    let rules = format!(
        "[[rule]]\naction = \"{action}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.tool.echo\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.tool.*\"\ndecision = \"deny\"\n"
    );
    let world = World::new(&rules);
    let pipeline = world.pipeline(Some(Person::new(false)));
    let configured = user_server(
        "everything",
        &RawServer {
            url: Some(format!("http://127.0.0.1:{port}/sse")),
            transport: Some("sse".into()),
            startup_timeout_secs: Some(30),
            ..RawServer::default()
        },
    );
    let mut hub = world.start(&[configured], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let names: Vec<&str> = offered.iter().map(|t| t.model_name()).collect();
    assert_eq!(names, ["mcp__everything__echo"], "only the allowed tool");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = rt
        .block_on(offered[0].call("c1", &json!({"message": "hello over sse"}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error && text.contains("hello over sse"), "{text}");
    world.stop(&mut hub, "the test is done");
    drop(hub);

    let events = world.events();
    let started = events
        .iter()
        .find(|e| e.kind.to_string() == "mcp.server" && e.data["phase"] == "started")
        .expect("mcp.server started");
    assert_eq!(started.data["transport"], "sse");
    let decided = events
        .iter()
        .position(|e| e.kind.to_string() == "decision" && e.data["action"] == action)
        .expect("the destination's decision");
    let opened = events
        .iter()
        .position(|e| {
            e.kind.to_string() == "net.connect"
                && e.data["phase"] == "open"
                && e.data["door"] == "mcp"
        })
        .expect("a connection opened by the door");
    assert!(decided < opened, "decided at {decided}, opened at {opened}");
}
