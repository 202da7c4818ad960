//! Streamable HTTP servers, reached by the host through the broker's door: the real third-party
//! `@modelcontextprotocol/server-everything` (npm, `streamableHttp`) on loopback answers allowed,
//! asked and refused calls, its denied tools are not offered and its sampling request (sent over
//! the SSE stream of a call) is settled and answered; a destination the table denies, or one whose
//! allow cannot reach loopback, is refused before any connection is made, and the decision is in
//! the log before the connection.

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_mcp::{CallOutcome, SampleFuture, SampleReply, SampleRequest, Sampler};
use chock_policy::mcp::RawServer;
use serde_json::json;
use support::{Person, World, installed, user_server};

/// server-everything's streamable HTTP transport on `port`, killed when dropped.
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts the server and waits until it says it listens.
fn everything() -> Option<Everything> {
    let entry =
        installed("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")?;
    let port = free_port();
    let mut child = Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let stderr = child.stderr.take().expect("its stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening on port") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("server-everything listens");
    Some(Everything { child, port })
}

fn http_server(url: &str) -> chock_mcp::Configured {
    user_server(
        "everything",
        &RawServer {
            url: Some(url.to_string()),
            startup_timeout_secs: Some(30),
            ..RawServer::default()
        },
    )
}

/// A model that always says the same, counting its calls.
#[derive(Debug, Default)]
struct FixedModel {
    calls: AtomicUsize,
}

impl Sampler for FixedModel {
    fn sample(&self, _request: SampleRequest) -> SampleFuture<'_> {
        self.calls.fetch_add(1, Ordering::SeqCst);
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
fn the_everything_server_over_http_is_decided_call_by_call() {
    let Some(server) = everything() else {
        return;
    };
    let port = server.port;
    let rules = format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.tool.echo\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.tool.get-sum\"\ndecision = \"ask\"\n\
         [[rule]]\naction = \"mcp.everything.tool.trigger-sampling-request\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.sampling\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.tool.*\"\ndecision = \"deny\"\n"
    );
    let world = World::new(&rules);
    let yes = Person::new(true);
    let pipeline = world.pipeline(Some(Arc::clone(&yes)));
    let model = Arc::new(FixedModel::default());
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut hub = world.start(
        &[http_server(&url)],
        &pipeline,
        false,
        Some(Arc::clone(&model) as Arc<dyn Sampler>),
    );
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let listed = hub.servers()[0].tools();
    assert!(
        listed.iter().any(|l| l.def.name == "get-tiny-image"),
        "it lists its tools: {listed:?}"
    );

    // Denied tools are not offered; the allowed and the asked ones are.
    let offered = hub.offered(&pipeline);
    let mut names: Vec<&str> = offered.iter().map(|t| t.model_name()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "mcp__everything__echo",
            "mcp__everything__get-sum",
            "mcp__everything__trigger-sampling-request"
        ],
        "only the tools the table does not deny are offered"
    );
    let tool = |name: &str| {
        offered
            .iter()
            .find(|t| t.def().name == name)
            .expect("offered")
    };
    let rt = tokio::runtime::Runtime::new().unwrap();

    // Allowed: answered, nobody asked.
    let out = rt
        .block_on(tool("echo").call("c1", &json!({"message": "hello over http"}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error && text.contains("hello over http"), "{text}");
    assert!(yes.questions().is_empty(), "an allowed call asks nobody");

    // Asked: the person says yes, the server answers.
    let out = rt
        .block_on(tool("get-sum").call("c2", &json!({"a": 2, "b": 3}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, .. } = out else {
        panic!("{out:?}")
    };
    assert!(text.contains('5'), "{text}");
    let asked = yes.questions();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0].action.as_deref(),
        Some("mcp.everything.tool.get-sum")
    );

    // Asked and refused: the server never hears of it.
    let no = Person::new(false);
    let refusing = world.pipeline(Some(Arc::clone(&no)));
    let out = rt
        .block_on(tool("get-sum").call("c3", &json!({"a": 7, "b": 8}), &refusing))
        .unwrap();
    assert!(matches!(out, CallOutcome::Refused { .. }), "{out:?}");
    assert_eq!(no.questions().len(), 1);

    // The server's sampling request arrives on the call's SSE stream; its answer goes back in a
    // POST of its own while the call is open.
    let out = rt
        .block_on(tool("trigger-sampling-request").call(
            "c4",
            &json!({"prompt": "what is six times seven?", "maxTokens": 20}),
            &pipeline,
        ))
        .unwrap();
    let CallOutcome::Answered { text, .. } = out else {
        panic!("{out:?}")
    };
    assert!(text.contains("forty-two"), "{text}");
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);

    world.stop(&mut hub, "the test is done");
    drop(hub);
    let events = world.events();
    let started = events
        .iter()
        .find(|e| e.kind.to_string() == "mcp.server" && e.data["phase"] == "started")
        .expect("mcp.server started");
    assert_eq!(started.data["transport"], "http");
    assert!(started.data.get("pid").is_none(), "{:?}", started.data);

    // Every connection was decided as net.connect.<host>.<port> under the server's call id, and
    // the decision is in the log before the connection opened.
    let action = format!("net.connect.1.0.0.127.{port}");
    let position = |pred: &dyn Fn(&chock_log::Event) -> bool| events.iter().position(pred);
    let decided = position(&|e| e.kind.to_string() == "decision" && e.data["action"] == action)
        .expect("the destination's decision");
    assert_eq!(events[decided].call_id.as_deref(), Some("mcp-everything"));
    assert_eq!(events[decided].data["allowed"], true);
    let opened = position(&|e| {
        e.kind.to_string() == "net.connect" && e.data["phase"] == "open" && e.data["door"] == "mcp"
    })
    .expect("a connection opened by the door");
    assert!(decided < opened, "decided at {decided}, opened at {opened}");
    let opens = events
        .iter()
        .filter(|e| e.kind.to_string() == "net.connect" && e.data["phase"] == "open")
        .count();
    let gates = events
        .iter()
        .filter(|e| {
            e.kind.to_string() == "net.decision"
                && e.data["stage"] == "gate"
                && e.data["decision"] == "allow"
        })
        .count();
    assert!(
        opens >= 2,
        "the POSTs and the GET stream: {opens} connections"
    );
    assert_eq!(gates, opens, "every connection was decided");
}

/// A destination the table asks about is asked once for the server, not once per connection
/// (the POSTs, the GET stream, the closing DELETE): each later connection is still decided and
/// logged before it opens, naming the earlier answer, with the reach the answer had.
#[test]
fn an_asked_destination_is_asked_once_per_session() {
    let Some(server) = everything() else {
        return;
    };
    let port = server.port;
    let action = format!("net.connect.1.0.0.127.{port}");
    let rules = format!(
        "[[rule]]\naction = \"{action}\"\ndecision = \"ask\"\n\
         [[rule]]\naction = \"mcp.everything.tool.echo\"\ndecision = \"allow\"\n"
    );
    let world = World::new(&rules);
    let yes = Person::new(true);
    let pipeline = world.pipeline(Some(Arc::clone(&yes)));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut hub = world.start(&[http_server(&url)], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let echo = offered
        .iter()
        .find(|t| t.def().name == "echo")
        .expect("echo offered");
    let rt = tokio::runtime::Runtime::new().unwrap();
    for i in 0..3 {
        let out = rt
            .block_on(echo.call(&format!("c{i}"), &json!({"message": "again"}), &pipeline))
            .unwrap();
        assert!(matches!(out, CallOutcome::Answered { .. }), "{out:?}");
    }
    world.stop(&mut hub, "the test is done");
    drop(hub);
    let asked: Vec<_> = yes
        .questions()
        .into_iter()
        .filter(|q| q.action.as_deref() == Some(action.as_str()))
        .collect();
    assert_eq!(asked.len(), 1, "asked once for the server: {asked:?}");
    let events = world.events();
    let decisions = events
        .iter()
        .filter(|e| e.kind.to_string() == "decision" && e.data["action"] == action)
        .count();
    let opens = events
        .iter()
        .filter(|e| e.kind.to_string() == "net.connect" && e.data["phase"] == "open")
        .count();
    assert!(opens >= 2, "several connections: {opens}");
    assert!(
        decisions >= opens,
        "each connection decided and logged: {decisions} decisions, {opens} connections"
    );
}

/// A listener that records every connection it accepts.
struct Recorder {
    port: u16,
    accepted: Arc<Mutex<usize>>,
}

fn recorder() -> Recorder {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(Mutex::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            *count.lock().unwrap() += 1;
            drop(stream);
        }
    });
    Recorder { port, accepted }
}

impl Recorder {
    fn accepted(&self) -> usize {
        // A connection in flight lands within a moment.
        std::thread::sleep(Duration::from_millis(200));
        *self.accepted.lock().unwrap()
    }
}

fn start_against(world: &World, port: u16) -> String {
    let pipeline = world.pipeline(Some(Person::new(true)));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let hub = world.start(&[http_server(&url)], &pipeline, false, None);
    assert!(hub.servers().is_empty(), "it must not start");
    let (name, err) = &hub.failures()[0];
    assert_eq!(name, "everything");
    eprintln!("refused: {err}");
    err.to_string()
}

#[test]
fn a_destination_the_table_denies_is_refused_before_any_connection() {
    let target = recorder();
    let port = target.port;
    let rule = format!("net.connect.1.0.0.127.{port}");
    let world = World::new(&format!(
        "[[rule]]\naction = \"{rule}\"\ndecision = \"deny\"\n\
         [[rule]]\naction = \"mcp.everything.*\"\ndecision = \"allow\"\n"
    ));
    let started = Instant::now();
    let err = start_against(&world, port);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "refused at once"
    );
    assert!(err.contains("`everything`"), "names the server: {err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")),
        "names the host: {err}"
    );
    assert!(
        err.contains("chock.toml") && err.contains(&rule),
        "names the rule: {err}"
    );
    assert_eq!(target.accepted(), 0, "the server saw no connection");

    let events = world.events();
    let decision = events
        .iter()
        .find(|e| e.kind.to_string() == "decision" && e.data["action"] == rule.as_str())
        .expect("the refusal is logged as a decision");
    assert_eq!(decision.data["allowed"], false);
    assert!(events.iter().any(|e| e.kind.to_string() == "net.decision"
        && e.data["door"] == "mcp"
        && e.data["decision"] == "refuse"));
    assert!(
        !events.iter().any(|e| e.kind.to_string() == "net.connect"),
        "nothing was opened"
    );
    let failed = events
        .iter()
        .find(|e| e.kind.to_string() == "mcp.server" && e.data["phase"] == "failed")
        .expect("mcp.server failed");
    assert!(
        failed.data["error"].as_str().unwrap().contains(&rule),
        "{:?}",
        failed.data
    );
}

#[test]
fn a_wildcard_allow_does_not_reach_loopback() {
    let target = recorder();
    let port = target.port;
    let world = World::new(
        "[[rule]]\naction = \"net.connect.1.0.0.127.*\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.everything.*\"\ndecision = \"allow\"\n",
    );
    let err = start_against(&world, port);
    assert!(
        err.contains("`everything`") && err.contains("127.0.0.1"),
        "{err}"
    );
    assert_eq!(target.accepted(), 0, "the address check refused it first");
    let events = world.events();
    let refused = events
        .iter()
        .find(|e| e.kind.to_string() == "net.decision" && e.data["stage"] == "address")
        .expect("the address check is logged");
    assert_eq!(refused.data["decision"], "refuse");
    assert!(
        !events
            .iter()
            .any(|e| e.kind.to_string() == "net.connect" && e.data["phase"] == "open")
    );
}

#[test]
fn a_redirect_is_not_followed_to_another_host() {
    use std::io::{Read, Write};
    // The other destination: allowed by the table, and never connected to.
    let elsewhere = recorder();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let target = elsewhere.port;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{target}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    let world = World::new(&format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{target}\"\ndecision = \"allow\"\n"
    ));
    let err = start_against(&world, port);
    assert!(
        err.contains("`everything`") && err.contains("redirect"),
        "{err}"
    );
    assert_eq!(elsewhere.accepted(), 0, "the redirect was not followed");
}
