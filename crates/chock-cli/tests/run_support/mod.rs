//! The one hermetic environment every CLI test runs `chock` in ([`World`]), and what the tests
//! share beside it: the log readers, the decision-order check, and a loopback server speaking the
//! Anthropic wire format.
//!
//! A [`World`] is a temporary directory holding everything the binary may read or write: HOME,
//! the XDG config/state/data/cache/runtime directories, an empty org bundle, the project (plain or
//! git). Every `chock` (and every helper program a test wraps it in: `setsid`, `script`,
//! `dbus-run-session`, `unshare`, `git`, `sh`) starts with a cleared environment that keeps only
//! PATH and sets:
//!
//! - HOME and `XDG_{CONFIG,STATE,DATA,CACHE,RUNTIME}_HOME/DIR` under the world, so no file of the
//!   person running the tests (config, keys, sessions, a keyring) is read or written;
//! - `CHOCK_ORG_POLICY` to the world's empty `org.toml`, so the machine's `/etc/chock/org.toml`
//!   decides nothing;
//! - `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_CONFIG_NOSYSTEM=1` and a fixed git author, committer and
//!   date, so commits (the test's and chock's checkpoints) are the same everywhere;
//! - `LANG=C.UTF-8`, `TZ=UTC`;
//! - `CHOCK_TEST_CLOCK` ([`CLOCK`]) and `CHOCK_TEST_IDS=1`: chock-log's fixed clock and id
//!   sequence (honoured by debug builds only, which is what `cargo test` builds), so the first
//!   session is [`FIRST_SESSION`] and every timestamp is `2026-01-01T00:00:00.<µs>Z`. The counters
//!   live in the world's state directory, so successive `chock`s in one test go on counting.
//!
//! [`World::settings`] gives insta settings whose filters replace what still varies (the
//! temporary directory's path becomes `[TMP]`). Nothing here needs root: the directories belong to
//! whoever runs the test (`.ci/sandbox-as-user` runs these binaries as an unprivileged user).
#![allow(dead_code, unreachable_pub)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub const CHOCK: &str = env!("CARGO_BIN_EXE_chock");
/// The fixed clock's first instant.
pub const CLOCK: &str = "2026-01-01T00:00:00Z";
/// The same instant for git (`GIT_AUTHOR_DATE`, `GIT_COMMITTER_DATE`).
const GIT_DATE: &str = "@1767225600 +0000";
/// The id of the first session a world makes (the fixed clock's second, the first of the ids).
pub const FIRST_SESSION: &str = "20260101T000000Z-000001";

/// A project and everything else `chock` reads or writes, in one temporary directory.
pub struct World {
    tmp: tempfile::TempDir,
    /// The temporary directory (canonical): the parent of everything below.
    pub base: PathBuf,
    /// The project `chock` runs in (the current directory of every command).
    pub project: PathBuf,
    pub home: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub data: PathBuf,
    pub cache: PathBuf,
    pub runtime: PathBuf,
    /// The org bundle `CHOCK_ORG_POLICY` names: empty unless a test writes it.
    pub org: PathBuf,
}

impl World {
    /// A plain (not git) empty project.
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let at = |name: &str| base.join(name);
        let w = World {
            project: at("project"),
            home: at("home"),
            config: at("config"),
            state: at("state"),
            data: at("data"),
            cache: at("cache"),
            runtime: at("runtime"),
            org: at("org.toml"),
            base,
            tmp,
        };
        for dir in [
            &w.project, &w.home, &w.config, &w.state, &w.data, &w.cache, &w.runtime,
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w.runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(&w.org, "").unwrap();
        w
    }

    /// An empty git project: `git init` on branch main, nothing committed.
    pub fn with_git() -> World {
        let w = World::new();
        w.git(&["init", "-q", "-b", "main"]);
        w
    }

    /// A git project with one commit, a tiny program and its test.
    pub fn with_git_project() -> World {
        Self::with_git_project_and_policy(None)
    }

    /// As [`World::with_git_project`], with a chock.toml committed alongside.
    pub fn with_git_project_and_policy(policy: Option<&str>) -> World {
        let w = World::with_git();
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
        w.git(&["add", "-A"]);
        w.git(&["commit", "-q", "-m", "start"]);
        w
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.project.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.join(rel)).unwrap()
    }

    /// Writes a recorded model's script outside the project and names it as a provider.
    pub fn script(&self, toml: &str) -> String {
        let path = self.base.join("script.toml");
        std::fs::write(&path, toml).unwrap();
        format!("script:{}", path.display())
    }

    /// Writes chock's `config.toml` (in the world's XDG config directory) and returns its path.
    pub fn config_toml(&self, toml: &str) -> PathBuf {
        let path = self.config.join("chock/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, toml).unwrap();
        path
    }

    /// Puts the world's environment on `cmd`: cleared but for PATH, then the variables the module
    /// documentation lists; the current directory is the project.
    pub fn hermetic<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env_clear()
            .current_dir(&self.project)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_DATA_HOME", &self.data)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("CHOCK_ORG_POLICY", &self.org)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_AUTHOR_DATE", GIT_DATE)
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env("GIT_COMMITTER_DATE", GIT_DATE)
            .env("LANG", "C.UTF-8")
            .env("TZ", "UTC")
            .env("CHOCK_TEST_CLOCK", CLOCK)
            .env("CHOCK_TEST_IDS", "1")
    }

    /// `program` in the world (a wrapper such as `setsid` or `script` that runs `chock` in turn).
    pub fn program(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.hermetic(&mut cmd);
        cmd
    }

    /// `chock args` in the world, not started yet.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.program(CHOCK);
        cmd.args(args);
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

    /// `chock` with these variables set on top of the world's, and nothing on standard input.
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

    /// `sh -c script` in the project, in the world's environment; must succeed; its stdout.
    pub fn sh(&self, script: &str) -> String {
        let out = self
            .program("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{script}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// `git args` in the project, in the world's environment; must succeed.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self
            .program("git")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// The sessions root `chock` writes under.
    pub fn sessions_root(&self) -> PathBuf {
        self.state.join("chock/sessions")
    }

    pub fn sessions(&self) -> Vec<PathBuf> {
        sessions_under(&self.sessions_root())
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

    /// As [`World::events`], each checked to be exactly its kind's type
    /// (`chock_protocol::EventData::parse_exact`): a writer's stray or missing field fails here.
    pub fn events_exact(&self) -> Vec<(String, Option<String>, serde_json::Value)> {
        let events = self.events();
        for (kind, _, data) in &events {
            self::typed(kind, data);
        }
        events
    }

    /// Every event of the only session as its typed payload.
    pub fn typed_events(&self) -> Vec<(Option<String>, chock_protocol::EventData)> {
        self.events()
            .into_iter()
            .map(|(kind, call, data)| (call, typed(&kind, &data)))
            .collect()
    }

    pub fn assert_log_verifies(&self) {
        let report = chock_log::verify(&self.session()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.torn_tail.is_none());
    }

    /// insta settings whose filters hide what still varies between machines and runs: the
    /// world's temporary directory (`[TMP]`).
    pub fn settings(&self) -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        for path in [self.base.as_path(), self.tmp.path()] {
            s.add_filter(&regex_escape(&path.display().to_string()), "[TMP]");
        }
        s
    }
}

/// `data` read as the payload of `kind`, which it must fit exactly.
pub fn typed(kind: &str, data: &serde_json::Value) -> chock_protocol::EventData {
    let parsed: chock_protocol::EventKind =
        kind.parse().unwrap_or_else(|e| panic!("{kind}: {e:?}"));
    chock_protocol::EventData::parse_exact(parsed, data)
        .unwrap_or_else(|e| panic!("{kind} does not fit its type: {e}: {data}"))
}

/// `text` with every character a regex gives a meaning escaped.
pub fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// Opens a pseudo-terminal: (master, slave).
pub fn open_pty() -> (std::fs::File, std::fs::File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    (std::fs::File::from(master), slave)
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
    /// The stream's headers, then silence for this long, then the connection closes.
    Stall(std::time::Duration),
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

/// A table that leaves every read to the reviewer model.
pub const REVIEWED_READS: &str = "[[rule]]\naction = \"fs.read\"\ndecision = \"agent_review\"\n";

/// The world's `hello.txt` ("hello") and a `chock.toml` of [`REVIEWED_READS`] (a world without a
/// policy of its own: one that has one gets [`REVIEWED_READS`] through its constructor).
pub fn reviewed_hello(w: &World) {
    w.write("hello.txt", "hello\n");
    w.write("chock.toml", REVIEWED_READS);
}

/// A model that reads `hello.txt`, its reviewer allowing it (`reasons`, `reviewer_input` tokens
/// of input), and then says what the file says.
pub fn reviewed_read(reasons: &str, reviewer_input: u64) -> Vec<Reply> {
    vec![
        reply(
            "msg_1",
            10,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply(
            "msg_r",
            reviewer_input,
            &serde_json::json!({"allow": true, "reasons": reasons}).to_string(),
            None,
        ),
        reply("msg_2", 10, "It says hello.", None),
    ]
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
                Reply::Stall(silence) => {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
                    stream.write_all(head.as_bytes()).unwrap();
                    stream.flush().unwrap();
                    // Held open elsewhere, so the next request is answered at once.
                    std::thread::spawn(move || {
                        std::thread::sleep(silence);
                        drop(stream);
                    });
                    continue;
                }
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
    w.config_toml(&format!(
        "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"{key_env}\"\nmodel = \"claude-sonnet-4-5\"\n"
    ));
}

pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
