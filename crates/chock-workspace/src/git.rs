//! The host's `git`: the workspace shells out to the git CLI (plumbing commands only), from the host
//! process, never from inside a sandbox. The user's branch, index and working tree are never touched:
//! every command that needs an index gets a private one through `GIT_INDEX_FILE`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::background::Background;
use crate::error::{Result, WorkspaceError};

/// Identity for commits chock writes, so a user with no git identity configured still gets a ref.
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "chock"),
    ("GIT_AUTHOR_EMAIL", "chock@localhost"),
    ("GIT_COMMITTER_NAME", "chock"),
    ("GIT_COMMITTER_EMAIL", "chock@localhost"),
];

/// Variables from the caller's environment that would point git somewhere else.
const SCRUBBED: [&str; 6] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
];

thread_local! {
    /// How many git processes this thread has started (see [`processes_started`]).
    static STARTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many git processes the calling thread has started so far: what the tests use to show that a
/// checkpoint with nothing new runs no git.
pub fn processes_started() -> u64 {
    STARTED.with(std::cell::Cell::get)
}

/// One repository, addressed by its top-level working directory.
#[derive(Debug, Clone)]
pub struct Git {
    top: PathBuf,
    index: Option<PathBuf>,
}

impl Git {
    /// The repository whose work tree is `top`.
    pub fn new(top: impl Into<PathBuf>) -> Self {
        Self {
            top: top.into(),
            index: None,
        }
    }

    /// The same repository, with commands reading and writing `index` instead of the user's index.
    pub fn with_index(&self, index: impl Into<PathBuf>) -> Self {
        Self {
            top: self.top.clone(),
            index: Some(index.into()),
        }
    }

    /// The repository's top-level working directory.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// Runs `git args` and returns its standard output.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.run_with_input(args, None)
    }

    /// Runs `git args` and returns its standard output as trimmed text.
    pub fn text(&self, args: &[&str]) -> Result<String> {
        let out = self.run(args)?;
        Ok(String::from_utf8_lossy(&out)
            .trim_end_matches('\n')
            .to_string())
    }

    /// Runs `git args` as [`Git::run`] does, for work nobody is waiting on yet (the base commit):
    /// at the lowest CPU priority, paused while a call runs, and killed if `control` is cancelled
    /// meanwhile (refused if it already was). See [`crate::background`].
    pub(crate) fn run_in_background(&self, args: &[&str], control: &Background) -> Result<Vec<u8>> {
        let child = control
            .started(|| {
                let child = self
                    .command(args)
                    .stdin(Stdio::null())
                    .spawn()
                    .map_err(|e| self.error(args, format!("cannot start git: {e}")))?;
                let pid = rustix::process::Pid::from_child(&child);
                // Best effort: a git at normal priority is slower for the calls, not wrong.
                let _ = rustix::process::setpriority_process(Some(pid), BACKGROUND_NICE);
                let pidfd =
                    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
                Ok((child, pidfd))
            })
            .map_err(|e| {
                e.unwrap_or_else(|| self.error(args, "cancelled before it started".into()))
            })?;
        let out = child.wait_with_output();
        control.finished();
        let out = out.map_err(|e| self.error(args, e.to_string()))?;
        if !out.status.success() {
            return Err(self.error(
                args,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(out.stdout)
    }

    /// Runs `git args` with `input` on standard input.
    pub fn run_with_input(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>> {
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd
            .spawn()
            .map_err(|e| self.error(args, format!("cannot start git: {e}")))?;
        let writer = input.map(|bytes| {
            let mut stdin = child.stdin.take().expect("stdin is piped");
            let bytes = bytes.to_vec();
            std::thread::spawn(move || stdin.write_all(&bytes))
        });
        let out = child
            .wait_with_output()
            .map_err(|e| self.error(args, e.to_string()))?;
        if let Some(writer) = writer {
            // A git that exits early closes its stdin; its own status says why.
            let _ = writer.join();
        }
        if !out.status.success() {
            return Err(self.error(
                args,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(out.stdout)
    }

    fn command(&self, args: &[&str]) -> Command {
        STARTED.with(|n| n.set(n.get() + 1));
        let mut cmd = Command::new("git");
        cmd.arg("-C")
            .arg(&self.top)
            .args(["-c", "core.quotepath=off"])
            .args(args);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        cmd.envs(IDENTITY)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn error(&self, args: &[&str], stderr: String) -> WorkspaceError {
        WorkspaceError::Git {
            args: args.join(" "),
            dir: self.top.clone(),
            stderr,
        }
    }

    /// Finds the repository containing `dir`: its top-level directory and `dir`'s path inside it
    /// (`""` at the top, else `sub/dir/`). `None` when `dir` is not in a git work tree.
    pub fn discover(dir: &Path) -> Option<(PathBuf, String)> {
        let out = Self::new(dir)
            .run(&["rev-parse", "--show-toplevel", "--show-prefix"])
            .ok()?;
        let text = String::from_utf8(out).ok()?;
        let mut lines = text.lines();
        let top = lines.next().filter(|t| !t.is_empty())?;
        let prefix = lines.next().unwrap_or("");
        Some((PathBuf::from(top), prefix.to_string()))
    }

    /// The commit `HEAD` names, or `None` on an unborn branch.
    pub fn head(&self) -> Option<String> {
        self.text(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// Where the user's own index lives.
    pub fn user_index(&self) -> Result<PathBuf> {
        let path = self.text(&["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
        Ok(PathBuf::from(path))
    }

    /// Where the loose file of ref `name` lives (it may not exist: packed, or another ref backend).
    pub fn ref_file(&self, name: &str) -> Result<PathBuf> {
        let path = self.text(&["rev-parse", "--path-format=absolute", "--git-path", name])?;
        Ok(PathBuf::from(path))
    }

    /// Writes `tree` as a commit with `parents` and `message`; returns its id.
    pub fn commit_tree(&self, tree: &str, parents: &[&str], message: &str) -> Result<String> {
        let mut args = vec!["commit-tree", tree];
        for parent in parents {
            args.push("-p");
            args.push(parent);
        }
        args.push("-m");
        args.push(message);
        self.text(&args)
    }
}

impl Git {
    /// Runs `git args` with `input` and returns trimmed text.
    pub fn text_with_input(&self, args: &[&str], input: &[u8]) -> Result<String> {
        let out = self.run_with_input(args, Some(input))?;
        Ok(String::from_utf8_lossy(&out)
            .trim_end_matches('\n')
            .to_string())
    }

    /// Which of the NUL-separated `paths` the repository's ignore rules exclude (as if untracked).
    /// `git check-ignore` exits 1 when none is ignored, which is not an error here.
    pub fn check_ignore(&self, paths: &[u8]) -> Result<Vec<u8>> {
        match self.run_with_input(
            &["check-ignore", "--no-index", "-z", "--stdin"],
            Some(paths),
        ) {
            Ok(out) => Ok(out),
            Err(WorkspaceError::Git { stderr, .. }) if stderr.is_empty() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// One `git cat-file --batch` kept open, so reading many blobs costs one process, not one each.
#[derive(Debug)]
pub struct ObjectReader {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    dir: PathBuf,
}

impl Git {
    /// Starts an object reader (`git cat-file --batch`) on this repository.
    pub fn object_reader(&self) -> Result<ObjectReader> {
        let mut cmd = self.command(&["cat-file", "--batch"]);
        cmd.stdin(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| self.error(&["cat-file", "--batch"], format!("cannot start git: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout is piped"));
        Ok(ObjectReader {
            child,
            stdin,
            stdout,
            dir: self.top.clone(),
        })
    }
}

impl ObjectReader {
    /// The bytes of object `sha`, which must be of type `kind` (`blob`, `tree`, `commit`).
    pub fn read(&mut self, sha: &str, kind: &str) -> Result<Vec<u8>> {
        use std::io::{BufRead, Read};
        let fail = |reason: String| WorkspaceError::Git {
            args: format!("cat-file --batch ({sha})"),
            dir: self.dir.clone(),
            stderr: reason,
        };
        let stdin = self.stdin.as_mut().ok_or_else(|| fail("closed".into()))?;
        stdin
            .write_all(format!("{sha}\n").as_bytes())
            .map_err(|e| fail(e.to_string()))?;
        stdin.flush().map_err(|e| fail(e.to_string()))?;
        let mut header = String::new();
        self.stdout
            .read_line(&mut header)
            .map_err(|e| fail(e.to_string()))?;
        let mut parts = header.split_whitespace();
        let (Some(_), Some(found), Some(size)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(fail(format!("unexpected answer `{}`", header.trim())));
        };
        let size: usize = size
            .parse()
            .map_err(|_| fail(format!("bad size in `{}`", header.trim())))?;
        let mut data = vec![0; size + 1];
        self.stdout
            .read_exact(&mut data)
            .map_err(|e| fail(e.to_string()))?;
        data.pop(); // the newline after the content
        if found != kind {
            return Err(fail(format!("a {found}, where a {kind} was expected")));
        }
        Ok(data)
    }
}

impl Drop for ObjectReader {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The nice value of a git process nobody waits on: the lowest priority.
pub(crate) const BACKGROUND_NICE: i32 = 19;
