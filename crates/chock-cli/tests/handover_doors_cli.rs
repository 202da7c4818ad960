//! A moved background command's doors to the host move with it (docs/handover.md, "Background
//! commands move"), as real processes: a `chock run` starts a background command that waits for
//! a loopback server to let it through the call's egress proxy; the session is moved to the
//! daemon and the `chock run` SIGKILLed; only then does the server answer. The command's
//! connection, its git (through the shim and the call's host channel) and a forbidden system
//! call it makes are all served by the daemon: the connection is settled and reaches the server,
//! git answers, and the forbidden call kills its process, as the first owner would have.
//!
//! Each door fails this test without the move: the old owner's proxy listener, channel and
//! seccomp listener closed with it, so the connection is refused (the command gives up), the
//! shim gets no answer, and the forbidden call is answered `ENOSYS` (the process goes on).

mod handover_support;
mod run_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use chock_protocol::rpc::SessionState;
use handover_support::*;
use run_support::*;

/// A loopback HTTP server that answers 503 until it is opened, then 200 with a body; it counts
/// the requests it let through.
struct Gate {
    port: u16,
    open: Arc<AtomicBool>,
    through: Arc<AtomicUsize>,
}

impl Gate {
    fn start() -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(false));
        let through = Arc::new(AtomicUsize::new(0));
        let (o, t) = (Arc::clone(&open), Arc::clone(&through));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut head = [0u8; 2048];
                let _ = conn.read(&mut head);
                let reply = if o.load(Ordering::SeqCst) {
                    t.fetch_add(1, Ordering::SeqCst);
                    "HTTP/1.0 200 OK\r\nContent-Length: 15\r\n\r\nafter the move\n"
                } else {
                    "HTTP/1.0 503 Wait\r\nContent-Length: 0\r\n\r\n"
                };
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        Gate {
            port,
            open,
            through,
        }
    }
}

fn script(port: u16) -> String {
    format!(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "for i in $(seq 1 150); do curl -sf --max-time 5 http://127.0.0.1:{port}/ && break; sleep 0.2; done; git rev-parse --is-inside-work-tree; perl -e 'syscall(321, 0, 0, 0); print qq(survived\\n)'", background = true, timeout_secs = 120 }}

[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "sleep 2" }}

[[turn]]
text = "it waits in the background"

[[turn]]
[[turn.call]]
tool = "read_output"
input = {{ handle = "bg-play_1_1" }}
expect = {{ contains = "after the move" }}

[[turn]]
text = "the follow-up, answered by the daemon"
"#
    )
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_moved_background_commands_connection_git_and_seccomp_watch_are_served_by_the_new_owner() {
    if !chock_test_support::installed("/usr/bin/curl")
        || !chock_test_support::installed("/usr/bin/perl")
    {
        return;
    }
    let gate = Gate::start();
    let w = World::with_git_project_and_policy(Some(&format!(
        "[[rule]]\naction = \"exec.system.curl\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"exec.system.perl\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n",
        gate.port
    )));
    let _daemon = Daemon::start(&w);
    let mut run = chock_run(
        &w,
        &script(gate.port),
        "wait in the background",
        Stdio::null(),
    );
    wait_for_log(&w, "the background command runs", |e| {
        count(e, "tool.result", Some("play_1_1")) == 1
    });
    let id = w.session_id();
    detach(&w);
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    wait_for_log(&w, "the daemon took the session over", |e| {
        count(e, "session.handover", None) == 1
    });
    // Only now is the command let through: its next connection reaches the daemon's proxy.
    gate.open.store(true, Ordering::SeqCst);
    rt().block_on(async {
        let mut client = connect(&w).await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        wait_for_log(&w, "the daemon records the command's end", |e| {
            e.iter()
                .any(|(k, _, d)| k == "note" && d["about"] == "background_ended")
        });
        send_input(&mut client, &id, "what did it print?").await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        end_session(&mut client, &id).await;
    });
    let out = std::fs::read_to_string(w.session().join("background/bg-play_1_1.stdout")).unwrap();
    // The egress door: the connection made after the move was settled and reached the server.
    assert!(out.contains("after the move"), "{out}");
    assert_eq!(gate.through.load(Ordering::SeqCst), 1);
    // The channel door: git, through the shim, was answered by the daemon.
    assert!(out.contains("true\n"), "{out}");
    // The seccomp door: the forbidden call killed perl before it could print.
    assert!(!out.contains("survived"), "{out}");
    let events = w.events_exact();
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    let result = events[at..]
        .iter()
        .find(|(k, c, _)| k == "command.result" && c.as_deref() == Some("play_1_1"))
        .map(|(_, _, d)| d)
        .expect("the daemon records the command's end");
    assert_eq!(result["exit_code"], 128 + 9, "{result}");
    assert_eq!(count(&events, "session.end", None), 1);
    w.assert_log_verifies();
}
