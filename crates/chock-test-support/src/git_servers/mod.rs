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

/// Adds a commit on `main` of the bare repository `repo` (after its tip, if any) holding one file,
/// `fetched.txt`, with `text`: what a fetch test expects to find in the workspace after.
fn add_commit(repo: &Path, text: &str) -> String {
    let run = |args: &[&str], input: Option<&str>| -> String {
        use std::io::Write;
        let mut child = Command::new("git")
            .arg("--git-dir")
            .arg(repo)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "server")
            .env("GIT_AUTHOR_EMAIL", "server@example.invalid")
            .env("GIT_COMMITTER_NAME", "server")
            .env("GIT_COMMITTER_EMAIL", "server@example.invalid")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git runs");
        if let Some(input) = input {
            child
                .stdin
                .take()
                .expect("its input")
                .write_all(input.as_bytes())
                .expect("git reads");
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().expect("git ends");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let blob = run(&["hash-object", "-w", "--stdin"], Some(text));
    let tree = run(
        &["mktree"],
        Some(&format!("100644 blob {blob}\tfetched.txt\n")),
    );
    let mut args = vec!["commit-tree", tree.as_str(), "-m", text];
    let parent = rev(repo, "main");
    if let Some(p) = &parent {
        args.extend(["-p", p.as_str()]);
    }
    let commit = run(&args, None);
    run(&["update-ref", "refs/heads/main", &commit], None);
    commit
}
