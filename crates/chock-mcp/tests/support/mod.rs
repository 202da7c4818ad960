//! What the MCP tests share: where the third-party servers are installed (`.ci/run` installs them
//! under `/opt/chock-mcp`, readable by every user; `CHOCK_MCP_PREFIX` moves it), a session over a
//! fresh project, answerers that say yes or no and remember what they were asked.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Pipeline, Question, Role};
use chock_mcp::{Configured, McpHub, Origin, StartContext, TrustStore};
use chock_policy::mcp::RawServer;
use chock_session::{Session, SessionOptions};

/// Where `.ci/run` installs the MCP servers the tests use.
pub fn prefix() -> PathBuf {
    std::env::var_os("CHOCK_MCP_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/chock-mcp"))
}

/// `path` under the prefix, if installed. In CI (`CI=true`) a missing server fails the test.
pub fn installed(relative: &str) -> Option<PathBuf> {
    let path = prefix().join(relative);
    chock_test_support::installed(&path).then_some(path)
}

/// The python of the venv that holds mcp-server-time and the `mcp` package.
pub fn python() -> Option<PathBuf> {
    installed("venv/bin/python")
}

/// The test's own hostile server script.
pub fn hostile_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/hostile.py")
}

/// One answerer with a fixed answer that records every question.
#[derive(Debug)]
pub struct Person {
    pub yes: bool,
    pub asked: Mutex<Vec<Question>>,
    pub reply: Option<String>,
}

impl Answerer for Person {
    fn name(&self) -> String {
        "the test's person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        self.asked.lock().unwrap().push(q.clone());
        let answer = match (&self.reply, q.action.is_none()) {
            (Some(text), true) => Answer::Reply { text: text.clone() },
            _ if self.yes => Answer::AllowOnce {
                reasons: String::new(),
            },
            _ => Answer::Deny {
                reasons: "the test says no".into(),
            },
        };
        Box::pin(async move { Some(answer) })
    }
}

impl Person {
    pub fn new(yes: bool) -> Arc<Person> {
        Arc::new(Person {
            yes,
            asked: Mutex::default(),
            reply: None,
        })
    }

    pub fn questions(&self) -> Vec<Question> {
        self.asked.lock().unwrap().clone()
    }
}

/// A runtime for a test's servers, as a front end's: multi-threaded, so its workers drive them
/// while the test blocks on calls.
pub fn servers_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the servers' runtime")
}

/// A project with `chock_toml`, a session over it and its temp directories, and the runtime its
/// servers run on (as a front end's, it outlives them and its workers drive them while the test
/// calls their tools from runtimes of its own).
pub struct World {
    pub project: tempfile::TempDir,
    pub sessions: tempfile::TempDir,
    pub data: tempfile::TempDir,
    pub session: Session,
    /// Taken on drop and shut down without waiting, so a world may be dropped on an async task
    /// (the conformance adapter's door makes one per request).
    pub runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl World {
    pub fn new(chock_toml: &str) -> World {
        let project = tempfile::tempdir().expect("project");
        std::fs::write(project.path().join("chock.toml"), chock_toml).expect("chock.toml");
        std::fs::write(project.path().join("README"), "the real project\n").expect("README");
        let sessions = tempfile::tempdir().expect("sessions");
        let data = tempfile::tempdir().expect("data");
        let session = Session::open(
            project.path(),
            SessionOptions {
                sessions_root: Some(sessions.path().to_path_buf()),
                ..SessionOptions::default()
            },
        )
        .expect("open the session");
        World {
            project,
            sessions,
            data,
            session,
            runtime: Some(servers_runtime()),
        }
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the world's runtime lives as long as it")
    }

    pub fn trust_path(&self) -> PathBuf {
        self.data.path().join("mcp-trust.json")
    }

    /// The session's pipeline with `person` (or nobody) to ask.
    pub fn pipeline(&self, person: Option<Arc<Person>>) -> Pipeline {
        let mut broker = ApprovalBroker::new();
        if let Some(p) = person {
            broker = broker.with(p);
        }
        self.session.pipeline(broker)
    }

    /// The servers the project's chock.toml configures.
    pub fn project_servers(&self) -> Vec<Configured> {
        chock_mcp::configured(self.session.policy(), self.project.path(), &[], None)
    }

    pub fn start(
        &self,
        servers: &[Configured],
        pipeline: &Pipeline,
        trusting: bool,
        sampler: Option<Arc<dyn chock_mcp::Sampler>>,
    ) -> McpHub {
        self.start_with(servers, pipeline, trusting, sampler, None, None)
    }

    /// [`World::start`] with a browser to sign in again mid-session.
    pub fn start_with(
        &self,
        servers: &[Configured],
        pipeline: &Pipeline,
        trusting: bool,
        sampler: Option<Arc<dyn chock_mcp::Sampler>>,
        browser: Option<Arc<dyn chock_oauth::Browser>>,
        sign_in_transport: Option<Arc<dyn chock_oauth::DynTransport>>,
    ) -> McpHub {
        let trust = TrustStore::open(&self.trust_path()).expect("trust file");
        let cx = StartContext {
            pipeline: pipeline.clone(),
            sampler,
            trust: Arc::new(Mutex::new(trust)),
            trusting,
            network: chock_broker::BrokerConfig::default(),
            browser,
            sign_in_transport,
        };
        self.runtime()
            .block_on(McpHub::start(&self.session, servers, &cx))
            .expect("the hub")
    }

    /// Stops `hub`'s servers on the runtime they run on.
    pub fn stop(&self, hub: &mut McpHub, reason: &str) {
        self.runtime().block_on(hub.stop(reason));
    }

    /// The kinds of the session's log, in order.
    pub fn kinds(&self) -> Vec<String> {
        chock_log::read_events(self.session.log().dir())
            .expect("read the log")
            .iter()
            .map(|e| e.kind.to_string())
            .collect()
    }

    pub fn events(&self) -> Vec<chock_log::Event> {
        chock_log::read_events(self.session.log().dir()).expect("read the log")
    }
}

/// A server of the person's own config.toml (trusted as written).
pub fn user_server(name: &str, raw: &RawServer) -> Configured {
    let def = raw
        .check(Path::new("config.toml"), name)
        .expect("a valid server");
    Configured::new(
        def,
        Origin::User {
            file: "config.toml".into(),
        },
    )
}

/// `[mcp.servers.NAME]` for a python script of the venv.
pub fn python_server(script: &Path, args: &[&str]) -> Option<RawServer> {
    let python = python()?;
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    Some(RawServer {
        command: Some(python.display().to_string()),
        args: all,
        read: vec![prefix(), script.parent().unwrap().to_path_buf()],
        ..RawServer::default()
    })
}

/// Serves `app` on a loopback port of its own (an authorization server or a resource of the
/// test's): its origin, `http://127.0.0.1:PORT`.
pub async fn serve_app(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The `Authorization` header a test server received, if any.
pub fn authorization_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string())
}
