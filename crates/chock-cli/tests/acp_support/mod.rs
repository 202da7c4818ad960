//! A scripted ACP client: the real `chock acp` binary on a pair of pipes, frames sent and read
//! one line at a time, and every frame kept in order for the transcript a test snapshots.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::run_support::World;

/// How long any one frame may take to come.
const PATIENCE: Duration = Duration::from_secs(90);

/// The editor's side of one `chock acp` process.
pub struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<Value>,
    stderr: mpsc::Receiver<String>,
    next_id: u64,
    /// Every frame, in order: `→` sent by the editor, `←` sent by Chock.
    pub transcript: Vec<(&'static str, Value)>,
}

impl Editor {
    /// The `chock acp` process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `chock acp ARGS` in the world.
    pub fn start(w: &World, args: &[&str]) -> Editor {
        Editor::start_with_env(w, args, &[])
    }

    /// Starts `chock acp ARGS` in the world with these variables set on top of the world's.
    pub fn start_with_env(w: &World, args: &[&str], vars: &[(&str, &str)]) -> Editor {
        let mut all = vec!["acp"];
        all.extend_from_slice(args);
        let mut command = w.command(&all);
        for (name, value) in vars {
            command.env(name, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let frame: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("chock acp wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let (etx, stderr_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            let _ = etx.send(text);
        });
        Editor {
            stdin: child.stdin.take(),
            child,
            frames,
            stderr: stderr_rx,
            next_id: 0,
            transcript: Vec::new(),
        }
    }

    /// Sends one frame.
    pub fn send(&mut self, frame: Value) {
        let mut line = serde_json::to_vec(&frame).unwrap();
        line.push(b'\n');
        self.stdin.as_mut().unwrap().write_all(&line).unwrap();
        self.stdin.as_mut().unwrap().flush().unwrap();
        self.transcript.push(("→", frame));
    }

    /// Sends a raw line (not recorded: it may not be JSON).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": method});
        frame["params"] = params;
        self.send(frame);
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        let mut frame = json!({"jsonrpc": "2.0", "method": method});
        frame["params"] = params;
        self.send(frame);
    }

    /// Answers Chock's request `frame` with `result`.
    pub fn answer(&mut self, frame: &Value, result: Value) {
        let mut response = json!({"jsonrpc": "2.0", "id": frame["id"]});
        response["result"] = result;
        self.send(response);
    }

    /// Answers a permission request by choosing `option`.
    pub fn choose(&mut self, frame: &Value, option: &str) {
        self.answer(
            frame,
            json!({"outcome": {"outcome": "selected", "optionId": option}}),
        );
    }

    /// The next frame from Chock.
    pub fn recv(&mut self) -> Value {
        let frame = self.frames.recv_timeout(PATIENCE).unwrap_or_else(|e| {
            panic!(
                "no frame from chock acp ({e}); so far: {:#?}",
                self.transcript
            )
        });
        self.transcript.push(("←", frame.clone()));
        frame
    }

    /// Reads frames until the response to `id`, handing every request Chock makes on the way to
    /// `on_request`; returns the response.
    pub fn until_response(
        &mut self,
        id: u64,
        mut on_request: impl FnMut(&mut Editor, &Value),
    ) -> Value {
        loop {
            let frame = self.recv();
            if frame.get("method").is_some() && frame.get("id").is_some() {
                on_request(self, &frame);
            } else if frame.get("method").is_none() && frame["id"] == json!(id) {
                return frame;
            }
        }
    }

    /// Reads frames until one satisfies `wanted`; returns it.
    pub fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.recv();
            if wanted(&frame) {
                return frame;
            }
        }
    }

    /// `initialize`, offering the editor's file and terminal methods (which Chock must not use).
    pub fn initialize(&mut self) -> Value {
        let id = self.request(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
                "clientInfo": {"name": "scripted", "version": "1"}
            }),
        );
        self.until_response(id, |_, f| {
            panic!("a request before initialize answered: {f}")
        })
    }

    /// `session/new` on the world's project; returns the session id.
    pub fn new_session(&mut self, w: &World) -> String {
        let id = self.request("session/new", json!({"cwd": w.project, "mcpServers": []}));
        let response = self.until_response(id, |_, f| panic!("unexpected request {f}"));
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {response}"))
            .to_string()
    }

    /// Closes standard input and waits for the process; returns its exit status and stderr.
    pub fn close(mut self) -> (Option<i32>, String, Vec<(&'static str, Value)>) {
        drop(self.stdin.take());
        while let Ok(frame) = self.frames.recv_timeout(PATIENCE) {
            self.transcript.push(("←", frame));
        }
        let status = self.child.wait().unwrap();
        let stderr = self.stderr.recv_timeout(PATIENCE).unwrap_or_default();
        (status.code(), stderr, std::mem::take(&mut self.transcript))
    }

    /// Every frame Chock sent so far.
    pub fn received(&self) -> Vec<&Value> {
        self.transcript
            .iter()
            .filter(|(dir, _)| *dir == "←")
            .map(|(_, f)| f)
            .collect()
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The transcript as one line per frame, for a snapshot.
pub fn render(transcript: &[(&'static str, Value)]) -> String {
    transcript
        .iter()
        .map(|(dir, frame)| format!("{dir} {frame}\n"))
        .collect()
}

/// The session updates of kind `kind` (`tool_call`, `agent_message_chunk`, …) Chock sent.
pub fn updates<'a>(frames: &[&'a Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| {
            f["method"] == "session/update" && f["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|f| &f["params"]["update"])
        .collect()
}

/// The methods of the requests Chock made.
pub fn requests_made(frames: &[&Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f.get("id").is_some())
        .filter_map(|f| f["method"].as_str().map(str::to_string))
        .collect()
}
