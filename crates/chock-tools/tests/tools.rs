//! The tools through the registry and the toolbox, with a real session (policy file, log, overlay
//! workspace): a tool registered at run time is offered, decided and run without the loop knowing
//! it; every built-in tool still works; every call is on record as call → decision → result, and
//! every event parses strictly as its protocol type.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chock_decide::broker::ApprovalBroker;
use chock_log::{EventData, LogError, read_events};
use chock_policy::{Action, ActionError};
use chock_protocol::log::{Note, RatchetChange};
use chock_session::{Session, SessionOptions};
use chock_tools::dispatch::Toolbox;
use chock_tools::events::{AgentEvent, EventSink};
use chock_tools::gate::Decider;
use chock_tools::host::Host;
use chock_tools::schema::for_provider;
use chock_tools::{Access, Act, Effect, Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};

#[derive(Default)]
struct Collect(Mutex<Vec<AgentEvent>>);

impl EventSink for Collect {
    fn emit(&self, event: &AgentEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

struct Env {
    _tmp: tempfile::TempDir,
    toolbox: Toolbox,
    sink: Arc<Collect>,
    log_dir: std::path::PathBuf,
}

fn env(policy: &str) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("chock.toml"), policy).unwrap();
    std::fs::write(project.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let session = Session::open(
        &project,
        SessionOptions {
            sessions_root: Some(base.join("sessions")),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let log_dir = session.log().dir().to_path_buf();
    let host = Arc::new(Host::new(session));
    let sink = Arc::new(Collect::default());
    let decider = Decider {
        log: host.session().log().clone(),
        policy: host.session().shared_policy(),
        broker: ApprovalBroker::new(),
        sink: sink.clone(),
        counts: Arc::default(),
        turn: Arc::default(),
    };
    let toolbox = Toolbox::new(Arc::clone(&host), decider, sink.clone());
    Env {
        _tmp: tmp,
        toolbox,
        sink,
        log_dir,
    }
}

impl Env {
    async fn call(&mut self, id: &str, tool: &str, input: Value) -> ToolOutput {
        self.toolbox.call(id, tool, &input).await.unwrap()
    }

    /// The events about call `id`: (kind, data), each parsed strictly as its protocol type.
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

    fn decision_of(&self, id: &str) -> chock_protocol::log::Decision {
        let decisions: Vec<_> = self
            .events_of(id)
            .into_iter()
            .filter_map(|(_, d)| match d {
                EventData::Decision(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(decisions.len(), 1, "{id}: {decisions:?}");
        decisions.into_iter().next().unwrap()
    }
}

/// A plugin-like tool that a test registers at run time.
#[derive(Debug, Default)]
struct Shout {
    runs: Arc<AtomicUsize>,
}

/// Shout's input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ShoutInput {
    /// What to shout.
    text: String,
}

impl Tool for Shout {
    type Input = ShoutInput;
    fn name(&self) -> &str {
        "shout"
    }
    fn description(&self) -> &str {
        "Say it loudly. Decided as plugin.test.tool.shout."
    }
    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }
    fn access(&self, input: &ShoutInput) -> Result<Access, ActionError> {
        Ok(Access::Acts(vec![Act::new(
            Action::plugin_tool("test", "shout")?,
            format!("shout {:?}", input.text),
        )]))
    }
    async fn run<'a>(
        &'a self,
        _cx: ToolContext<'a>,
        input: ShoutInput,
    ) -> Result<ToolOutput, LogError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok(input.text.to_uppercase()))
    }
}

const ALLOW_SHOUT: &str = "[[rule]]\naction = \"plugin.test.tool.*\"\ndecision = \"allow\"\n";
const DENY_SHOUT: &str = "[[rule]]\naction = \"plugin.test.tool.*\"\ndecision = \"deny\"\n";

#[tokio::test]
async fn a_tool_registered_at_run_time_is_offered_decided_and_run() {
    let mut e = env(ALLOW_SHOUT);
    let shout = Shout::default();
    let runs = Arc::clone(&shout.runs);
    e.toolbox.register(shout).unwrap();
    let spec = e.toolbox.specs().into_iter().find(|s| s.name == "shout");
    let spec = spec.expect("the new tool is offered");
    assert_eq!(
        spec.input_schema,
        for_provider(schemars::schema_for!(ShoutInput))
    );
    let out = e.call("c1", "shout", json!({"text": "hi"})).await;
    assert_eq!(out, ToolOutput::ok("HI".into()));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(e.kinds_of("c1"), ["tool.call", "decision", "tool.result"]);
    let decision = e.decision_of("c1");
    assert_eq!(decision.action.as_deref(), Some("plugin.test.tool.shout"));
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(e.toolbox.calls(), 1);
}

#[tokio::test]
async fn a_refused_act_never_runs_the_tool() {
    let mut e = env(DENY_SHOUT);
    let shout = Shout::default();
    let runs = Arc::clone(&shout.runs);
    e.toolbox.register(shout).unwrap();
    let out = e.call("c1", "shout", json!({"text": "hi"})).await;
    assert!(out.is_error && out.text.contains("denied"), "{}", out.text);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(e.kinds_of("c1"), ["tool.call", "decision", "tool.result"]);
    assert!(!e.decision_of("c1").allowed);
}

#[tokio::test]
async fn an_unknown_tool_and_a_misfit_input_are_refused_on_the_record() {
    let mut e = env("");
    let out = e.call("u1", "rm_rf", json!({"path": "/"})).await;
    assert!(out.is_error);
    assert_eq!(out.text, "there is no tool named rm_rf");
    let out = e.call("b1", "read_file", json!({"path": 7})).await;
    assert!(out.is_error);
    assert!(
        out.text.contains("read_file") && out.text.contains("field `path` must be string"),
        "{}",
        out.text
    );
    let out = e
        .call("b2", "run_command", json!({"timeout_secs": 5}))
        .await;
    assert!(
        out.text.contains("run_command") && out.text.contains("`command` is required"),
        "{}",
        out.text
    );
    for id in ["u1", "b1", "b2"] {
        assert_eq!(
            e.kinds_of(id),
            ["tool.call", "decision", "tool.result"],
            "{id}"
        );
        let decision = e.decision_of(id);
        assert!(
            !decision.allowed && decision.action.is_none(),
            "{decision:?}"
        );
    }
}

#[tokio::test]
async fn every_builtin_tool_still_works_through_the_registry() {
    let mut e = env("");
    let out = e
        .call(
            "w",
            "write_file",
            json!({"path": "notes.md", "content": "one\ntwo\n"}),
        )
        .await;
    assert!(
        !out.is_error && out.text.starts_with("created notes.md"),
        "{}",
        out.text
    );
    let out = e
        .call("r", "read_file", json!({"path": "src/lib.rs"}))
        .await;
    assert!(out.text.contains("     2\tfn b() {}"), "{}", out.text);
    let out = e
        .call(
            "e",
            "edit_file",
            json!({"path": "src/lib.rs", "old": "fn b() {}", "new": "fn c() {}"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let out = e.call("l", "list", json!({})).await;
    assert_eq!(out.text, "chock.toml\nnotes.md\nsrc/\n");
    let out = e.call("g", "glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(out.text, "src/lib.rs\n");
    let out = e.call("s", "grep", json!({"pattern": "fn c"})).await;
    assert_eq!(out.text, "src/lib.rs:2:fn c() {}\n");
    let out = e
        .call(
            "p",
            "update_plan",
            json!({"steps": [{"step": "look"}, {"step": "fix", "status": "in_progress"}]}),
        )
        .await;
    assert_eq!(out.text, "plan updated:\n[pending] look\n[in_progress] fix");
    let out = e
        .call("t", "set_title", json!({"title": "  tidy up  "}))
        .await;
    assert_eq!(out.text, "title set: tidy up");
    assert_eq!(e.toolbox.title().as_deref(), Some("tidy up"));
    let out = e
        .call("h", "read_guidance", json!({"topic": "editing"}))
        .await;
    assert!(out.text.starts_with("# "), "{}", out.text);
    let out = e.call("a", "ask_user", json!({"question": "which?"})).await;
    assert!(out.text.starts_with("no answer"), "{}", out.text);
    let out = e.call("o", "read_output", json!({"handle": "bg-x"})).await;
    assert!(out.is_error && out.text.contains("no background command bg-x"));
    let out = e
        .call(
            "n",
            "restrict_self",
            json!({"action": "fs.write", "decision": "deny"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.text);
    let out = e
        .call("w2", "write_file", json!({"path": "x", "content": ""}))
        .await;
    assert!(out.is_error && out.text.contains("ratchet"), "{}", out.text);
    let out = e
        .call(
            "q",
            "request_action",
            json!({"action": "workspace.apply", "reason": "done"}),
        )
        .await;
    assert!(
        out.is_error && out.text.contains("chock workspace adopt"),
        "{}",
        out.text
    );
    let out = e.call("f", "web_search", json!({"query": "chock"})).await;
    assert!(out.is_error, "no search backend: {}", out.text);

    for id in [
        "w", "r", "e", "l", "g", "s", "p", "t", "h", "a", "o", "n", "w2", "q", "f",
    ] {
        let kinds = e.kinds_of(id);
        assert_eq!(
            kinds.first().map(String::as_str),
            Some("tool.call"),
            "{id}: {kinds:?}"
        );
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("tool.result"),
            "{id}: {kinds:?}"
        );
        let decided = kinds.iter().position(|k| k == "decision");
        assert!(decided.is_some(), "{id}: every call is decided: {kinds:?}");
    }
    let ratchet = e.events_of("n").into_iter().find_map(|(_, d)| match d {
        EventData::Note(Note::Ratchet {
            change, pattern, ..
        }) => Some((change, pattern)),
        _ => None,
    });
    assert_eq!(
        ratchet,
        Some((RatchetChange::Restrict, "fs.write".to_string()))
    );
    let changed = |id: &str| {
        e.events_of(id).into_iter().find_map(|(_, d)| match d {
            EventData::ToolResult(r) => Some(r.changed),
            _ => None,
        })
    };
    assert_eq!(changed("w"), Some(vec!["notes.md".to_string()]));
    assert_eq!(changed("e"), Some(vec!["src/lib.rs".to_string()]));
    assert_eq!(
        changed("w2"),
        Some(vec![]),
        "a refused write changed nothing"
    );
    let events = e.sink.0.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|ev| matches!(ev, AgentEvent::PlanUpdated { steps } if steps.len() == 2))
    );
    assert!(
        events
            .iter()
            .any(|ev| matches!(ev, AgentEvent::TitleSet { title } if title == "tidy up"))
    );
}

/// A subdirectory's AGENTS.md reaches the model when it first works there: the first file tool
/// under `src/` names `src/AGENTS.md` after its own output, later ones do not repeat it, and
/// reading the notes themselves counts as being pointed to them.
#[tokio::test]
async fn the_agents_md_of_a_subdirectory_is_named_once_when_the_model_first_works_there() {
    let mut e = env("");
    let project = e._tmp.path().canonicalize().unwrap().join("project");
    std::fs::create_dir_all(project.join("docs")).unwrap();
    std::fs::write(project.join("src/AGENTS.md"), "use tabs").unwrap();
    std::fs::write(project.join("docs/AGENTS.md"), "be brief").unwrap();
    let note = "[src/AGENTS.md holds notes for the files under src/";
    let first = e
        .call("r1", "read_file", json!({"path": "src/lib.rs"}))
        .await;
    assert!(!first.is_error, "{}", first.text);
    assert!(first.text.contains(note), "{}", first.text);
    let again = e.call("r2", "list", json!({"path": "src"})).await;
    assert!(!again.text.contains(note), "named once: {}", again.text);
    let notes = e
        .call("r3", "read_file", json!({"path": "docs/AGENTS.md"}))
        .await;
    assert!(notes.text.contains("be brief"), "{}", notes.text);
    assert!(!notes.text.contains("holds notes"), "{}", notes.text);
    let docs = e.call("r4", "list", json!({"path": "docs"})).await;
    assert!(!docs.text.contains("holds notes"), "{}", docs.text);
}

/// A process the sandbox's seccomp filter kills: the tool result names the forbidden call (here
/// `bpf`, number 321 on x86_64, through perl's `syscall`) instead of a bare exit status.
#[cfg(target_arch = "x86_64")]
#[tokio::test]
async fn the_tool_result_names_a_call_the_filter_killed() {
    let mut e = env("");
    let out = e
        .call(
            "k",
            "run_command",
            json!({"command": "perl -e 'syscall(321, 0, 0, 0); print qq(survived)'"}),
        )
        .await;
    assert!(out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with("exit status 137\n")
            && out.text.contains(
                "seccomp filter killed a process of the call: it made the system call `bpf`"
            )
            && !out.text.contains("survived"),
        "{}",
        out.text
    );
}
