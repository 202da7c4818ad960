//! A project directory that is a git repository with a first commit.

use std::path::{Path, PathBuf};

/// A temporary directory holding `project/` (a git repository whose files are committed) and
/// room beside it (a sessions root, recordings). Removed when dropped.
#[derive(Debug)]
pub struct GitProject {
    tmp: tempfile::TempDir,
    project: PathBuf,
}

impl GitProject {
    /// A project holding `files` (relative path, content), committed on branch `main`.
    pub fn with_files(files: &[(&str, &str)]) -> GitProject {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).expect("the project directory");
        let me = GitProject { tmp, project };
        for (path, content) in files {
            me.write(path, content);
        }
        me.git(&["init", "-q", "-b", "main"]);
        me.commit("init");
        me
    }

    /// A project holding one `README.md`.
    pub fn new() -> GitProject {
        GitProject::with_files(&[("README.md", "hello\n")])
    }

    /// The project.
    pub fn path(&self) -> &Path {
        &self.project
    }

    /// The temporary directory holding the project (for a sessions root, recordings).
    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// Writes `content` to `path` in the project (its directories made).
    pub fn write(&self, path: &str, content: &str) {
        let file = self.project.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).expect("the file's directory");
        }
        std::fs::write(&file, content).expect("the file");
    }

    /// Commits everything in the project.
    pub fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-qm", message]);
    }

    /// Runs git in the project, with no user configuration, and asserts it succeeded.
    pub fn git(&self, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&self.project)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

impl Default for GitProject {
    fn default() -> Self {
        GitProject::new()
    }
}
