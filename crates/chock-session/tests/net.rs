//! The confined call and the network: a call gets the egress proxy only when the table lets commands
//! connect somewhere, and then a command reaches an allowed loopback host on the host through the
//! broker, and fails to reach a refused host or anything directly.

use std::io::{Read, Write};
use std::path::Path;

use chock_sandbox::NetworkPlan;
use chock_session::{CallOptions, CallOutcome, NoApprover, PROXY_PORT, Session, SessionOptions};

/// A tiny HTTP server on the host's loopback answering every request with `body`.
fn http_server(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
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

fn session(project: &Path, sessions: &Path, chock_toml: &str) -> Session {
    std::fs::write(project.join("chock.toml"), chock_toml).expect("write chock.toml");
    let options = SessionOptions {
        sessions_root: Some(sessions.to_path_buf()),
        ..SessionOptions::default()
    };
    Session::open(project, options).expect("open session")
}

#[test]
fn a_call_gets_the_proxy_only_when_the_table_allows_a_connection() {
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let argv = vec!["true".to_owned()];

    let closed = session(project.path(), sessions.path(), "");
    let plan = closed.plan_for(&argv, &CallOptions::default());
    assert_eq!(plan.network, NetworkPlan::None);
    assert_eq!(plan.env_var("HTTPS_PROXY"), None);

    let rule = "[[rule]]\naction = \"net.connect.org.example.443\"\ndecision = \"allow\"\n";
    let open = session(project.path(), sessions.path(), rule);
    let plan = open.plan_for(&argv, &CallOptions::default());
    assert_eq!(plan.network, NetworkPlan::Proxy { port: PROXY_PORT });
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert_eq!(plan.env_var(name), Some(url.as_str()), "{name}");
    }
}

#[test]
fn a_command_reaches_an_allowed_host_only_through_the_broker() {
    if !Path::new("/usr/bin/curl").exists() {
        eprintln!("skipped: curl is not installed (CI installs it)");
        return;
    }
    let allowed = http_server("allowed body");
    let refused = http_server("refused body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let rule =
        format!("[[rule]]\naction = \"net.connect.1.0.0.127.{allowed}\"\ndecision = \"allow\"\n");
    let session = session(project.path(), sessions.path(), &rule);
    let script = format!(
        "curl -sS -f --max-time 10 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"; \
         curl -sS -f --max-time 10 -p http://127.0.0.1:{allowed}/ ; echo \" tunnel=$?\"; \
         curl -sS -f --max-time 10 http://127.0.0.1:{refused}/ ; echo \" refused=$?\"; \
         curl -sS -f --max-time 10 --noproxy '*' http://127.0.0.1:{allowed}/ ; echo \" direct=$?\""
    );
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let result = session
        .confined_call(&argv, &CallOptions::default(), &NoApprover)
        .expect("call");
    let CallOutcome::Ran { stdout, stderr, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    assert!(
        stdout.contains("allowed body plain=0"),
        "plain HTTP:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("allowed body tunnel=0"),
        "CONNECT:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" refused=22") && !stdout.contains("refused body"),
        "refused:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(" direct=7"), "direct:\n{stdout}\n{stderr}");

    let events = chock_log::read_events(session.log().dir()).expect("events");
    let net: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str().starts_with("net."))
        .collect();
    assert!(
        net.iter()
            .all(|e| e.call_id.as_deref() == Some(result.call_id.as_str()))
    );
    let refusals = net
        .iter()
        .filter(|e| e.data["decision"] == "refuse")
        .count();
    let closes = net.iter().filter(|e| e.data["phase"] == "close").count();
    assert_eq!((refusals, closes), (1, 2));
    // The proxy's events sit between the call's decision and its result.
    let position = |kind: &str| {
        events
            .iter()
            .position(|e| e.kind.as_str() == kind)
            .expect(kind)
    };
    let first_net = events
        .iter()
        .position(|e| e.kind.as_str().starts_with("net."))
        .expect("net");
    assert!(position("decision") < first_net && first_net < position("tool.result"));
}

#[test]
fn a_ratchet_narrowed_during_the_session_refuses_the_commands_connections() {
    if !Path::new("/usr/bin/curl").exists() {
        eprintln!("skipped: curl is not installed (CI installs it)");
        return;
    }
    let allowed = http_server("allowed body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let rule =
        format!("[[rule]]\naction = \"net.connect.1.0.0.127.{allowed}\"\ndecision = \"allow\"\n");
    let session = session(project.path(), sessions.path(), &rule);
    session
        .shared_policy()
        .write()
        .expect("policy lock")
        .restrict("net.connect.*", chock_policy::Decision::Deny)
        .expect("narrow");
    let script =
        format!("curl -sS -f --max-time 10 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"");
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let result = session
        .confined_call(&argv, &CallOptions::default(), &NoApprover)
        .expect("call");
    let CallOutcome::Ran { stdout, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let stdout = String::from_utf8_lossy(stdout);
    assert!(
        stdout.contains(" plain=22") && !stdout.contains("allowed body"),
        "{stdout}"
    );
}
