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
use std::process::Command;

use chock_policy::git::{
    Config, Direction, RemoteUrl, Scheme, UrlError, default_remote, resolve_remote,
};
use chock_policy::{Action, DecidedBy, Decision, Policy};

pub use refs::PushedRef;

/// Why a push cannot be planned. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The URL is not one a push may use (its scheme, a helper, a local path, a password in it).
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The remote the push names (or defaults to) is not in the host's repository configuration.
    #[error(
        "`{0}` is not a remote of the project's own git configuration, nor a URL whose host a project or org rule `git.push.<host>` names"
    )]
    UnknownRemote(String),
    /// A URL argument whose host no exact project or org rule lets a push reach.
    #[error(
        "a push to `{url}` needs a project or org rule `{action}` (a remote of the project's own configuration needs none)"
    )]
    NoRule {
        /// The URL the invocation named.
        url: String,
        /// The rule it would need.
        action: String,
    },
    /// A remote with several push URLs: each would be its own question.
    #[error(
        "the remote `{remote}` has {count} push URLs in the project's configuration; a push goes to one"
    )]
    SeveralUrls {
        /// The remote.
        remote: String,
        /// How many URLs.
        count: usize,
    },
    /// A refspec or option this cannot read with certainty.
    #[error("git push {0}: {1}")]
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
        let mut text = format!(
            "push {} to {} ({} {}:{}",
            refs.join("; "),
            self.url.text,
            self.url.scheme.as_str(),
            self.url.host,
            self.url.port
        );
        if let Some(remote) = &self.remote {
            text.push_str(&format!(", the project's remote `{remote}`"));
        }
        text.push(')');
        if self.url.scheme == Scheme::Http {
            text.push_str(" — unencrypted http: the password is sent in the clear");
        }
        let other: Vec<&String> = self
            .workspace_urls
            .iter()
            .filter(|u| **u != self.url.text)
            .collect();
        if !other.is_empty() {
            let other: Vec<&str> = other.iter().map(|u| u.as_str()).collect();
            text.push_str(&format!(
                "; the workspace's configuration says {}, which is not used",
                other.join(", ")
            ));
        }
        text
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

    /// Whether a credential prompt git wrote (`Password for 'http://alice@host:port': `) is about this
    /// push's remote: same scheme, host and port, and the same user when the prompt names one. Anything
    /// else — another host, an ssh prompt, text that is not git's — is not answered.
    pub fn prompt_kind(&self, prompt: &str) -> Option<PromptKind> {
        if self.url.scheme == Scheme::Ssh {
            return None;
        }
        let (kind, asked) = read_prompt(prompt).ok()?;
        let same = asked.scheme == self.url.scheme
            && asked.host == self.url.host
            && asked.port == self.url.port
            && (asked.user.is_none() || asked.user == self.url.user);
        same.then_some(kind)
    }

    /// Writes the git directory the push runs from: a bare repository with no configuration of its
    /// own, no hooks and no refs, whose `objects/info/alternates` lists `alternates` (the workspace's
    /// object directories as the pushing git sees them).
    pub fn write_push_dir(&self, dir: &Path, alternates: &[PathBuf]) -> Result<(), PushError> {
        for sub in ["objects/info", "refs/heads", "refs/tags"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| io_error(dir, &e))?;
        }
        let lines: Vec<String> = alternates.iter().map(|p| p.display().to_string()).collect();
        let writes = [
            ("HEAD", "ref: refs/heads/main\n".to_owned()),
            (
                "config",
                "[core]\n\trepositoryformatversion = 0\n\tbare = true\n".to_owned(),
            ),
            ("objects/info/alternates", format!("{}\n", lines.join("\n"))),
        ];
        for (name, text) in writes {
            std::fs::write(dir.join(name), text).map_err(|e| io_error(dir, &e))?;
        }
        Ok(())
    }
}

/// Reads a credential prompt git wrote for its askpass: `Password for 'https://alice@host:8443': `
/// (or `Username for '…': `) — which credential, and the URL it is for, read as a remote URL so its
/// host can name the act `secret.password.<host>`. git builds the text as `<What> for '<url>': `;
/// trailing white space is not held against it. Anything else — another wording, no quoted URL,
/// a URL whose host cannot be read, a password in it — is an error saying why, and nobody is asked.
pub fn read_prompt(prompt: &str) -> Result<(PromptKind, RemoteUrl), String> {
    let trimmed = prompt.trim_end();
    let (kind, rest) = if let Some(rest) = trimmed.strip_prefix("Password for '") {
        (PromptKind::Password, rest)
    } else if let Some(rest) = trimmed.strip_prefix("Username for '") {
        (PromptKind::Username, rest)
    } else {
        return Err(format!(
            "`{}` is not git's `Username for '<url>': ` or `Password for '<url>': `",
            trimmed.escape_debug()
        ));
    };
    let Some(quoted) = rest.strip_suffix("':") else {
        return Err(format!(
            "`{}` does not end with the quoted URL git names",
            trimmed.escape_debug()
        ));
    };
    let url = RemoteUrl::parse(quoted)
        .map_err(|e| format!("the prompt names no host that can be read: {e}"))?;
    if url.scheme == Scheme::Ssh {
        return Err(format!("`{}` is not an https or http URL", url.text));
    }
    Ok((kind, url))
}

/// Which credential a prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    /// `Username for '…': ` (answered from the URL's user when it has one).
    Username,
    /// `Password for '…': `.
    Password,
}

fn io_error(dir: &Path, e: &std::io::Error) -> PushError {
    PushError::Git {
        args: "(writing the push directory)".into(),
        dir: dir.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Runs the host's git in `dir` with the caller's environment (the user's own configuration counts:
/// it is the host's), minus the variables that would point it at another repository.
pub(crate) fn host_git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, PushError> {
    let failed = |reason: String| PushError::Git {
        args: args.join(" "),
        dir: dir.to_path_buf(),
        reason,
    };
    let mut cmd = Command::new("git");
    cmd.args(args).current_dir(dir);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(out.stdout)
}

/// The host repository's configuration as git reads it there (`git config --list -z`).
pub fn host_config(project: &Path) -> Result<Config, PushError> {
    let raw = host_git(project, &["config", "--list", "-z"])?;
    let entries: Vec<(String, Option<String>)> = raw
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = String::from_utf8_lossy(e);
            match e.split_once('\n') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (e.into_owned(), None),
            }
        })
        .collect();
    Config::layered(&entries, &[], &[]).map_err(|e| PushError::Git {
        args: "config --list -z".into(),
        dir: project.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Whether `policy` lets a push reach `url`'s host though no remote of the host names it: a project or
/// org rule whose pattern is exactly `git.push.<reversed host>` and that does not deny.
fn rule_names_host(policy: &Policy, url: &RemoteUrl) -> Result<(), PushError> {
    let action = url
        .push_action()
        .map_err(|_| UrlError::Host(url.text.clone()))?;
    let verdict = policy.decide(&action);
    let exact = match &verdict.decided_by {
        DecidedBy::Project { pattern, .. } | DecidedBy::Org { pattern, .. } => {
            pattern == action.as_str()
        }
        _ => false,
    };
    if exact && verdict.decision != Decision::Deny {
        Ok(())
    } else {
        Err(PushError::NoRule {
            url: url.text.clone(),
            action: action.as_str().to_owned(),
        })
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
    let named = match &request.remote {
        Some(arg) => arg.clone(),
        None => default_remote(&config, request.branch.as_deref(), Direction::Push),
    };
    let configured = config.value(&format!("remote.{named}.url")).is_some();
    let target = resolve_remote(&config, &named, Vec::new(), Direction::Push);
    let remote = if configured {
        Some(named.clone())
    } else if request.remote.is_some() && RemoteUrl::parse(&named).is_ok() {
        None
    } else {
        return Err(PushError::UnknownRemote(named));
    };
    if target.urls.len() != 1 {
        return Err(PushError::SeveralUrls {
            remote: named,
            count: target.urls.len(),
        });
    }
    let url = RemoteUrl::parse(&target.urls[0])?;
    let connect = url
        .connect_action()
        .map_err(|_| UrlError::Host(url.text.clone()))?;
    if remote.is_none() {
        rule_names_host(policy, &url)?;
    }
    let refs = refs::read(project, source, request, remote.as_deref())?;
    Ok(PushPlan {
        remote,
        url,
        refs,
        workspace_urls: request.workspace_urls.clone(),
        connect,
    })
}
