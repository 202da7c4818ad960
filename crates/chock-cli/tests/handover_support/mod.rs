//! What the handover tests share: a running daemon and its clients, waits on the log and on the
//! daemon's view of a session, and `chock detach`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_protocol::rpc::{Call, Done, InputParams, SessionList, SessionParams, SessionState};

use crate::run_support::*;

/// A running `chock serve`.
pub struct Daemon(pub Child);

impl Daemon {
    pub fn start(w: &World) -> Daemon {
        Daemon::start_with_env(w, &[])
    }

    /// `chock serve` with `vars` added to its environment (a provider's key), once it listens.
    pub fn start_with_env(w: &World, vars: &[(&str, &str)]) -> Daemon {
        let mut child = w
            .command(&["serve"])
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("chock: serving on "), "{line}");
        Daemon(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Stops the daemon (SIGTERM) and waits for it to exit.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        signal(self.0.id(), rustix::process::Signal::TERM);
        let _ = self.0.wait();
    }
}

pub fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let _ = rustix::process::kill_process(pid, sig);
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A client of the world's daemon.
pub async fn connect(w: &World) -> DaemonClient {
    DaemonClient::unix(&w.runtime.join("chock/daemon.sock"))
        .await
        .unwrap()
}

/// Sends session `id` the follow-up `text` through the daemon.
pub async fn send_input(client: &mut DaemonClient, id: &str, text: &str) {
    let _: Done = client
        .call(&Call::SessionsInput(InputParams {
            session: id.to_string(),
            text: text.into(),
        }))
        .await
        .unwrap();
}

/// Ends session `id` in the daemon.
pub async fn end_session(client: &mut DaemonClient, id: &str) {
    let _: Done = client
        .call(&Call::SessionsEnd(SessionParams {
            session: id.to_string(),
        }))
        .await
        .unwrap();
}

/// Reads `from` a byte at a time until `done` holds of all it read (`what` names it, should the
/// stream end first); all it read.
pub fn read_until(from: &mut impl Read, what: &str, done: impl Fn(&str) -> bool) -> String {
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    while !done(&seen) {
        let n = from.read(&mut byte).unwrap();
        assert!(n > 0, "{what} never came: {seen}");
        seen.push(char::from(byte[0]));
    }
    seen
}

/// Waits (up to a minute) until `ready` holds of the session's log.
pub fn wait_for_log(w: &World, what: &str, ready: impl Fn(&[Logged]) -> bool) -> Vec<Logged> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if !w.sessions().is_empty() {
            let events = w.events();
            if ready(&events) {
                return events;
            }
        }
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The session's state as the daemon lists it.
pub async fn state(client: &mut DaemonClient, id: &str) -> SessionState {
    let list: SessionList = client
        .call(&Call::SessionsList(chock_protocol::rpc::NoParams {}))
        .await
        .unwrap();
    list.sessions
        .into_iter()
        .find(|s| s.session == id)
        .map(|s| s.state)
        .unwrap()
}

/// Waits (up to a minute) until the daemon lists the session as `want`.
pub async fn wait_state(client: &mut DaemonClient, id: &str, want: SessionState) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let now = state(client, id).await;
        if now == want {
            return;
        }
        assert_ne!(now, SessionState::Ended, "session {id} ended");
        assert!(
            Instant::now() < until,
            "session {id} stayed {now:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn count(events: &[Logged], kind: &str, call: Option<&str>) -> usize {
    events
        .iter()
        .filter(|(k, c, _)| k == kind && (call.is_none() || c.as_deref() == call))
        .count()
}

pub fn handovers(events: &[Logged]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|(k, _, _)| k == "session.handover")
        .map(|(_, _, d)| d.clone())
        .collect()
}

/// Starts `chock run` on `task` with the recording `script`, its standard input `stdin`.
pub fn chock_run(w: &World, script: &str, task: &str, stdin: Stdio) -> Child {
    let provider = w.script(script);
    w.command(&["run", "--provider", &provider, task])
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `chock detach` of the world's one session: it succeeds and says where the session went.
pub fn detach(w: &World) {
    let id = w.session_id();
    let out = w.chock(&["detach", &id]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("now runs in the daemon"),
        "{}",
        text(&out.stdout)
    );
}

/// What the background command prints on stdout: 60 numbered lines, one each 0.1 s (then a word
/// on stderr).
pub fn lines() -> String {
    (1..=60).map(|i| format!("line {i}\n")).collect()
}

/// The session has ended: its keeper ended with it (within a few seconds; not the half minute an
/// ownerless keeper waits), so nothing answers on its socket.
pub fn assert_keeper_gone(w: &World) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while chock_sandbox::keeper::connect(&w.session())
        .unwrap()
        .is_some()
    {
        assert!(
            std::time::Instant::now() < until,
            "the keeper outlived the session"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
