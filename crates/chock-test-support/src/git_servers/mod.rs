//! Real git remotes a push test starts on loopback (feature `git-servers`): a smart-HTTP server that
//! takes a password ([`GitHttpServer`]) and an `sshd` whose only key sits in a test `ssh-agent`
//! ([`SshServer`], [`TestAgent`]). Each serves one bare repository, `repo.git`, on branch `main`.

mod http;
mod ssh;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use http::{GitHttpServer, HTTP_BACKEND, Served, base64};
pub use ssh::{SSH_AGENT, SSHD, SshServer, TestAgent};

/// Runs git in `cwd` with no user configuration and asserts it succeeded.
fn git(args: &[&str], cwd: &Path) {
    let out = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// An empty bare repository `repo.git` under `dir`, on branch `main`.
fn bare_repo(dir: &Path) -> PathBuf {
    git(&["init", "-q", "--bare", "-b", "main", "repo.git"], dir);
    dir.join("repo.git")
}

/// The commit `refs/heads/<branch>` names in the bare repository `repo`, if any.
fn rev(repo: &Path, branch: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("refs/heads/{branch}"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
