//! What the daemon's tests share: a temporary world (a git project, a sessions root, a state and a
//! runtime directory, an empty config.toml), the daemon served in-process on its own socket, and
//! clients that speak the protocol over the real socket or the real loopback port.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_daemon::{DaemonOptions, ServeOptions, Server, serve};
use chock_protocol::rpc::{
    Call, Notice, Notification, Pending, PendingParams, StartParams, Started,
};

/// The daemon's view of the shared hermetic world (`chock_test_support::World`): a git project
/// with a README, and the directories the daemon serves from, where `chock serve` would put them
/// in that world.
pub struct World {
    /// The shared world (its environment, for a program a test starts beside the daemon).
    pub env: chock_test_support::World,
    /// The world's directory (canonical).
    pub base: PathBuf,
    pub project: PathBuf,
    pub sessions: PathBuf,
    pub state: PathBuf,
    pub runtime: PathBuf,
    pub config: PathBuf,
}

impl World {
    pub fn new() -> World {
        let env = chock_test_support::World::with_git_files(&[("README.md", "hello\n")]);
        let config = env.config_toml("");
        World {
            base: env.base.clone(),
            project: env.project.clone(),
            sessions: env.sessions_root(),
            state: env.chock_state(),
            runtime: env.chock_runtime(),
            config,
            env,
        }
    }

    /// Writes the project's chock.toml and commits it.
    pub fn policy(&self, toml: &str) {
        self.env.write("chock.toml", toml);
        self.env.git(&["add", "chock.toml"]);
        self.env.git(&["commit", "-qm", "policy"]);
    }

    /// Writes a recording and returns its `script:FILE` provider spec.
    pub fn script(&self, name: &str, toml: &str) -> String {
        self.env.script_named(name, toml)
    }

    pub fn options(&self, host: Option<&str>, queue: usize) -> ServeOptions {
        ServeOptions {
            daemon: DaemonOptions {
                sessions_root: self.sessions.clone(),
                state_dir: self.state.clone(),
                config: Some(self.config.clone()),
                queue,
                max_turns: 20,
            },
            runtime_dir: self.runtime.clone(),
            group: None,
            host: host.map(str::to_string),
        }
    }

    /// The daemon, in this process, on the world's socket.
    pub async fn serve(&self) -> Server {
        serve(self.options(None, chock_daemon::DEFAULT_QUEUE))
            .await
            .unwrap()
    }

    pub async fn client(&self, server: &Server) -> DaemonClient {
        DaemonClient::unix(server.socket()).await.unwrap()
    }

    pub fn log_lines(&self, session: &str) -> Vec<serde_json::Value> {
        self.env.log_lines(session)
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub async fn start(
    client: &mut DaemonClient,
    world: &World,
    provider: &str,
    task: &str,
) -> Started {
    client
        .call(&Call::SessionsStart(StartParams {
            task: task.into(),
            project: world.project.display().to_string(),
            provider: Some(provider.into()),
            model: None,
            subscribe: false,
        }))
        .await
        .unwrap()
}

/// Waits (up to 60 s) until `approvals.pending` lists a question of `session`.
pub async fn pending_question(client: &mut DaemonClient, session: &str) -> Pending {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pending: Pending = client
            .call(&Call::ApprovalsPending(PendingParams {
                session: Some(session.into()),
            }))
            .await
            .unwrap();
        if !pending.approvals.is_empty() {
            return pending;
        }
        assert!(Instant::now() < deadline, "no question was asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads notifications until `pick` takes one (60 s at most).
pub async fn until<T>(client: &mut DaemonClient, mut pick: impl FnMut(&Notice) -> Option<T>) -> T {
    let wait = async {
        loop {
            let n: Notification = client.next_notice().await.unwrap();
            if let Some(found) = pick(&n.notice().unwrap()) {
                return found;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("the notification never came")
}

/// A recording whose one command the world's chock.toml asks about, then a closing text.
pub const ASKING: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo ran > made-by-the-command" }

[[turn]]
text = "done"
"#;

/// The rule that makes [`ASKING`]'s command a question.
pub const ASK_SH: &str = "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n";

/// Whether this test runs as root (the other-uid tests need to switch users).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// `sessions.list` as one JSON-RPC request body.
pub const LIST_REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"sessions.list"}"#;

/// Posts [`LIST_REQUEST`] to the daemon's `/rpc` over `socket` with curl, run under `prefix` (a
/// program and its arguments that run curl as another uid, or in another namespace): curl's exit
/// status and everything it printed.
pub fn curl_list(prefix: &[&str], socket: &Path) -> (i32, String) {
    let out = std::process::Command::new(prefix[0])
        .args(&prefix[1..])
        .args(["curl", "-s", "-S", "-m", "10", "--unix-socket"])
        .arg(socket)
        .args([
            "-H",
            "Content-Type: application/json",
            "-H",
            "X-Chock: 1",
            "-d",
            LIST_REQUEST,
            "http://localhost/rpc",
        ])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}
