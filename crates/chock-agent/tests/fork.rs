//! Forks at a completed turn (docs/forks.md), for a git project and a project without git: a
//! three-turn session is forked at turn 1, and the fork's files, ratchet, conversation (what a
//! loopback Chat Completions server is sent when the fork is taken up) and log are turn 1's,
//! never a later turn's. The first session plays a recording; everything else is real (the
//! sandbox runs the commands, the log and workspaces are on disk).

use std::path::{Path, PathBuf};

use chock_agent::agent::TaskEnd;
use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_log::{EventData, read_events};
use chock_policy::{Action, DecidedBy, Decision};
use chock_protocol::log::EndReason;
use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionError, SessionOptions};
use chock_test_support::wire::{FakeServer, Reply, chat_sse};

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    sessions: PathBuf,
    dir: PathBuf,
}

fn git(project: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(project)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

impl Env {
    fn new(with_git: bool) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let sessions = tmp.path().join("sessions");
        std::fs::create_dir_all(project.join("sub")).unwrap();
        std::fs::write(project.join("README.md"), "hello\n").unwrap();
        std::fs::write(project.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(project.join("sub/old.txt"), "old\n").unwrap();
        if with_git {
            git(&project, &["init", "-q", "-b", "main"]);
            git(&project, &["add", "-A"]);
            git(&project, &["commit", "-qm", "init"]);
        }
        let dir = tmp.path().to_path_buf();
        Env {
            _tmp: tmp,
            project,
            sessions,
            dir,
        }
    }

    fn builder(&self, config: Config, provider: &str) -> SessionBuilder {
        SessionBuilder::new(config)
            .provider(Some(provider.to_string()))
            .project(Some(self.project.clone()))
            .sessions_root(Some(self.sessions.clone()))
    }

    /// Three turns: turn 1 writes a.txt, deletes a project file and a directory's file, makes a
    /// symlink and narrows exec.system.curl; turn 2 rewrites a.txt, adds b.txt and narrows
    /// exec.system.wget; turn 3 answers.
    fn parent_session(&self) -> PathBuf {
        let script = self.dir.join("three.toml");
        std::fs::write(
            &script,
            r#"
[[turn]]
text = "TURN-ONE"
[[turn.call]]
tool = "write_file"
input = { path = "a.txt", content = "one\n" }
[[turn.call]]
tool = "run_command"
input = { command = "rm gone.txt && rm -r sub && mkdir sub && echo new > sub/new.txt && ln -s a.txt link" }
[[turn.call]]
tool = "restrict_self"
input = { action = "exec.system.curl", decision = "deny" }

[[turn]]
text = "TURN-TWO"
[[turn.call]]
tool = "write_file"
input = { path = "a.txt", content = "two\n" }
[[turn.call]]
tool = "write_file"
input = { path = "b.txt", content = "later\n" }
[[turn.call]]
tool = "restrict_self"
input = { action = "exec.system.wget", decision = "deny" }

[[turn]]
text = "TURN-THREE"
"#,
        )
        .unwrap();
        let spec = format!("script:{}", script.display());
        let rt = runtime();
        let mut session = self.builder(no_config(), &spec).build().unwrap();
        let dir = session.log().dir().to_path_buf();
        rt.block_on(async {
            assert_eq!(session.submit("the task").await.unwrap(), TaskEnd::Done);
            session.end(EndReason::Done).await.unwrap();
        });
        dir
    }
}

fn no_config() -> Config {
    Config::parse("", Path::new("config.toml")).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The shared fake model speaking Chat Completions on loopback, with one text reply; it records
/// each request.
fn recording_server(rt: &tokio::runtime::Runtime) -> (String, FakeServer) {
    let reply = Reply::sse(chat_sse(&[
        r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"forked answer"},"finish_reason":null}]}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        "[DONE]",
    ]));
    let server = rt.block_on(FakeServer::start(vec![reply]));
    (format!("{}/v1", server.base_url()), server)
}

/// What a confined `sh -c script` in the session `dir` prints (the overlay as a call sees it).
fn confined(dir: &Path, script: &str) -> String {
    let session = reopen(dir);
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let result = runtime()
        .block_on(session.confined_call_async(&argv, &CallOptions::default(), &NoApprover))
        .unwrap();
    let CallOutcome::Ran { stdout, stderr, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    assert!(stderr.is_empty(), "{}", String::from_utf8_lossy(stderr));
    String::from_utf8_lossy(stdout).into_owned()
}

const LOOK: &str = "cat a.txt; ls; ls -A sub; readlink link; cat sub/new.txt";

/// The session in `dir` opened again. The writer lock of the session closed just before can take
/// a moment to be let go (seen as an unprivileged user): a busy log is waited for, briefly.
fn reopen(dir: &Path) -> Session {
    let start = std::time::Instant::now();
    loop {
        match Session::reopen(dir, SessionOptions::default()) {
            Err(SessionError::Log(chock_log::LogError::Busy { .. }))
                if start.elapsed() < std::time::Duration::from_secs(10) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other.unwrap(),
        }
    }
}

fn decision(dir: &Path, action: &str) -> (Decision, DecidedBy) {
    let session = reopen(dir);
    let verdict = session.decide(&Action::parse(action).unwrap());
    (verdict.decision, verdict.decided_by)
}

fn a_fork_at_turn_one_is_turn_one(with_git: bool) {
    let env = Env::new(with_git);
    let parent = env.parent_session();
    let parent_id = parent.file_name().unwrap().to_string_lossy().into_owned();
    // The parent went on: its workspace holds turn 2's work.
    assert_eq!(
        confined(&parent, LOOK),
        "two\nREADME.md\na.txt\nb.txt\nlink\nsub\nnew.txt\na.txt\nnew\n"
    );

    let forked = chock_session::fork(&parent, 1, chock_log::SessionHeader::default()).unwrap();
    assert_ne!(forked.id.as_str(), parent_id);

    // Its log's first line names the parent and turn 1's end, by seq and hash.
    let events = read_events(&forked.dir).unwrap();
    let EventData::SessionStart(start) = events[0].payload().unwrap() else {
        panic!("line 0 is not session.start");
    };
    assert_eq!(start.parent.as_deref(), Some(parent_id.as_str()));
    let origin = start.fork.expect("a fork origin");
    assert_eq!(
        (origin.session.as_str(), origin.turn),
        (parent_id.as_str(), 1)
    );
    let parent_events = read_events(&parent).unwrap();
    let end = parent_events
        .iter()
        .find(|e| e.seq == origin.seq)
        .expect("the named line");
    let Ok(EventData::TurnEnd(t)) = end.payload() else {
        panic!("the fork names a line that is not turn.end: {end:?}");
    };
    assert_eq!(t.turn, 1);
    let next = parent_events
        .iter()
        .find(|e| e.seq == origin.seq + 1)
        .unwrap();
    assert_eq!(
        origin.hash, next.prev,
        "the hash is the chain's head at that line"
    );
    assert!(chock_log::verify(&forked.dir).unwrap().problems.is_empty());

    // Its files are turn 1's: a.txt "one", gone.txt and sub/old.txt deleted, sub/new.txt and the
    // symlink there, no b.txt.
    assert_eq!(
        confined(&forked.dir, LOOK),
        "one\nREADME.md\na.txt\nlink\nsub\nnew.txt\na.txt\nnew\n"
    );
    // Its diff (against the parent's base for git, the project for overlay) is turn 1's change.
    let diff = chock_workspace::Workspace::open(&forked.dir)
        .unwrap()
        .diff()
        .unwrap();
    let paths: Vec<&str> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["a.txt", "gone.txt", "link", "sub/new.txt", "sub/old.txt"]
    );
    // Its ratchet is turn 1's: curl narrowed there, wget (turn 2) not.
    let (curl, by) = decision(&forked.dir, "exec.system.curl");
    assert_eq!(curl, Decision::Deny, "{by}");
    assert!(matches!(by, DecidedBy::Ratchet { .. }), "{by}");
    assert_eq!(decision(&forked.dir, "exec.system.wget").0, Decision::Allow);
    assert_eq!(decision(&parent, "exec.system.wget").0, Decision::Deny);

    // Its conversation is turn 1's: what the model is sent when the fork is taken up.
    let rt = runtime();
    let (base, server) = recording_server(&rt);
    let config = Config::parse(
        &format!(
            "[providers.loopback]\nkind = \"openai-chat\"\nbase_url = \"{base}\"\nmodel = \"m\"\n"
        ),
        Path::new("config.toml"),
    )
    .unwrap();
    let mut fork = env.builder(config, "loopback").resume(&forked.dir).unwrap();
    assert_eq!(fork.id(), forked.id.as_str());
    rt.block_on(async {
        assert_eq!(fork.submit("a follow-up").await.unwrap(), TaskEnd::Done);
        fork.end(EndReason::Done).await.unwrap();
    });
    let bodies: Vec<serde_json::Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 1);
    let messages = bodies[0]["messages"].as_array().unwrap();
    let text = serde_json::to_string(messages).unwrap();
    assert!(
        text.contains("TURN-ONE") && text.contains("created a.txt"),
        "{text}"
    );
    for later in ["TURN-TWO", "TURN-THREE", "later", "exec.system.wget"] {
        assert!(!text.contains(later), "{later} is a later turn's: {text}");
    }
    let roles: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system")
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "tool", "tool", "user"],
        "the task, turn 1's reply, its three results, the follow-up"
    );
    assert_eq!(
        messages.last().unwrap()["content"].as_str(),
        Some("a follow-up")
    );
    // The fork went on as a session of its own; the parent is untouched and both verify.
    assert!(chock_log::verify(&forked.dir).unwrap().problems.is_empty());
    assert!(chock_log::verify(&parent).unwrap().problems.is_empty());
    assert_eq!(
        confined(&parent, "cat a.txt"),
        "two\n",
        "the parent keeps its own workspace"
    );
    // A fork of the fork at the inherited turn 1 starts from the same state.
    let again = chock_session::fork(&forked.dir, 1, chock_log::SessionHeader::default()).unwrap();
    assert_eq!(confined(&again.dir, "cat a.txt"), "one\n");
}

#[test]
fn a_fork_of_a_git_session_at_turn_one_is_turn_one() {
    a_fork_at_turn_one_is_turn_one(true);
}

#[test]
fn a_fork_of_an_overlay_session_at_turn_one_is_turn_one() {
    a_fork_at_turn_one_is_turn_one(false);
}

#[test]
fn a_turn_that_does_not_exist_or_did_not_complete_is_refused_by_name() {
    let env = Env::new(false);
    let parent = env.parent_session();
    let id = parent.file_name().unwrap().to_string_lossy().into_owned();
    let before = std::fs::read_dir(&env.sessions).unwrap().count();
    let err = chock_session::fork(&parent, 9, chock_log::SessionHeader::default()).unwrap_err();
    assert!(matches!(err, SessionError::Fork(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("session {id} has no turn 9 (its turns: 1 to 3)")
    );
    // An interrupted turn: its line says so; a fork is refused, nothing is made.
    let interrupted = env.dir.join("interrupted");
    std::fs::create_dir_all(&interrupted).unwrap();
    let log = chock_log::Log::create(&interrupted, chock_log::SessionHeader::default()).unwrap();
    log.record(
        None,
        chock_protocol::log::TurnStart {
            turn: 1,
            input: Some("t".into()),
        },
    )
    .unwrap();
    let open = log.dir().to_path_buf();
    let err = chock_session::fork(&open, 1, chock_log::SessionHeader::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("is not a completed turn (it has not ended)"),
        "{err}"
    );
    log.record(
        None,
        chock_protocol::log::TurnEnd {
            turn: 1,
            reason: chock_protocol::log::TurnEndReason::Interrupted,
            workspace: None,
        },
    )
    .unwrap();
    let err = chock_session::fork(&open, 1, chock_log::SessionHeader::default()).unwrap_err();
    assert!(err.to_string().contains("it was interrupted"), "{err}");
    assert_eq!(std::fs::read_dir(&env.sessions).unwrap().count(), before);
    assert_eq!(std::fs::read_dir(&interrupted).unwrap().count(), 1);
}

/// A turn that changed nothing records an empty change set (a git session's base may not even be
/// written yet): its fork is the project as it is, and records its own base.
#[test]
fn a_fork_at_a_turn_that_changed_nothing_is_the_project() {
    for with_git in [true, false] {
        let env = Env::new(with_git);
        let script = env.dir.join("quiet.toml");
        std::fs::write(
            &script,
            r#"
[[turn]]
[[turn.call]]
tool = "list"
input = { path = "." }

[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "a.txt", content = "two\n" }

[[turn]]
text = "done"
"#,
        )
        .unwrap();
        let rt = runtime();
        let mut session = env
            .builder(no_config(), &format!("script:{}", script.display()))
            .build()
            .unwrap();
        let parent = session.log().dir().to_path_buf();
        rt.block_on(async {
            assert_eq!(session.submit("look").await.unwrap(), TaskEnd::Done);
            session.end(EndReason::Done).await.unwrap();
        });
        let forked = chock_session::fork(&parent, 1, chock_log::SessionHeader::default()).unwrap();
        let diff = chock_workspace::Workspace::open(&forked.dir)
            .unwrap()
            .diff()
            .unwrap();
        assert!(diff.files.is_empty(), "{with_git}: {:?}", diff.files);
        assert_eq!(
            confined(&forked.dir, "ls"),
            "README.md\ngone.txt\nsub\n",
            "{with_git}"
        );
    }
}

/// A turn record changed after the turn (its bytes no longer have the digest the log names) is
/// refused, and nothing is left of the fork; a parent line changed after the fork refuses the
/// fork's resume by name.
#[test]
fn a_changed_record_or_parent_line_is_refused() {
    let env = Env::new(false);
    let parent = env.parent_session();
    let record = parent.join("turns/1.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let record_json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let blob = record_json["changes"]["a.txt"]["blob"].as_str().unwrap();
    let blob_path = parent.join("turns/blobs").join(blob);
    let kept = std::fs::read(&blob_path).unwrap();
    std::fs::write(&blob_path, "tampered\n").unwrap();
    let before = std::fs::read_dir(&env.sessions).unwrap().count();
    let err = chock_session::fork(&parent, 1, chock_log::SessionHeader::default()).unwrap_err();
    assert!(err.to_string().contains("the record was changed"), "{err}");
    assert_eq!(std::fs::read_dir(&env.sessions).unwrap().count(), before);
    std::fs::write(&blob_path, kept).unwrap();

    let forked = chock_session::fork(&parent, 1, chock_log::SessionHeader::default()).unwrap();
    let log = parent.join("log.jsonl");
    let lines = std::fs::read_to_string(&log).unwrap();
    let edited = lines.replacen("TURN-ONE", "TURN-0NE", 1);
    assert_ne!(edited, lines);
    std::fs::write(&log, edited).unwrap();
    let err = chock_log::read_lineage(&forked.dir).unwrap_err();
    assert!(
        err.to_string().contains("the parent's log changed"),
        "{err}"
    );
    let err = Session::reopen(&forked.dir, SessionOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("the parent's log changed"),
        "{err}"
    );
}
