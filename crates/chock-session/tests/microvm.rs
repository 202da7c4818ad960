//! A session with `[sandbox] isolation = "microvm"`: its calls run in a guest with a kernel of
//! its own, and their egress is relayed to the host's broker, which decides each connection by
//! the policy: an allowed loopback host is reached, a refused one is a stream that ended, and
//! nothing is reached directly (the guest has no network device).

#[path = "support/guest.rs"]
mod guest;
mod support;

use std::io::{Read, Write};
use std::path::Path;

use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

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

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_microvm_session_runs_its_calls_in_the_guest_and_its_egress_through_the_broker() {
    if !guest::ready(&["/usr/bin/curl"]) {
        return;
    }
    let allowed = http_server("allowed body");
    let refused = http_server("refused body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let policy = format!(
        "[sandbox]\nisolation = \"microvm\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{allowed}\"\ndecision = \"allow\"\n"
    );
    std::fs::write(project.path().join("chock.toml"), policy).expect("chock.toml");
    let session = Session::open(
        project.path(),
        SessionOptions {
            sessions_root: Some(sessions.path().to_path_buf()),
            ..SessionOptions::default()
        },
    )
    .expect("open the session");
    let guest = session.guest().expect("a microvm session has a guest");
    let release = guest.kernel_release().to_string();
    let script = format!(
        "uname -r; echo written > made.txt; \
         curl -sS -f --max-time 20 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"; \
         curl -sS -f --max-time 20 -p http://127.0.0.1:{allowed}/ ; echo \" tunnel=$?\"; \
         curl -sS -f --max-time 20 http://127.0.0.1:{refused}/ ; echo \" refused=$?\"; \
         curl -sS -f --max-time 20 --noproxy '*' http://127.0.0.1:{allowed}/ ; echo \" direct=$?\""
    );
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let result = support::confined_call(&session, &argv, &CallOptions::default(), &NoApprover)
        .expect("call");
    let CallOutcome::Ran { stdout, stderr, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    assert!(
        stdout.starts_with(&format!("{release}\n")),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("allowed body plain=0"),
        "plain:\n{stdout}\n{stderr}"
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
    // What the call wrote is in the session's workspace, not the project.
    assert!(!Path::new(&project.path().join("made.txt")).exists());
    assert_eq!(guest.monitors().len(), 1);
}
