//! Real repositories and real overlay mounts for the workspace tests.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use chock_sandbox::WorkspaceMount;
use chock_workspace::Workspace;

/// A sessions root, a project, and helpers.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub project: PathBuf,
    pub sessions: PathBuf,
}

impl Env {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let project = tmp.path().join("project");
        let sessions = tmp.path().join("sessions");
        fs::create_dir_all(&project).unwrap();
        fs::create_dir_all(&sessions).unwrap();
        Self {
            tmp,
            project,
            sessions,
        }
    }

    /// A project that is a git repository with `files` committed.
    pub fn git(files: &[(&str, &str)]) -> Self {
        let env = Self::new();
        env.sh("git init -q -b main . && git config user.name t && git config user.email t@t");
        for (path, text) in files {
            env.write(path, text);
        }
        env.sh("git add -A && git commit -q -m init");
        env
    }

    pub fn write(&self, path: &str, text: &str) {
        let p = self.project.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        fs::read_to_string(self.project.join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    pub fn exists(&self, path: &str) -> bool {
        fs::symlink_metadata(self.project.join(path)).is_ok()
    }

    pub fn mode(&self, path: &str) -> u32 {
        fs::metadata(self.project.join(path))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    /// Runs `script` with sh in the project; panics on failure; returns stdout.
    pub fn sh(&self, script: &str) -> String {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.project)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{script}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions.join(id)
    }

    /// Creates a workspace for session `id` and waits for its base.
    pub fn workspace(&self, id: &str) -> Workspace {
        let dir = self.session_dir(id);
        fs::create_dir_all(&dir).unwrap();
        let ws = Workspace::create(&self.project, &dir, id).expect("create workspace");
        ws.wait_base().expect("base");
        ws
    }
}

/// Runs `script` inside the workspace exactly as a tool call sees it: in a new user and mount
/// namespace, with the overlay mounted over the project's own path (`userxattr`, as the sandbox
/// driver mounts it), and the script's cwd in the project.
pub fn in_overlay(ws: &Workspace, script: &str) {
    let WorkspaceMount::Overlay { lower, upper, work } = ws.mount() else {
        panic!("not an overlay")
    };
    let mount = format!(
        "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={},userxattr {} && cd {} && {}",
        lower.display(),
        upper.display(),
        work.display(),
        lower.display(),
        lower.display(),
        script
    );
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &mount])
        .output()
        .expect("unshare");
    assert!(
        out.status.success(),
        "in overlay `{script}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}
