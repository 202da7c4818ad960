//! The CLI's view of the one hermetic environment (`chock_test_support::World`, whose
//! documentation says what it isolates): [`World`] runs the `chock` binary cargo built for these
//! tests in it. Beside it: the shared log readers, the fake model
//! (`chock_test_support::model`), a pseudo-terminal, and the reviewer scenarios several suites
//! play. Nothing here needs root (`.ci/sandbox-as-user` runs these binaries as an unprivileged
//! user).
#![allow(dead_code, unreachable_pub, unused_imports)]

use std::process::{Command, Output, Stdio};

pub use chock_test_support::events::{
    Logged, assert_decisions_precede_results, sessions_under, typed,
};
pub use chock_test_support::model::{Reply, anthropic_server, fake_provider, message_start, reply};
pub use chock_test_support::{CLOCK, FIRST_SESSION, on_path, regex_escape, text};

/// The binary under test.
pub const CHOCK: &str = env!("CARGO_BIN_EXE_chock");

/// The shared hermetic world, running `chock` (every field and method of
/// `chock_test_support::World` through `Deref`).
#[derive(Debug)]
pub struct World(chock_test_support::World);

impl std::ops::Deref for World {
    type Target = chock_test_support::World;
    fn deref(&self) -> &chock_test_support::World {
        &self.0
    }
}

impl World {
    /// A plain (not git) empty project.
    pub fn new() -> World {
        World(chock_test_support::World::new())
    }

    /// An empty git project: `git init` on branch main, nothing committed.
    pub fn with_git() -> World {
        World(chock_test_support::World::with_git())
    }

    /// A git project holding `files`, committed.
    pub fn with_git_files(files: &[(&str, &str)]) -> World {
        World(chock_test_support::World::with_git_files(files))
    }

    /// A git project with one commit, a tiny program and its test.
    pub fn with_git_project() -> World {
        World(chock_test_support::World::with_git_project())
    }

    /// As [`World::with_git_project`], with a chock.toml committed alongside.
    pub fn with_git_project_and_policy(policy: Option<&str>) -> World {
        World(chock_test_support::World::with_git_project_and_policy(
            policy,
        ))
    }

    /// `chock args` in the world, not started yet.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.program(CHOCK);
        cmd.args(args);
        cmd
    }

    /// `chock args` in the world, nothing on standard input.
    pub fn chock(&self, args: &[&str]) -> Output {
        self.run(CHOCK, args)
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
        self.run_with_input(CHOCK, args, input)
    }

    /// The only session's log verifies: an intact hash chain, no torn tail.
    pub fn assert_log_verifies(&self) {
        let report = chock_log::verify(&self.session()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.torn_tail.is_none());
    }
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
