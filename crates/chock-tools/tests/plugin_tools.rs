//! Plugin tools through the registry and the toolbox, with a real session (policy file, log,
//! overlay workspace) and the repository's example and hostile plugins built for wasm32-wasip2 and
//! run by real wasmtime: the tool's own act allowed, asked and denied; each door it imports decided
//! as its own act; reads outside the copy, through a symlink out, and writes to the policy refused.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use chock_decide::broker::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_log::{EventData, read_events};
use chock_plugin::testing::{Built, build_plugins};
use chock_protocol::log::PluginEnd;
use chock_session::{Session, SessionOptions};
use chock_tools::ToolOutput;
use chock_tools::dispatch::Toolbox;
use chock_tools::events::NoEvents;
use chock_tools::gate::Decider;
use chock_tools::host::Host;
use serde_json::{Value, json};

fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_plugins(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugins")))
        .as_ref()
}

/// A person who gives their answer after a while.
#[derive(Debug)]
struct Person(Option<Answer>, std::time::Duration);

impl Answerer for Person {
    fn name(&self) -> String {
        "person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(self.1).await;
            self.0.clone()
        })
    }
}

struct Env {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
    toolbox: Toolbox,
    log_dir: PathBuf,
}

/// A project with the example as plugin `demo` and the hostile one as `hostile`, `rules` in its
/// chock.toml, a person answering `answer`, a secret next to the project and a link to it inside.
fn env(built: &Built, rules: &str, answer: Option<Answer>) -> Env {
    env_asking(
        built,
        rules,
        answer.map(|a| Person(Some(a), std::time::Duration::ZERO)),
    )
}

/// As [`env`], with `person` answering.
fn env_asking(built: &Built, rules: &str, person: Option<Person>) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(project.join("plugins")).unwrap();
    std::fs::copy(&built.example, project.join("plugins/demo.wasm")).unwrap();
    std::fs::copy(&built.hostile, project.join("plugins/hostile.wasm")).unwrap();
    std::fs::write(project.join("notes.txt"), "one two\nthree\n").unwrap();
    std::fs::write(base.join("secret.txt"), "the host's secret\n").unwrap();
    std::os::unix::fs::symlink("../secret.txt", project.join("link")).unwrap();
    let digest = |p: &Path| chock_plugin::sha256_hex(&std::fs::read(p).unwrap());
    let policy = format!(
        "{rules}\n[plugins.demo]\npath = \"plugins/demo.wasm\"\nsha256 = \"{}\"\n\n\
         [plugins.hostile]\npath = \"plugins/hostile.wasm\"\nsha256 = \"{}\"\nfuel = 100000000\nmemory_mb = 16\n",
        digest(&project.join("plugins/demo.wasm")),
        digest(&project.join("plugins/hostile.wasm")),
    );
    std::fs::write(project.join("chock.toml"), policy).unwrap();
    let session = Session::open(
        &project,
        SessionOptions {
            sessions_root: Some(base.join("sessions")),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let log_dir = session.log().dir().to_path_buf();
    let tools = chock_tools::plugin::load_all(session.project(), session.policy()).unwrap();
    let host = Arc::new(Host::new(session));
    let mut broker = ApprovalBroker::new();
    if let Some(person) = person {
        broker = broker.with(Arc::new(person));
    }
    let decider = Decider {
        log: host.session().log().clone(),
        policy: host.session().shared_policy(),
        broker,
        sink: Arc::new(NoEvents),
        counts: Arc::default(),
        turn: Arc::default(),
    };
    let mut toolbox = Toolbox::new(Arc::clone(&host), decider, Arc::new(NoEvents));
    for tool in tools {
        toolbox.register_shared(tool).unwrap();
    }
    Env {
        _tmp: tmp,
        base,
        project,
        toolbox,
        log_dir,
    }
}

impl Env {
    async fn call(&mut self, id: &str, tool: &str, input: Value) -> ToolOutput {
        self.toolbox.call(id, tool, &input).await.unwrap()
    }

    /// (kind, data) of every event about call `id`, parsed strictly.
    fn events_of(&self, id: &str) -> Vec<(String, EventData)> {
        read_events(&self.log_dir)
            .unwrap()
            .into_iter()
            .filter(|e| e.call_id.as_deref() == Some(id))
            .map(|e| {
                let data = EventData::parse_exact(e.kind, &e.data)
                    .unwrap_or_else(|err| panic!("seq {}: {err}", e.seq));
                (e.kind.as_str().to_string(), data)
            })
            .collect()
    }

    fn kinds_of(&self, id: &str) -> Vec<String> {
        self.events_of(id).into_iter().map(|(k, _)| k).collect()
    }

    /// (action, allowed) of every decision about call `id`.
    fn decisions_of(&self, id: &str) -> Vec<(String, bool)> {
        self.events_of(id)
            .into_iter()
            .filter_map(|(_, d)| match d {
                EventData::Decision(d) => Some((d.action.unwrap_or_default(), d.allowed)),
                _ => None,
            })
            .collect()
    }

    fn plugin_call_of(&self, id: &str) -> Option<chock_protocol::log::PluginCall> {
        self.events_of(id).into_iter().find_map(|(_, d)| match d {
            EventData::PluginCall(p) => Some(p),
            _ => None,
        })
    }
}

const ALLOW_DEMO: &str = "[[rule]]\naction = \"plugin.demo.tool.*\"\ndecision = \"allow\"\n\
                          [[rule]]\naction = \"plugin.hostile.tool.*\"\ndecision = \"allow\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_tool_runs_and_each_door_it_uses_is_its_own_act() {
    let Some(built) = built() else { return };
    let mut env = env(built, ALLOW_DEMO, None);
    let specs: Vec<String> = env.toolbox.specs().iter().map(|s| s.name.clone()).collect();
    assert!(
        specs.contains(&"plugin__demo__count".to_string()),
        "{specs:?}"
    );
    let out = env
        .call("c1", "plugin__demo__count", json!({"path": "notes.txt"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "notes.txt: 2 lines, 3 words, 14 bytes");
    assert_eq!(
        env.kinds_of("c1"),
        [
            "tool.call",
            "decision",
            "decision",
            "plugin.call",
            "tool.result"
        ]
    );
    assert_eq!(
        env.decisions_of("c1"),
        [
            ("plugin.demo.tool.count".to_string(), true),
            ("fs.read".to_string(), true)
        ]
    );
    let call = env.plugin_call_of("c1").unwrap();
    assert_eq!(call.end, PluginEnd::Returned);
    assert_eq!(call.plugin, "demo");
    assert_eq!(call.log[0].message, "counting notes.txt");
    assert!(
        call.fuel_used > 0 && call.fuel_used < call.fuel_limit,
        "{call:?}"
    );
    assert!(
        call.memory_peak > 0 && call.memory_peak <= call.memory_limit,
        "{call:?}"
    );
}

/// A door is settled on its call's task, not by a thread blocking on the runtime: a call dropped
/// while its door waits for a person's answer takes the question with it, and the yes that would
/// have come later is no decision and lets the plugin read nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_door_of_a_dropped_call_is_never_decided() {
    let Some(built) = built() else { return };
    let rules = format!("{ALLOW_DEMO}[[rule]]\naction = \"fs.read\"\ndecision = \"ask\"\n");
    let later = Person(
        Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
        std::time::Duration::from_millis(800),
    );
    let mut env = env_asking(built, &rules, Some(later));
    let call = env.call("c1", "plugin__demo__count", json!({"path": "notes.txt"}));
    let dropped = tokio::time::timeout(std::time::Duration::from_millis(300), call).await;
    assert!(dropped.is_err(), "the call waits for its door's answer");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // The question dropped unanswered is a refusal (rule 3); the yes never lands.
    assert_eq!(
        env.decisions_of("c1"),
        [
            ("plugin.demo.tool.count".to_string(), true),
            ("fs.read".to_string(), false)
        ],
        "{:?}",
        env.kinds_of("c1")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_the_table_asks_about_runs_only_on_a_yes() {
    let Some(built) = built() else { return };
    // No rule: the shipped `plugin.*` asks.
    let mut env = env(
        built,
        "",
        Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
    );
    let out = env
        .call("c1", "plugin__demo__count", json!({"path": "notes.txt"}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    let kinds = env.kinds_of("c1");
    assert_eq!(
        kinds[..4],
        ["tool.call", "approval.ask", "approval.answer", "decision"]
    );
    let mut env = env_denying(built);
    let out = env
        .call("c2", "plugin__demo__count", json!({"path": "notes.txt"}))
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(
        env.plugin_call_of("c2").is_none(),
        "a refused tool never starts"
    );
}

fn env_denying(built: &Built) -> Env {
    env(
        built,
        "",
        Some(Answer::Deny {
            reasons: String::new(),
        }),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_the_table_denies_never_starts() {
    let Some(built) = built() else { return };
    let rule = "[[rule]]\naction = \"plugin.demo.tool.count\"\ndecision = \"deny\"\n";
    let mut env = env(built, rule, None);
    let out = env
        .call("c1", "plugin__demo__count", json!({"path": "notes.txt"}))
        .await;
    assert!(out.is_error);
    assert!(out.text.contains("plugin.demo.tool.count"), "{}", out.text);
    assert_eq!(env.kinds_of("c1"), ["tool.call", "decision", "tool.result"]);
    assert!(env.plugin_call_of("c1").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_door_refuses_the_call_but_not_the_tool_act() {
    let Some(built) = built() else { return };
    // fs.read asks, and the person says no: the tool's act was allowed, its read is refused.
    let rules = format!("{ALLOW_DEMO}[[rule]]\naction = \"fs.read\"\ndecision = \"ask\"\n");
    let mut env = env(
        built,
        &rules,
        Some(Answer::Deny {
            reasons: String::new(),
        }),
    );
    let out = env
        .call("c1", "plugin__demo__count", json!({"path": "notes.txt"}))
        .await;
    assert!(out.is_error, "{}", out.text);
    assert_eq!(
        env.decisions_of("c1"),
        [
            ("plugin.demo.tool.count".to_string(), true),
            ("fs.read".to_string(), false)
        ]
    );
    assert_eq!(env.plugin_call_of("c1").unwrap().end, PluginEnd::ToolError);
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_outside_the_copy_and_through_a_symlink_out_are_refused() {
    let Some(built) = built() else { return };
    let mut env = env(built, ALLOW_DEMO, None);
    let outside = env.base.join("secret.txt").display().to_string();
    for (i, path) in ["../secret.txt", outside.as_str(), "/etc/passwd", "link"]
        .into_iter()
        .enumerate()
    {
        let id = format!("e{i}");
        let out = env
            .call(&id, "plugin__hostile__escape", json!({ "path": path }))
            .await;
        assert!(out.is_error, "{path}: {}", out.text);
        assert!(
            !out.text.contains("the host's secret"),
            "{path}: {}",
            out.text
        );
        assert!(!out.text.contains("root:"), "{path}: {}", out.text);
        assert_eq!(env.plugin_call_of(&id).unwrap().end, PluginEnd::ToolError);
    }
    // Inside the copy it reads.
    let out = env
        .call(
            "ok",
            "plugin__hostile__escape",
            json!({"path": "notes.txt"}),
        )
        .await;
    assert_eq!(out.text, "one two\nthree\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_land_in_the_copy_and_never_on_the_policy_file() {
    let Some(built) = built() else { return };
    let mut env = env(built, ALLOW_DEMO, None);
    let before = std::fs::read_to_string(env.project.join("chock.toml")).unwrap();
    let out = env
        .call(
            "w1",
            "plugin__hostile__overwrite",
            json!({"path": "chock.toml"}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.contains("chock.toml"), "{}", out.text);
    let out = env
        .call(
            "w2",
            "plugin__demo__save",
            json!({"path": "out/new.txt", "text": "hi"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.changed.contains(&PathBuf::from("out/new.txt")),
        "{:?}",
        out.changed
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("chock.toml")).unwrap(),
        before
    );
    assert!(
        !env.project.join("out/new.txt").exists(),
        "the real project is not written"
    );
    let out = env
        .call(
            "w3",
            "plugin__hostile__escape",
            json!({"path": "out/new.txt"}),
        )
        .await;
    assert_eq!(out.text, "hi", "the copy holds the write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fetch_goes_through_the_broker_and_its_table() {
    let Some(built) = built() else { return };
    let rules = format!("{ALLOW_DEMO}[[rule]]\naction = \"net.fetch.*\"\ndecision = \"deny\"\n");
    let mut env = env(built, &rules, None);
    let out = env
        .call(
            "f1",
            "plugin__hostile__phone_home",
            json!({"url": "http://example.com/"}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert_eq!(
        env.decisions_of("f1"),
        [
            ("plugin.hostile.tool.phone_home".to_string(), true),
            ("net.fetch.com.example".to_string(), false)
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_plugin_is_told_to_the_model_and_logged() {
    let Some(built) = built() else { return };
    let mut env = env(built, ALLOW_DEMO, None);
    let out = env.call("s1", "plugin__hostile__spin", json!({})).await;
    assert!(out.is_error);
    assert!(out.text.contains("fuel"), "{}", out.text);
    assert_eq!(env.plugin_call_of("s1").unwrap().end, PluginEnd::OutOfFuel);
    let out = env.call("s2", "plugin__hostile__hog", json!({})).await;
    assert!(out.text.contains("memory cap"), "{}", out.text);
    assert_eq!(env.plugin_call_of("s2").unwrap().end, PluginEnd::MemoryCap);
    let out = env.call("s3", "plugin__hostile__flood", json!({})).await;
    assert!(out.text.contains("output cap"), "{}", out.text);
    assert!(out.text.len() < 1000);
}
