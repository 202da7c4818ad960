//! Where an approved `git push` may go, decided on the host from the **host's** repository
//! configuration, read at approval time: the workspace's `origin`, `pushurl`, `insteadOf` and
//! `pushRemote` are the agent's to rewrite, so they are shown beside the real target and never decide
//! it. docs/git.md, "The push".
//!
//! [`plan_push`] turns what the invocation asked for ([`PushRequest`]) into a [`PushPlan`]: the host's
//! URL for the remote (or, for a URL no remote of the host names, only a project or org rule
//! `git.push.<reversed host>` naming that host exactly), its scheme, host and port, and each ref with
//! its commit and range read from the workspace's objects. The plan gives the question's text, the one
//! connection the call is given (`net.connect.<host>.<port>`), the git arguments that push commits by
//! id to that URL from a git directory the host writes (so no configuration of the workspace's is read
//! by the push), and the test a credential prompt must pass before anyone is asked for a password.

mod refs;

use std::path::{Path, PathBuf};

use chock_policy::git::{RemoteUrl, UrlError};
use chock_policy::{Action, Policy};

pub(crate) use crate::remote::host_git;
use crate::remote::{Reach, RemoteOp, RemotePlan, host_config, reach, write_git_dir};
pub use refs::PushedRef;

/// Why a push cannot be planned. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The URL is not one a push may use (its scheme, a helper, a local path, a password in it).
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The remote the operation names (or defaults to) is not in the host's repository configuration.
    #[error(
        "`{0}` is not a remote of the project's own git configuration, nor a URL whose host a project or org rule (`git.push.<host>`, `git.fetch.<host>`) names"
    )]
    UnknownRemote(String),
    /// A URL argument whose host no exact project or org rule lets the operation reach.
    #[error(
        "reaching `{url}` with a credential needs a project or org rule `{action}` (a remote of the project's own configuration needs none)"
    )]
    NoRule {
        /// The URL the invocation named.
        url: String,
        /// The rule it would need.
        action: String,
    },
    /// A remote with several URLs for the operation: each would be its own question.
    #[error(
        "the remote `{remote}` has {count} URLs for this in the project's configuration; an approved push or fetch reaches one"
    )]
    SeveralUrls {
        /// The remote.
        remote: String,
        /// How many URLs.
        count: usize,
    },
    /// A refspec or option this cannot read with certainty.
    #[error("git {0}: {1}")]
    Refspec(String, String),
    /// git on the host could not be run, or failed.
    #[error("git {args} in {dir}: {reason}")]
    Git {
        /// The arguments.
        args: String,
        /// Where.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// What the invocation in the sandbox asked for, as the classifier read it on the workspace's view.
#[derive(Debug, Clone, Default)]
pub struct PushRequest {
    /// The argument naming the remote (a name or a URL), as written; `None` for git's default.
    pub remote: Option<String>,
    /// The refspecs after it.
    pub refspecs: Vec<String>,
    /// The options given (`-f`, `--force`, `-u`, `-q`, …).
    pub options: Vec<String>,
    /// The workspace's current branch (what `HEAD` names), for the default remote and refspec.
    pub branch: Option<String>,
    /// The URLs the workspace's own configuration would have used: shown beside the real target, so a
    /// rewritten `origin` is visible.
    pub workspace_urls: Vec<String>,
}

/// Where the workspace's commits are, as the host reads them.
#[derive(Debug, Clone)]
pub struct PushSource {
    /// The workspace's git directory (its refs name the commits pushed, its objects hold them).
    pub git_dir: PathBuf,
}

/// An approved push's whole plan: shown in the question, logged, and carried out exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushPlan {
    /// The remote's name in the host's configuration (`None` for a URL a rule let through).
    pub remote: Option<String>,
    /// Where the push goes.
    pub url: RemoteUrl,
    /// The refs it writes, with their commits and ranges.
    pub refs: Vec<PushedRef>,
    /// What the workspace's configuration would have used instead, when that differs.
    pub workspace_urls: Vec<String>,
    /// `net.connect.<reversed host>.<port>` for the URL.
    connect: Action,
}

impl PushPlan {
    /// The question's text: each ref with its range, the URL, and what the workspace said if it differs.
    pub fn question(&self) -> String {
        let refs: Vec<String> = self.refs.iter().map(PushedRef::describe).collect();
        let reach = self.reach();
        format!(
            "push {} to {}{}",
            refs.join("; "),
            reach.describe(),
            reach.not_used(&self.workspace_urls)
        )
    }

    fn reach(&self) -> Reach {
        Reach {
            remote: self.remote.clone(),
            url: self.url.clone(),
            connect: self.connect.clone(),
        }
    }

    /// `net.connect.<reversed host>.<port>`: the one connection the approved call is given.
    pub fn connect_action(&self) -> &Action {
        &self.connect
    }

    /// The arguments after `git` that carry the plan out: `push <url> <commit>:<ref>…`, commits by id,
    /// so no ref or configuration of the workspace's decides what is sent or where.
    pub fn git_args(&self) -> Vec<String> {
        let mut args = vec!["push".to_owned(), "--".to_owned(), self.url.text.clone()];
        args.extend(self.refs.iter().map(PushedRef::refspec));
        args.insert(1, "--no-verify".to_owned());
        args
    }

    /// The environment the push runs with: the git directory the host wrote, no user or system
    /// configuration, no terminal prompt.
    pub fn git_env(&self, push_dir: &Path) -> Vec<(String, String)> {
        vec![
            ("GIT_DIR".into(), push_dir.display().to_string()),
            ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ]
    }

    /// Writes the git directory the push runs from: a bare repository with no configuration of its
    /// own, no hooks and no refs, whose `objects/info/alternates` lists `alternates` (the workspace's
    /// object directories as the pushing git sees them).
    pub fn write_push_dir(&self, dir: &Path, alternates: &[PathBuf]) -> Result<(), PushError> {
        for sub in ["refs/heads", "refs/tags"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| PushError::Git {
                args: "(writing the push directory)".into(),
                dir: dir.to_path_buf(),
                reason: e.to_string(),
            })?;
        }
        let lines: Vec<String> = alternates.iter().map(|p| p.display().to_string()).collect();
        let alternates = format!("{}\n", lines.join("\n"));
        write_git_dir(dir, &[("objects/info/alternates", alternates)], &[])
    }
}

impl RemotePlan for PushPlan {
    fn op(&self) -> RemoteOp {
        RemoteOp::Push
    }
    fn url(&self) -> &RemoteUrl {
        &self.url
    }
    fn connect_action(&self) -> &Action {
        &self.connect
    }
    fn question(&self) -> String {
        PushPlan::question(self)
    }
}

/// Plans a push: reads the host's configuration in `project` now, picks the URL from it, reads each
/// ref's commit from `source` and its range against what the host last saw of the remote.
pub fn plan_push(
    project: &Path,
    source: &PushSource,
    request: &PushRequest,
    policy: &Policy,
) -> Result<PushPlan, PushError> {
    let config = host_config(project)?;
    let Reach {
        remote,
        url,
        connect,
    } = reach(
        &config,
        RemoteOp::Push,
        request.remote.as_deref(),
        request.branch.as_deref(),
        policy,
    )?;
    let refs = refs::read(project, source, request, remote.as_deref())?;
    Ok(PushPlan {
        remote,
        url,
        refs,
        workspace_urls: request.workspace_urls.clone(),
        connect,
    })
}
