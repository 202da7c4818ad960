//! What the push and fetch plan tests share: a policy from a table's text, the host's git, and a
//! project with an `origin` and a workspace cloned from it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use chock_policy::{Policy, Source, Sources};
use chock_test_support::GitProject;
use chock_workspace::PushSource;

pub fn policy(text: &str) -> Policy {
    Policy::from_sources(Sources {
        project: Some(Source {
            path: PathBuf::from("chock.toml"),
            text: text.to_owned(),
        }),
        org: None,
        project_dir: None,
        home: None,
        chock_dirs: Vec::new(),
        user: None,
    })
    .expect("the policy loads")
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A project whose `origin` is `url` and whose host has seen `origin/main` at the first commit, and a
/// workspace (a clone of it) with one more commit.
pub struct Setup {
    pub project: GitProject,
    pub workspace: PathBuf,
    pub first: String,
    pub second: String,
}

pub fn setup(url: &str) -> Setup {
    let project = GitProject::new();
    git(project.path(), &["remote", "add", "origin", url]);
    let first = git(project.path(), &["rev-parse", "HEAD"]);
    git(
        project.path(),
        &["update-ref", "refs/remotes/origin/main", &first],
    );
    let workspace = project.root().join("workspace");
    git(
        project.root(),
        &["clone", "-q", project.path().to_str().unwrap(), "workspace"],
    );
    std::fs::write(workspace.join("new.txt"), "new\n").unwrap();
    git(&workspace, &["add", "new.txt"]);
    git(&workspace, &["commit", "-qm", "second"]);
    let second = git(&workspace, &["rev-parse", "HEAD"]);
    Setup {
        project,
        workspace,
        first,
        second,
    }
}

impl Setup {
    pub fn source(&self) -> PushSource {
        PushSource {
            git_dir: self.workspace.join(".git"),
        }
    }

    /// What the workspace's own configuration says about `origin`, as the classifier reports it.
    pub fn workspace_urls(&self) -> Vec<String> {
        vec![git(
            &self.workspace,
            &["remote", "get-url", "--push", "origin"],
        )]
    }
}
