//! The git remotes the push tests start are real: git pushes to them with the credential and only with it.
#![cfg(feature = "git-servers")]

use std::path::Path;
use std::process::{Command, Output};

use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND, SSHD, SshServer};
use chock_test_support::{GitProject, installed};

/// Runs git in `dir` with no user configuration and the given environment.
fn git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("SSH_AUTH_SOCK")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("git runs")
}

fn head(project: &GitProject) -> String {
    let out = git(project.path(), &["rev-parse", "HEAD"], &[]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An askpass program that prints `answer`.
fn askpass(dir: &Path, answer: &str) -> String {
    let path = dir.join(format!("askpass-{}", answer.len()));
    std::fs::write(&path, format!("#!/bin/sh\necho '{answer}'\n")).expect("the script");
    let out = Command::new("chmod").arg("+x").arg(&path).output();
    assert!(out.is_ok_and(|o| o.status.success()));
    path.display().to_string()
}

#[test]
fn the_http_server_takes_a_push_with_its_password_only() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let server = GitHttpServer::start("alice", "s3cret-horse");
    let project = GitProject::new();
    let wrong = askpass(project.root(), "not-it");
    let out = git(
        project.path(),
        &["push", &server.url(), "main"],
        &[("GIT_ASKPASS", &wrong)],
    );
    assert!(!out.status.success(), "a wrong password pushed: {out:?}");
    assert_eq!(server.head("main"), None);
    assert!(!server.saw_the_password());

    let right = askpass(project.root(), server.password());
    let out = git(
        project.path(),
        &["push", &server.url(), "main"],
        &[("GIT_ASKPASS", &right)],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.head("main"), Some(head(&project)));
    assert!(server.saw_the_password());
    let fetched = git(
        project.path(),
        &["ls-remote", &server.url()],
        &[("GIT_ASKPASS", &right)],
    );
    assert!(String::from_utf8_lossy(&fetched.stdout).contains(&head(&project)));
}

#[test]
fn the_ssh_server_takes_a_push_signed_by_the_test_agent_only() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let project = GitProject::new();
    let ssh = format!("ssh {}", server.ssh_options().join(" "));
    let out = git(
        project.path(),
        &["push", &server.url(), "main"],
        &[("GIT_SSH_COMMAND", &ssh)],
    );
    assert!(!out.status.success(), "pushed with no agent: {out:?}");
    assert_eq!(server.head("main"), None);

    let sock = server.agent().socket().display().to_string();
    let out = git(
        project.path(),
        &["push", &server.url(), "main"],
        &[("GIT_SSH_COMMAND", &ssh), ("SSH_AUTH_SOCK", &sock)],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.head("main"), Some(head(&project)));
}
