//! The one hermetic environment every test that runs Chock (a binary, or a session in-process)
//! runs it in.
//!
//! A [`World`] is a temporary directory holding everything Chock may read or write: HOME, the XDG
//! config/state/data/cache/runtime directories, an empty org bundle, the project (plain or git).
//! Every program started through it ([`World::program`]: `chock`, and every helper a test wraps it
//! in — `setsid`, `script`, `dbus-run-session`, `tmux`, `git`, `sh`, a browser driver) starts with
//! a cleared environment that keeps only PATH and sets:
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
//!   live in the world's state directory, so successive programs in one test go on counting.
//!
//! In-process tests (a daemon served in the test, a session built by its builder) take the same
//! directories from it: [`World::sessions_root`], [`World::chock_state`], [`World::chock_runtime`],
//! [`World::config_file`], [`World::script`].
//!
//! [`World::settings`] gives insta settings whose filters replace what still varies (the
//! temporary directory's path becomes `[TMP]`): every snapshot of a command's output is taken in a
//! world. Nothing here needs root: the directories belong to whoever runs the test.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::events::{self, Logged};

/// The fixed clock's first instant.
pub const CLOCK: &str = "2026-01-01T00:00:00Z";
/// The same instant for git (`GIT_AUTHOR_DATE`, `GIT_COMMITTER_DATE`).
const GIT_DATE: &str = "@1767225600 +0000";
/// The id of the first session a world makes (the fixed clock's second, the first of the ids).
pub const FIRST_SESSION: &str = "20260101T000000Z-000001";

/// A project and everything else Chock reads or writes, in one temporary directory.
#[derive(Debug)]
pub struct World {
    tmp: tempfile::TempDir,
    /// The temporary directory (canonical): the parent of everything below.
    pub base: PathBuf,
    /// The project Chock runs in (the current directory of every command).
    pub project: PathBuf,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`.
    pub config: PathBuf,
    /// `$XDG_STATE_HOME`.
    pub state: PathBuf,
    /// `$XDG_DATA_HOME`.
    pub data: PathBuf,
    /// `$XDG_CACHE_HOME`.
    pub cache: PathBuf,
    /// `$XDG_RUNTIME_DIR` (mode 0700, as the XDG specification asks).
    pub runtime: PathBuf,
    /// The org bundle `CHOCK_ORG_POLICY` names: empty unless a test writes it.
    pub org: PathBuf,
}

impl World {
    /// A plain (not git) empty project.
    pub fn new() -> World {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let base = tmp.path().canonicalize().expect("the temporary directory");
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
            std::fs::create_dir_all(dir).expect("a world directory");
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w.runtime, std::fs::Permissions::from_mode(0o700))
            .expect("the runtime directory's mode");
        std::fs::write(&w.org, "").expect("the org bundle");
        w
    }

    /// An empty git project: `git init` on branch main, nothing committed.
    pub fn with_git() -> World {
        let w = World::new();
        w.git(&["init", "-q", "-b", "main"]);
        w
    }

    /// A git project holding `files` (relative path, content), committed on branch main.
    pub fn with_git_files(files: &[(&str, &str)]) -> World {
        let w = World::with_git();
        for (path, content) in files {
            w.write(path, content);
        }
        w.git(&["add", "-A"]);
        w.git(&["commit", "-q", "-m", "init"]);
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

    /// Writes `text` to `rel` in the project (its directories made).
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.project.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the file's directory");
        }
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// The project's file `rel`.
    pub fn read(&self, rel: &str) -> String {
        let path = self.project.join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Writes `text` to `name` beside the project (a recording, a table), and returns its path.
    pub fn outside(&self, name: &str, text: &str) -> PathBuf {
        let path = self.base.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    /// Writes a recorded model's script outside the project and names it as a provider
    /// (`script:FILE`).
    pub fn script(&self, toml: &str) -> String {
        self.script_named("script.toml", toml)
    }

    /// As [`World::script`], in a file of this name (for a test that plays several).
    pub fn script_named(&self, name: &str, toml: &str) -> String {
        format!("script:{}", self.outside(name, toml).display())
    }

    /// Writes chock's `config.toml` (in the world's XDG config directory) and returns its path.
    pub fn config_toml(&self, toml: &str) -> PathBuf {
        let path = self.config_file();
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the config directory");
        std::fs::write(&path, toml).expect("config.toml");
        path
    }

    /// Where chock reads its `config.toml` in this world (written or not).
    pub fn config_file(&self) -> PathBuf {
        self.config.join("chock/config.toml")
    }

    /// chock's state directory in this world (`$XDG_STATE_HOME/chock`).
    pub fn chock_state(&self) -> PathBuf {
        self.state.join("chock")
    }

    /// chock's runtime directory in this world (`$XDG_RUNTIME_DIR/chock`: the daemon's socket).
    pub fn chock_runtime(&self) -> PathBuf {
        self.runtime.join("chock")
    }

    /// The sessions root chock writes under.
    pub fn sessions_root(&self) -> PathBuf {
        self.chock_state().join("sessions")
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

    /// `program` in the world, not started yet.
    pub fn program(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.hermetic(&mut cmd);
        cmd
    }

    /// `program args` in the world with nothing on standard input: its output.
    pub fn run(&self, program: impl AsRef<OsStr>, args: &[&str]) -> Output {
        self.program(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the program starts")
    }

    /// `program args` in the world with `input` written to its standard input: its output.
    pub fn run_with_input(
        &self,
        program: impl AsRef<OsStr>,
        args: &[&str],
        input: &[u8],
    ) -> Output {
        let mut child = self
            .program(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the program starts");
        child
            .stdin
            .take()
            .expect("a piped stdin")
            .write_all(input)
            .expect("the input is written");
        child.wait_with_output().expect("the program ends")
    }

    /// `sh -c script` in the project, in the world's environment; must succeed; its stdout.
    pub fn sh(&self, script: &str) -> String {
        let out = self.run("sh", &["-c", script]);
        assert!(out.status.success(), "{script}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// `git args` in the project, in the world's environment; must succeed; its stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.run("git", args);
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// The session directories under the sessions root, sorted.
    pub fn sessions(&self) -> Vec<PathBuf> {
        events::sessions_under(&self.sessions_root())
    }

    /// The only session's directory.
    pub fn session(&self) -> PathBuf {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "one session");
        sessions[0].clone()
    }

    /// The only session's id.
    pub fn session_id(&self) -> String {
        self.session()
            .file_name()
            .expect("a session directory's name")
            .to_string_lossy()
            .into_owned()
    }

    /// Every event of the only session: (kind, call_id, data).
    pub fn events(&self) -> Vec<Logged> {
        events::read_log(&self.session())
    }

    /// As [`World::events`], each checked to be exactly its kind's type
    /// (`chock_protocol::EventData::parse_exact`): a writer's stray or missing field fails here.
    pub fn events_exact(&self) -> Vec<Logged> {
        let events = self.events();
        for (kind, _, data) in &events {
            events::typed(kind, data);
        }
        events
    }

    /// Every event of the only session as its typed payload.
    pub fn typed_events(&self) -> Vec<(Option<String>, chock_protocol::EventData)> {
        events::read_typed(&self.session())
    }

    /// The log lines of the session `id` under the sessions root, each one JSON value.
    pub fn log_lines(&self, id: &str) -> Vec<serde_json::Value> {
        events::read_lines(&self.sessions_root().join(id))
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

    /// The temporary directory as created (before it was made canonical).
    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
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

/// Bytes a program wrote, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `program` is a file in a directory of PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
