//! End to end with the real sandbox: a command in a confined call reaches an allowed loopback host on
//! the host only through the broker's proxy (plain HTTP and CONNECT), and fails to reach a refused host
//! or anything directly.

use std::io::Read;
use std::sync::Arc;

use chock_broker::{BrokerConfig, CallProxy, proxy_env};
use chock_decide::RuleGate;
use chock_sandbox::{NetworkPlan, Plan, StdioMode, WorkspaceMount};

/// A tiny HTTP server on the host's loopback answering every request with `body`, on its own thread.
fn http_server(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                use std::io::Write;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    port
}

const PROXY_PORT: u16 = 3128;

#[test]
fn a_confined_command_reaches_only_what_the_broker_allows() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let allowed = http_server("allowed body");
    let refused = http_server("refused body");
    let script = format!(
        "curl -sS -f --max-time 10 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"; \
         curl -sS -f --max-time 10 -p http://127.0.0.1:{allowed}/ ; echo \" tunnel=$?\"; \
         curl -sS -f --max-time 10 http://127.0.0.1:{refused}/ ; echo \" refused=$?\"; \
         curl -sS -f --max-time 10 --noproxy '*' http://127.0.0.1:{allowed}/ ; echo \" direct=$?\""
    );
    let project = tempfile::tempdir().expect("project");
    let mut plan = Plan::builder(
        vec!["/bin/sh".into(), "-c".into(), script],
        WorkspaceMount::Bind {
            source: project.path().to_path_buf(),
        },
        project.path().to_path_buf(),
    )
    .network(NetworkPlan::Proxy { port: PROXY_PORT })
    .timeout(Some(std::time::Duration::from_secs(60)))
    .build();
    plan.env.extend(proxy_env(PROXY_PORT));

    let dir = tempfile::tempdir().expect("log dir");
    let log = chock_log::Log::create(dir.path(), chock_log::SessionHeader::default()).expect("log");
    let gate = Arc::new(RuleGate::new().allow(&format!("net.connect.1.0.0.127.{allowed}")));
    let mut child = chock_sandbox::spawn(&plan, StdioMode::Piped).expect("spawn the confined call");
    let listener = child
        .proxy_listener()
        .expect("the sandbox hands back the proxy listener");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let proxy = CallProxy::start(
        runtime.handle(),
        gate,
        log.clone(),
        BrokerConfig::default(),
        "call-1",
        listener,
    )
    .expect("proxy");
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .take_stdout()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    child
        .take_stderr()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let outcome = child.wait().expect("wait");
    proxy.stop();

    assert_eq!(
        outcome.status,
        chock_sandbox::ExitStatus::Exited(0),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("allowed body plain=0"),
        "plain HTTP through the proxy:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("allowed body tunnel=0"),
        "CONNECT through the proxy:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" refused=22"),
        "the refused host gets 403:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("refused body"), "{stdout}");
    assert!(
        stdout.contains(" direct=7"),
        "a direct connection fails:\n{stdout}\n{stderr}"
    );

    let events = chock_log::read_events(log.dir()).expect("events");
    let refusals = events
        .iter()
        .filter(|e| e.kind.as_str() == "net.decision" && e.data["decision"] == "refuse")
        .count();
    let opened = events.iter().filter(|e| e.data["phase"] == "open").count();
    assert_eq!(
        (refusals, opened),
        (1, 2),
        "one refusal (the refused port), two connections (plain and tunnel)"
    );
}
