//! What the `chock run` end-to-end tests share: an isolated world (project, state, config, data), the
//! log reader, the decision-order check, and a loopback server speaking the Anthropic wire format.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A project, isolated state/config/data directories, and helpers to run `chock` there.
pub struct World {
    pub _dir: tempfile::TempDir,
    pub base: PathBuf,
    pub project: PathBuf,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("project");
        std::fs::create_dir_all(&project).unwrap();
        for sub in ["state", "config", "data"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        World {
            _dir: dir,
            base,
            project,
        }
    }

    /// A git project with one commit, a tiny program and its test.
    pub fn with_git_project() -> World {
        Self::with_git_project_and_policy(None)
    }

    /// As [`World::with_git_project`], with a chock.toml committed alongside.
    pub fn with_git_project_and_policy(policy: Option<&str>) -> World {
        let w = World::new();
        if let Some(policy) = policy {
            w.write("chock.toml", policy);
        }
        w.write(
            "calc.sh",
            "#!/bin/sh\n# adds two numbers\necho $(( $1 - $2 ))\n",
        );
        w.write(
            "test.sh",
            "#!/bin/sh\nif [ \"$(sh calc.sh 2 3)\" = 5 ]; then echo PASS; else echo FAIL; exit 1; fi\n",
        );
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "-A"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "start",
            ],
        ] {
            let status = Command::new("git")
                .args(args)
                .current_dir(&w.project)
                .status()
                .unwrap();
            assert!(status.success());
        }
        w
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.project.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn script(&self, toml: &str) -> String {
        let path = self.base.join("script.toml");
        std::fs::write(&path, toml).unwrap();
        format!("script:{}", path.display())
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chock"));
        cmd.args(args)
            .current_dir(&self.project)
            .env("XDG_STATE_HOME", self.base.join("state"))
            .env("XDG_CONFIG_HOME", self.base.join("config"))
            .env("XDG_DATA_HOME", self.base.join("data"))
            .env_remove("CHOCK_ORG_POLICY")
            // Never the developer's own keyring: the keyring test starts a bus of its own.
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY");
        cmd
    }

    pub fn chock(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    /// `chock` run from the parent of the project (where no `--project` means the parent itself).
    pub fn chock_from_base(&self, args: &[&str]) -> Output {
        self.command(args)
            .current_dir(&self.base)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `chock` with these variables set on top of the isolated world, and nothing on standard input.
    pub fn chock_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        cmd.stdin(Stdio::null()).output().unwrap()
    }

    /// `chock` with `input` written to its standard input (a key to `login`, a task to `run`).
    pub fn chock_with_input(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }

    pub fn sessions(&self) -> Vec<PathBuf> {
        sessions_under(&self.base.join("state/chock/sessions"))
    }

    pub fn session(&self) -> PathBuf {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "one session");
        sessions[0].clone()
    }

    pub fn session_id(&self) -> String {
        self.session()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// Every event of the only session: (kind, call_id, data).
    pub fn events(&self) -> Vec<(String, Option<String>, serde_json::Value)> {
        let text = std::fs::read_to_string(self.session().join("log.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["kind"].as_str().unwrap().to_string(),
                    v["call_id"].as_str().map(str::to_string),
                    v["data"].clone(),
                )
            })
            .collect()
    }

    pub fn assert_log_verifies(&self) {
        let report = chock_log::verify(&self.session()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.torn_tail.is_none());
    }
}

/// The session directories under a sessions root, sorted; none if the root does not exist yet.
pub fn sessions_under(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// For every tool call: its decision is logged, and logged before its result.
pub fn assert_decisions_precede_results(events: &[(String, Option<String>, serde_json::Value)]) {
    let calls: Vec<&String> = events
        .iter()
        .filter(|(k, _, _)| k == "tool.call")
        .filter_map(|(_, c, _)| c.as_ref())
        .collect();
    assert!(!calls.is_empty());
    for call in calls {
        let at = |kind: &str| {
            events
                .iter()
                .position(|(k, c, _)| k == kind && c.as_ref() == Some(call))
        };
        let decision = at("decision").unwrap_or_else(|| panic!("no decision for {call}"));
        let result = at("tool.result").unwrap_or_else(|| panic!("no result for {call}"));
        let called = at("tool.call").unwrap();
        assert!(
            called < decision && decision < result,
            "{call}: call {called}, decision {decision}, result {result}"
        );
    }
}

/// One reply of the loopback model: an HTTP error, or a stream of Anthropic SSE events.
pub enum Reply {
    Error(u16, &'static str),
    Events(Vec<String>),
}

pub fn message_start(id: &str, input_tokens: u64) -> String {
    format!(
        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{{"input_tokens":{input_tokens},"output_tokens":1}}}}}}"#
    )
}

/// A streamed reply: some text, then optionally one tool call whose input arrives in two pieces.
pub fn reply(id: &str, input_tokens: u64, text: &str, call: Option<(&str, &str, &str)>) -> Reply {
    let mut events = vec![
        message_start(id, input_tokens),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_string(),
        serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}).to_string(),
        r#"{"type":"content_block_stop","index":0}"#.to_string(),
    ];
    let stop = if let Some((call_id, name, input)) = call {
        let (a, b) = input.split_at(input.len() / 2);
        events.push(
            serde_json::json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":call_id,"name":name,"input":{}}})
                .to_string(),
        );
        for piece in [a, b] {
            events.push(
                serde_json::json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":piece}})
                    .to_string(),
            );
        }
        events.push(r#"{"type":"content_block_stop","index":1}"#.to_string());
        "tool_use"
    } else {
        "end_turn"
    };
    events.push(format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}"}},"usage":{{"output_tokens":10}}}}"#));
    events.push(r#"{"type":"message_stop"}"#.to_string());
    Reply::Events(events)
}

/// A loopback server speaking the Anthropic Messages wire format, one reply per request, in order.
/// Returns the port and the raw requests it saw.
pub fn anthropic_server(replies: Vec<Reply>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for reply in replies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            seen.push(format!("{head}{}", String::from_utf8_lossy(&body)));
            let out = match reply {
                Reply::Error(status, body) => format!(
                    "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nretry-after-ms: 10\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                ),
                Reply::Events(events) => {
                    let mut out = String::from(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
                    );
                    for data in events {
                        let kind: serde_json::Value = serde_json::from_str(&data).unwrap();
                        out.push_str(&format!(
                            "event: {}\ndata: {data}\n\n",
                            kind["type"].as_str().unwrap()
                        ));
                    }
                    out
                }
            };
            stream.write_all(out.as_bytes()).unwrap();
            stream.flush().unwrap();
        }
        seen
    });
    (port, server)
}

/// config.toml naming the loopback server as provider `fake`, its key in `key_env`.
pub fn fake_provider(w: &World, port: u16, key_env: &str) {
    let config = w.base.join("config/chock/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"{key_env}\"\nmodel = \"claude-sonnet-4-5\"\n"
        ),
    )
    .unwrap();
}

pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
