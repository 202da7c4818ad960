//! `chock_acp::serve` over in-memory pipes, with a recorded model: a prompt reaches the session
//! through its handle, its updates come before its response, and the apply offered at the turn's
//! end is the runtime's one apply — put to the editor even though the table allows it, its
//! `workspace.apply` decision and record logged before the project is written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// A git project (in the shared hermetic world) whose table is `policy`, a sessions root, and the
/// recording the model plays.
struct Env {
    _world: chock_test_support::World,
    project: PathBuf,
    sessions: PathBuf,
    recording: PathBuf,
}

impl Env {
    fn new(policy: &str, recording: &str) -> Env {
        let world = chock_test_support::World::with_git_files(&[
            ("README.md", "hello\n"),
            ("chock.toml", policy),
        ]);
        Env {
            project: world.project.clone(),
            sessions: world.sessions_root(),
            recording: world.outside("recording.toml", recording),
            _world: world,
        }
    }

    fn options(&self) -> chock_acp::Options {
        chock_acp::Options {
            config: chock_runtime::Config::parse("", Path::new("config.toml")).unwrap(),
            provider: Some(format!("script:{}", self.recording.display())),
            model: None,
            sessions_root: Some(self.sessions.clone()),
            max_turns: 10,
            answer_timeout: Some(Duration::from_secs(60)),
        }
    }

    /// The only session's log, one JSON value a line.
    fn events(&self) -> Vec<Value> {
        chock_test_support::events::read_lines(&chock_test_support::events::only_session(
            &self.sessions,
        ))
    }
}

/// `chock_acp::serve` on a pair of pipes: the editor's side, and the server's task.
fn serve(
    env: &Env,
) -> (
    Editor,
    tokio::task::JoinHandle<Result<(), chock_acp::AcpError>>,
) {
    let (to_chock, chock_in) = tokio::io::duplex(1 << 20);
    let (chock_out, from_chock) = tokio::io::duplex(1 << 20);
    let served = tokio::spawn(chock_acp::serve(
        BufReader::new(chock_in),
        chock_out,
        env.options(),
    ));
    let editor = Editor {
        to_chock,
        from_chock: BufReader::new(from_chock).lines(),
        next_id: 0,
        received: Vec::new(),
    };
    (editor, served)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The editor's side of the pipes.
struct Editor {
    to_chock: DuplexStream,
    from_chock: Lines<BufReader<DuplexStream>>,
    next_id: u64,
    /// Every frame Chock sent, in order.
    received: Vec<Value>,
}

impl Editor {
    async fn send(&mut self, frame: Value) {
        let mut line = serde_json::to_vec(&frame).unwrap();
        line.push(b'\n');
        self.to_chock.write_all(&line).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn initialize(&mut self) {
        let id = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}),
            )
            .await;
        self.until_response(id, "reject_once").await;
    }

    /// Closes the editor's side and waits for serving to stop (every session ended).
    async fn close(self, served: tokio::task::JoinHandle<Result<(), chock_acp::AcpError>>) {
        drop(self);
        tokio::time::timeout(Duration::from_secs(60), served)
            .await
            .expect("serving stops when the editor goes")
            .unwrap()
            .unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(90), self.from_chock.next_line())
            .await
            .expect("a frame within 90 s")
            .unwrap()
            .expect("chock acp goes on");
        let frame: Value = serde_json::from_str(&line).unwrap();
        self.received.push(frame.clone());
        frame
    }

    /// Frames until the response to `id`; every permission request on the way is answered by
    /// choosing `option`.
    async fn until_response(&mut self, id: u64, option: &str) -> Value {
        loop {
            let frame = self.recv().await;
            if frame["method"] == "session/request_permission" {
                let answer = json!({"jsonrpc": "2.0", "id": frame["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}}});
                self.send(answer).await;
            } else if frame.get("method").is_none() && frame["id"] == json!(id) {
                return frame;
            }
        }
    }
}

const WRITES_A_FILE: &str = r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "made.txt", content = "made in the workspace\n" }

[[turn]]
text = "written"
"#;

/// A prompt and the apply at its end go through the session's handle: the editor is asked about
/// the apply though the table allows it, and the log holds the `workspace.apply` decision, then
/// the apply's record, before the project holds the file.
#[test]
fn a_prompt_and_its_apply_reach_the_project_through_the_handle() {
    let env = Env::new(
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
        WRITES_A_FILE,
    );
    let received = runtime().block_on(async {
        let (mut ed, served) = serve(&env);
        ed.initialize().await;
        let id = ed
            .request("session/new", json!({"cwd": env.project, "mcpServers": []}))
            .await;
        let session = ed.until_response(id, "reject_once").await["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let id = ed
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "make it"}]}),
            )
            .await;
        let response = ed.until_response(id, "allow_once").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        // The file is in the project once the prompt has answered.
        assert_eq!(
            std::fs::read_to_string(env.project.join("made.txt")).unwrap(),
            "made in the workspace\n"
        );
        let received = std::mem::take(&mut ed.received);
        ed.close(served).await;
        received
    });
    // The editor was asked about the apply's own tool call, after it was shown.
    let shown = received
        .iter()
        .position(|f| {
            f["params"]["update"]["sessionUpdate"] == "tool_call"
                && f["params"]["update"]["toolCallId"] == "apply-1"
        })
        .expect("the apply is shown");
    let asked = received
        .iter()
        .position(|f| {
            f["method"] == "session/request_permission"
                && f["params"]["toolCall"]["toolCallId"] == "apply-1"
        })
        .expect("the editor is asked about the apply though the table allows it");
    assert!(shown < asked);
    let done = received
        .iter()
        .rposition(|f| f["params"]["update"]["toolCallId"] == "apply-1")
        .unwrap();
    assert_eq!(received[done]["params"]["update"]["status"], "completed");
    // Every update came before the prompt's response.
    let response = received
        .iter()
        .position(|f| f["result"]["stopReason"].is_string())
        .unwrap();
    assert!(
        received[response..]
            .iter()
            .all(|f| f["method"] != "session/update")
    );
    let events = env.events();
    let decision = events
        .iter()
        .position(|e| e["kind"] == "decision" && e["data"]["action"] == "workspace.apply")
        .expect("the apply's decision");
    assert_eq!(events[decision]["data"]["allowed"], true);
    let answered = events
        .iter()
        .find(|e| e["kind"] == "approval.answer")
        .expect("the editor's answer");
    assert_eq!(answered["data"]["by"], "editor:test", "{answered}");
    let record = events
        .iter()
        .position(|e| e["kind"] == "workspace.apply")
        .expect("the apply's record");
    assert!(decision < record, "the decision is logged before the write");
    let end = events.last().unwrap();
    assert_eq!(end["kind"], "session.end", "{end}");
}

/// `session/load` replays the conversation the resumed runtime carries on from, each earlier
/// tool call titled as its tool describes it (not by its name), then takes a prompt.
#[test]
fn load_replays_the_resumed_conversation_with_each_call_as_its_tool_shows_it() {
    let recording = format!("{WRITES_A_FILE}\n[[turn]]\ntext = \"again\"\n");
    let env = Env::new("", &recording);
    runtime().block_on(async {
        let (mut ed, served) = serve(&env);
        ed.initialize().await;
        let id = ed
            .request("session/new", json!({"cwd": env.project, "mcpServers": []}))
            .await;
        let session = ed.until_response(id, "reject_once").await["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let id = ed
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "make it"}]}),
            )
            .await;
        // The apply is refused: the file stays in the session.
        ed.until_response(id, "reject_once").await;
        ed.close(served).await;

        let (mut ed, served) = serve(&env);
        ed.initialize().await;
        let id = ed
            .request(
                "session/load",
                json!({"sessionId": session, "cwd": env.project, "mcpServers": []}),
            )
            .await;
        let loaded = ed.until_response(id, "reject_once").await;
        assert_eq!(loaded["result"], json!({}), "{loaded}");
        let updates: Vec<&Value> = ed
            .received
            .iter()
            .filter(|f| f["method"] == "session/update")
            .map(|f| &f["params"]["update"])
            .collect();
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk"
            ]
        );
        assert_eq!(updates[0]["content"]["text"], "make it");
        assert_eq!(
            updates[1]["title"], "Write made.txt (in the sandbox copy)",
            "{}",
            updates[1]
        );
        assert_eq!(updates[1]["kind"], "edit");
        assert_eq!(updates[1]["toolCallId"], updates[2]["toolCallId"]);
        assert_eq!(updates[2]["status"], "completed");
        assert_eq!(updates[3]["content"]["text"], "written");
        let id = ed
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "more"}]}),
            )
            .await;
        let response = ed.until_response(id, "reject_once").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        ed.close(served).await;
    });
    assert!(!env.project.join("made.txt").exists());
}
