//! The session runtime at library level: follow-ups, interrupts (during a model stream and during
//! a running command, whose process tree must be gone), resume after the process was killed, and
//! `session.end` on every way out. The model is the offline player or a loopback server speaking
//! the Chat Completions wire format; everything else is real (sandbox, log, workspace).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_agent::agent::TaskEnd;
use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_log::{EventData, EventKind, read_events};
use chock_protocol::log::{EndReason, TurnEndReason};
use chock_test_support::wire::{FakeServer, Framing, Reply, chat_sse};
use chock_tools::events::AgentEvent;

/// A project (a git repository with one file), a sessions root, and a recording.
struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    sessions: PathBuf,
    dir: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let sessions = tmp.path().join("sessions");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("README.md"), "hello\n").unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&project)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ]);
        let dir = tmp.path().to_path_buf();
        Env {
            _tmp: tmp,
            project,
            sessions,
            dir,
        }
    }

    /// Writes a recording and returns the `script:FILE` provider spec.
    fn script(&self, name: &str, toml: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, toml).unwrap();
        format!("script:{}", path.display())
    }

    fn builder(&self, config: Config, provider: &str) -> SessionBuilder {
        SessionBuilder::new(config)
            .provider(Some(provider.to_string()))
            .project(Some(self.project.clone()))
            .sessions_root(Some(self.sessions.clone()))
    }
}

fn no_config() -> Config {
    Config::parse("", Path::new("config.toml")).unwrap()
}

/// Every payload of the log, parsed strictly (a writer's stray field fails here).
fn payloads(dir: &Path) -> Vec<(EventKind, EventData)> {
    read_events(dir)
        .unwrap()
        .into_iter()
        .map(|e| {
            let data = EventData::parse_exact(e.kind, &e.data)
                .unwrap_or_else(|err| panic!("line {}: {err}", e.seq));
            (e.kind, data)
        })
        .collect()
}

fn session_end(dir: &Path) -> Vec<EndReason> {
    payloads(dir)
        .into_iter()
        .filter_map(|(_, d)| match d {
            EventData::SessionEnd(end) => Some(end.reason),
            _ => None,
        })
        .collect()
}

/// A sink that keeps every live event, and the list it keeps them in.
fn collecting() -> (
    Arc<Mutex<Vec<AgentEvent>>>,
    Arc<dyn chock_tools::events::EventSink>,
) {
    let events: Arc<Mutex<Vec<AgentEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    let sink = move |event: &AgentEvent| seen.lock().unwrap().push(event.clone());
    (events, Arc::new(sink))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_follow_up_goes_on_in_the_same_session_with_the_conversation_kept() {
    let env = Env::new();
    let spec = env.script(
        "two.toml",
        r#"
[[turn]]
text = "first answer"

[[turn]]
text = "second answer"
"#,
    );
    let rt = runtime();
    let mut session = env.builder(no_config(), &spec).build().unwrap();
    let dir = session.log().dir().to_path_buf();
    rt.block_on(async {
        assert_eq!(session.submit("the task").await.unwrap(), TaskEnd::Done);
        assert_eq!(session.submit("a follow-up").await.unwrap(), TaskEnd::Done);
        assert_eq!(session.conversation().len(), 4, "user, model, user, model");
        let summary = session.end(EndReason::Done).await.unwrap();
        assert_eq!(summary.turns, 2);
    });
    let events = payloads(&dir);
    let inputs: Vec<Option<String>> = events
        .iter()
        .filter_map(|(_, d)| match d {
            EventData::TurnStart(t) => Some(t.input.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs,
        vec![Some("the task".into()), Some("a follow-up".into())]
    );
    let sizes: Vec<usize> = events
        .iter()
        .filter_map(|(_, d)| match d {
            EventData::ModelRequest(r) => Some(r.messages),
            _ => None,
        })
        .collect();
    assert_eq!(
        sizes,
        vec![1, 3],
        "the follow-up carries the first task's exchange"
    );
    assert_eq!(session_end(&dir), vec![EndReason::Done]);
}

#[test]
fn dropping_the_runtime_still_writes_session_end() {
    let env = Env::new();
    let spec = env.script("one.toml", "[[turn]]\ntext = \"ok\"\n");
    let session = env.builder(no_config(), &spec).build().unwrap();
    let dir = session.log().dir().to_path_buf();
    drop(session);
    assert_eq!(session_end(&dir), vec![EndReason::Interrupted]);
}

/// Host pids of the processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
        {
            found.push(pid);
        }
    }
    found
}

#[test]
fn an_interrupt_during_a_command_kills_its_whole_process_tree_and_is_logged() {
    let env = Env::new();
    // Two processes deep: the shell and a backgrounded sleeper it waits for.
    let marker = "314159";
    let spec = env.script(
        "sleep.toml",
        &format!(
            r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "sleep {marker}1 & sleep {marker}2; wait", timeout_secs = 600 }}

[[turn]]
text = "after the interrupt"
"#
        ),
    );
    let rt = runtime();
    let mut session = env.builder(no_config(), &spec).build().unwrap();
    let dir = session.log().dir().to_path_buf();
    let interrupter = session.interrupter();
    let watcher = std::thread::spawn(move || {
        let start = Instant::now();
        while processes_with(&format!("sleep {marker}2")).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the command never ran"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        interrupter.interrupt();
    });
    let end = rt.block_on(session.submit("run it"));
    watcher.join().unwrap();
    assert_eq!(end.unwrap(), TaskEnd::Interrupted);
    let start = Instant::now();
    while !processes_with(&format!("sleep {marker}")).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "processes of the interrupted command outlived it: {:?}",
            processes_with(&format!("sleep {marker}"))
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let events = payloads(&dir);
    assert!(events.iter().any(|(_, d)| matches!(
        d,
        EventData::TurnEnd(t) if t.reason == TurnEndReason::Interrupted
    )));
    assert!(
        events.iter().any(|(_, d)| matches!(
            d,
            EventData::CommandResult(chock_protocol::log::CommandResult::Ran { .. })
        )),
        "the killed command's result is logged"
    );
    // The conversation stays valid: the follow-up is answered by the next recorded turn.
    rt.block_on(async {
        assert_eq!(session.submit("go on").await.unwrap(), TaskEnd::Done);
        session.end(EndReason::Done).await.unwrap();
    });
}

/// The shared fake model speaking Chat Completions on loopback: it starts a reply and then
/// stalls, the connection held open.
fn stalling_server(rt: &tokio::runtime::Runtime) -> (String, FakeServer) {
    let body = chat_sse(&[
        r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"thinking about it"},"finish_reason":null}]}"#,
    ]);
    let stalled = body.len();
    let reply = Reply::sse(body)
        .framing(Framing::CloseDelimited)
        .stall_after(stalled);
    let server = rt.block_on(FakeServer::start(vec![reply]));
    (format!("{}/v1", server.base_url()), server)
}

#[test]
fn an_interrupt_during_the_model_stream_stops_it_and_is_logged() {
    let env = Env::new();
    let rt = runtime();
    let (base, server) = stalling_server(&rt);
    let config = Config::parse(
        &format!(
            "[providers.loopback-stall]\nkind = \"openai-chat\"\nbase_url = \"{base}\"\nmodel = \"m\"\n"
        ),
        Path::new("config.toml"),
    )
    .unwrap();
    let streamed = Arc::new(Mutex::new(false));
    let seen = Arc::clone(&streamed);
    let sink = move |event: &AgentEvent| {
        if matches!(event, AgentEvent::Text { .. }) {
            *seen.lock().unwrap() = true;
        }
    };
    let mut session = env
        .builder(config, "loopback-stall")
        .sink(Arc::new(sink))
        .build()
        .unwrap();
    let dir = session.log().dir().to_path_buf();
    let interrupter = session.interrupter();
    let watcher = std::thread::spawn(move || {
        let start = Instant::now();
        while !*streamed.lock().unwrap() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "nothing streamed"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        interrupter.interrupt();
    });
    let end = rt.block_on(session.submit("think"));
    watcher.join().unwrap();
    assert_eq!(end.unwrap(), TaskEnd::Interrupted);
    rt.block_on(session.end(EndReason::Interrupted)).unwrap();
    assert_eq!(
        server.requests().len(),
        1,
        "one request, whose reply stalled"
    );
    let events = payloads(&dir);
    assert!(
        !events.iter().any(|(k, _)| *k == EventKind::ModelResponse),
        "no reply was recorded"
    );
    assert!(events.iter().any(|(_, d)| matches!(
        d,
        EventData::TurnEnd(t) if t.reason == TurnEndReason::Interrupted
    )));
    assert_eq!(session_end(&dir), vec![EndReason::Interrupted]);
}

const CHILD: &str = "CHOCK_RUNTIME_TEST_CHILD";

/// Runs in a child process (see the test below): starts a session whose command sleeps, prints
/// the session directory, and waits to be killed.
#[test]
fn child_session_that_gets_killed() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let project = PathBuf::from(std::env::var("CHOCK_TEST_PROJECT").unwrap());
    let sessions = PathBuf::from(std::env::var("CHOCK_TEST_SESSIONS").unwrap());
    let mut session = SessionBuilder::new(no_config())
        .provider(Some(spec))
        .project(Some(project))
        .sessions_root(Some(sessions))
        .build()
        .unwrap();
    println!("SESSION {}", session.log().dir().display());
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let _ = runtime().block_on(session.submit("sleep, then be killed"));
    std::process::exit(3);
}

#[test]
fn a_session_killed_mid_command_is_resumed_from_its_log() {
    let env = Env::new();
    let spec = env.script(
        "resume.toml",
        r#"
[[turn]]
text = "starting"
[[turn.call]]
tool = "run_command"
input = { command = "echo before > made.txt; sleep 271828", timeout_secs = 600 }

[[turn]]
text = "resumed and done"
"#,
    );
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_session_that_gets_killed", "--nocapture"])
        .env(CHILD, &spec)
        .env("CHOCK_TEST_PROJECT", &env.project)
        .env("CHOCK_TEST_SESSIONS", &env.sessions)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut dir = None;
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 {
        if let Some(d) = line.trim().strip_prefix("SESSION ") {
            dir = Some(PathBuf::from(d));
            break;
        }
        line.clear();
    }
    let dir = dir.expect("the child named its session");
    let start = Instant::now();
    while processes_with("sleep 271828").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // kill -9: no destructor, no session.end.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(session_end(&dir).is_empty());

    let rt = runtime();
    let mut session = env.builder(no_config(), &spec).resume(&dir).unwrap();
    // The model's call gets a result (it never finished), then the follow-up.
    assert_eq!(session.conversation().len(), 3);
    rt.block_on(async {
        assert_eq!(session.submit("carry on").await.unwrap(), TaskEnd::Done);
        session.end(EndReason::Done).await.unwrap();
    });
    assert_eq!(session_end(&dir), vec![EndReason::Done]);
    let report = chock_log::verify(&dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // The workspace is the one it had: the file the command wrote before it was killed.
    let diff = chock_workspace::Workspace::open(&dir)
        .unwrap()
        .diff()
        .unwrap();
    assert!(diff.files.iter().any(|f| f.path == "made.txt"));
}

/// edit_file refuses lines the model was never shown; a resumed session knows what it was shown
/// before, from the log.
#[test]
fn a_resumed_session_remembers_which_lines_the_model_was_shown() {
    let env = Env::new();
    let spec = env.script(
        "seen.toml",
        r#"
[[turn]]
[[turn.call]]
tool = "read_file"
input = { path = "README.md" }

[[turn]]
text = "read it"

[[turn]]
[[turn.call]]
tool = "edit_file"
input = { path = "README.md", old = "hello", new = "goodbye" }
expect = { is_error = false }

[[turn]]
text = "edited it"
"#,
    );
    let rt = runtime();
    let mut first = env.builder(no_config(), &spec).build().unwrap();
    let dir = first.log().dir().to_path_buf();
    rt.block_on(async {
        assert_eq!(
            first.submit("read the readme").await.unwrap(),
            TaskEnd::Done
        );
        first.end(EndReason::Done).await.unwrap();
    });
    let mut resumed = env.builder(no_config(), &spec).resume(&dir).unwrap();
    // The read's result is in the rebuilt conversation once, as the model was sent it.
    let results: Vec<&str> = resumed
        .conversation()
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            chock_provider::Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{:?}", resumed.conversation());
    rt.block_on(async {
        assert_eq!(resumed.submit("now edit it").await.unwrap(), TaskEnd::Done);
        resumed.end(EndReason::Done).await.unwrap();
    });
    let results: Vec<(String, bool)> = payloads(&dir)
        .into_iter()
        .filter_map(|(_, d)| match d {
            EventData::ToolResult(r) => Some((r.tool, r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![("read_file".into(), false), ("edit_file".into(), false)],
        "the edit was allowed: the resumed session knew the line was shown"
    );
}

/// A tool beyond the built-in ones (what an MCP server or a plugin will be).
#[derive(Debug)]
struct Shout;

/// Shout's input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ShoutInput {
    /// What to shout.
    text: String,
}

impl chock_tools::Tool for Shout {
    type Input = ShoutInput;
    fn name(&self) -> &str {
        "shout"
    }
    fn description(&self) -> &str {
        "Say it loudly."
    }
    fn effect(&self) -> chock_tools::Effect {
        chock_tools::Effect::ReadOnly
    }
    fn access(&self, input: &ShoutInput) -> Result<chock_tools::Access, chock_policy::ActionError> {
        Ok(chock_tools::Access::Acts(vec![chock_tools::Act::new(
            chock_policy::Action::plugin_tool("test", "shout")?,
            format!("shout {:?}", input.text),
        )]))
    }
    async fn run<'a>(
        &'a self,
        _cx: chock_tools::ToolContext<'a>,
        input: ShoutInput,
    ) -> Result<chock_tools::ToolOutput, chock_log::LogError> {
        Ok(chock_tools::ToolOutput::ok(input.text.to_uppercase()))
    }
}

#[test]
fn a_tool_handed_to_the_builder_is_offered_decided_by_the_table_and_run() {
    let env = Env::new();
    std::fs::write(
        env.project.join("chock.toml"),
        "[[rule]]\naction = \"plugin.test.tool.*\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let spec = env.script(
        "shout.toml",
        r#"
tools = ["shout"]

[[turn]]
[[turn.call]]
tool = "shout"
input = { text = "hello" }
expect = { contains = "HELLO" }

[[turn]]
text = "shouted"
"#,
    );
    let rt = runtime();
    let mut session = env
        .builder(no_config(), &spec)
        .tool(Arc::new(Shout))
        .build()
        .unwrap();
    let dir = session.log().dir().to_path_buf();
    rt.block_on(async {
        assert_eq!(session.submit("shout").await.unwrap(), TaskEnd::Done);
        session.end(EndReason::Done).await.unwrap();
    });
    let decided: Vec<Option<String>> = payloads(&dir)
        .into_iter()
        .filter_map(|(_, d)| match d {
            EventData::Decision(d) if d.allowed => Some(d.action),
            _ => None,
        })
        .collect();
    assert_eq!(decided, vec![Some("plugin.test.tool.shout".to_string())]);
}

/// Every item a client sees goes started → deltas → completed: the model's message, a tool call,
/// and the output of the command it runs, which streams while the command runs.
#[test]
fn each_item_of_a_turn_goes_started_deltas_completed() {
    let env = Env::new();
    let spec = env.script(
        "items.toml",
        r#"
[[turn]]
text = "running it"
[[turn.call]]
tool = "run_command"
input = { command = "echo hello-out; echo oops >&2" }

[[turn]]
text = "done"
"#,
    );
    let (events, sink) = collecting();
    let rt = runtime();
    let mut session = env.builder(no_config(), &spec).sink(sink).build().unwrap();
    rt.block_on(async {
        assert_eq!(session.submit("go").await.unwrap(), TaskEnd::Done);
        session.end(EndReason::Done).await.unwrap();
    });
    let events = events.lock().unwrap().clone();
    // Each item: one start, then its deltas, then one completion.
    let mut phase: std::collections::BTreeMap<String, u8> = std::collections::BTreeMap::new();
    let mut output = String::new();
    for event in &events {
        match event {
            AgentEvent::ItemStarted { item, .. } => {
                assert!(
                    phase.insert(item.clone(), 1).is_none(),
                    "{item} started twice"
                );
            }
            AgentEvent::Text { item, .. } | AgentEvent::ItemDelta { item, .. } => {
                assert_eq!(
                    phase.get(item),
                    Some(&1),
                    "a delta of {item} outside its life"
                );
                if let AgentEvent::ItemDelta { text, .. } = event {
                    output.push_str(text);
                }
            }
            AgentEvent::ItemCompleted { item, ok } => {
                assert_eq!(
                    phase.insert(item.clone(), 2),
                    Some(1),
                    "{item} ended unstarted"
                );
                assert!(ok, "{item} failed");
            }
            _ => {}
        }
    }
    let call = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolCall { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .expect("a tool call");
    for item in [
        "t1.message".to_string(),
        call.clone(),
        format!("{call}.output"),
        "t2.message".into(),
    ] {
        assert_eq!(
            phase.get(&item),
            Some(&2),
            "{item} did not complete: {phase:?}"
        );
    }
    assert!(
        output.contains("hello-out") && output.contains("oops"),
        "{output:?}"
    );
    // The command's output item lives inside its tool call's item.
    let at = |wanted: &dyn Fn(&AgentEvent) -> bool| events.iter().position(wanted).unwrap();
    let call_started = at(&|e| matches!(e, AgentEvent::ItemStarted { item, .. } if *item == call));
    let output_started = at(
        &|e| matches!(e, AgentEvent::ItemStarted { item, .. } if *item == format!("{call}.output")),
    );
    let call_completed =
        at(&|e| matches!(e, AgentEvent::ItemCompleted { item, .. } if *item == call));
    assert!(call_started < output_started && output_started < call_completed);
}

/// A person's answer (the one fake a test may use besides the model).
#[derive(Debug)]
struct Yes;

impl chock_agent::approval::Answerer for Yes {
    fn name(&self) -> String {
        "test-person".into()
    }
    fn role(&self) -> chock_agent::approval::Role {
        chock_agent::approval::Role::Human
    }
    fn answer<'a>(
        &'a self,
        _question: &'a chock_agent::approval::Question,
    ) -> chock_agent::approval::AnswerFuture<'a> {
        Box::pin(async {
            Some(chock_agent::approval::Answer::AllowOnce {
                reasons: String::new(),
            })
        })
    }
}

#[test]
fn an_approval_is_an_item_from_its_question_to_its_decision() {
    let env = Env::new();
    std::fs::write(
        env.project.join("chock.toml"),
        "[[rule]]\naction = \"exec.*\"\ndecision = \"ask\"\n",
    )
    .unwrap();
    let spec = env.script(
        "asked.toml",
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "true" }

[[turn]]
text = "done"
"#,
    );
    let (events, sink) = collecting();
    let rt = runtime();
    let mut session = env
        .builder(no_config(), &spec)
        .sink(sink)
        .person(Arc::new(Yes))
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(session.submit("go").await.unwrap(), TaskEnd::Done);
        session.end(EndReason::Done).await.unwrap();
    });
    let events = events.lock().unwrap().clone();
    let question = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ApprovalAsked { question, .. } => Some(question.clone()),
            _ => None,
        })
        .expect("the act was put to the person");
    let started = events.iter().position(|e| {
        matches!(e, AgentEvent::ItemStarted { item, kind: chock_protocol::live::ItemKind::Approval { .. }, .. } if *item == question)
    });
    let completed = events.iter().position(
        |e| matches!(e, AgentEvent::ItemCompleted { item, ok: true } if *item == question),
    );
    let decided = events
        .iter()
        .position(|e| matches!(e, AgentEvent::Decision { allowed: true, .. }));
    assert!(
        started.is_some() && started < completed && completed < decided,
        "{started:?} {completed:?} {decided:?}"
    );
}
