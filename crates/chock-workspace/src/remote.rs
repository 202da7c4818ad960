//! Where a git operation that gets a credential may go — an approved push, fetch or pull — decided
//! on the host from the **host's** repository configuration, read at approval time. One place for
//! what every such operation shares: which remote and URL ([`reach`]), the one connection it is
//! given, whether a credential prompt git writes is about that remote ([`RemotePlan::prompt_kind`]),
//! and the host's own git ([`host_git`], [`host_config`]). docs/git.md, "The approved push" and
//! "The approved fetch and pull".

use std::path::Path;
use std::process::Command;

use chock_policy::git::{
    Config, Direction, RemoteUrl, Scheme, UrlError, default_remote, resolve_remote,
};
use chock_policy::{Action, DecidedBy, Decision, Policy};

use crate::push::PushError;

/// Which operation reaches the remote: it picks the URL git would use (`pushurl`/`pushInsteadOf`
/// for a push) and the rule that lets it reach a URL no remote of the host names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOp {
    /// `git push`: writes to the remote.
    Push,
    /// `git fetch` or `git pull`: reads from the remote.
    Fetch,
}

impl RemoteOp {
    /// `push` or `fetch`, as in the act's name.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteOp::Push => "push",
            RemoteOp::Fetch => "fetch",
        }
    }

    /// `push to` or `fetch from`, as a sentence names it before the URL.
    pub fn toward(self) -> &'static str {
        match self {
            RemoteOp::Push => "push to",
            RemoteOp::Fetch => "fetch from",
        }
    }

    fn direction(self) -> Direction {
        match self {
            RemoteOp::Push => Direction::Push,
            RemoteOp::Fetch => Direction::Read,
        }
    }

    /// `git.push.<reversed host>` or `git.fetch.<reversed host>` for `url`.
    pub fn rule_action(self, url: &RemoteUrl) -> Result<Action, UrlError> {
        let action = match self {
            RemoteOp::Push => url.push_action(),
            RemoteOp::Fetch => url.fetch_action(),
        };
        action.map_err(|_| UrlError::Host(url.text.clone()))
    }
}

/// What an approved remote operation is, as the call's credentials need it: the URL prompts must
/// name, the one connection the call is given, and the question a person answered.
pub trait RemotePlan {
    /// Push or fetch.
    fn op(&self) -> RemoteOp;
    /// Where it goes.
    fn url(&self) -> &RemoteUrl;
    /// `net.connect.<reversed host>.<port>`: the one connection the approved call is given.
    fn connect_action(&self) -> &Action;
    /// The question's text.
    fn question(&self) -> String;

    /// Whether a credential prompt git wrote (`Password for 'http://alice@host:port': `) is about
    /// this plan's remote: same scheme, host and port, and the same user when the prompt names one.
    /// Anything else — another host, an ssh prompt, text that is not git's — is not answered.
    fn prompt_kind(&self, prompt: &str) -> Option<PromptKind> {
        let url = self.url();
        if url.scheme == Scheme::Ssh {
            return None;
        }
        let (kind, asked) = read_prompt(prompt).ok()?;
        let same = asked.scheme == url.scheme
            && asked.host == url.host
            && asked.port == url.port
            && (asked.user.is_none() || asked.user == url.user);
        same.then_some(kind)
    }
}

/// Where an operation goes: the host's remote it names (`None` for a URL a rule let through), its
/// URL, and the connection that URL needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reach {
    pub remote: Option<String>,
    pub url: RemoteUrl,
    pub connect: Action,
}

/// Picks where `op` goes from the host's `config`: `arg` (a remote's name or a URL, as written), or
/// with none the host's default remote for `branch`. A name must be a remote of the host's; a URL
/// no remote names needs an exact project or org rule `git.<op>.<reversed host>`; a remote with
/// several URLs for `op` is refused, and so is a URL whose scheme cannot be read.
pub(crate) fn reach(
    config: &Config,
    op: RemoteOp,
    arg: Option<&str>,
    branch: Option<&str>,
    policy: &Policy,
) -> Result<Reach, PushError> {
    let named = match arg {
        Some(arg) => arg.to_owned(),
        None => default_remote(config, branch, op.direction()),
    };
    let configured = config.value(&format!("remote.{named}.url")).is_some();
    let target = resolve_remote(config, &named, Vec::new(), op.direction());
    let remote = if configured {
        Some(named.clone())
    } else if arg.is_some() && RemoteUrl::parse(&named).is_ok() {
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
        rule_names_host(policy, op, &url)?;
    }
    Ok(Reach {
        remote,
        url,
        connect,
    })
}

impl Reach {
    /// `https://host/r.git (https host:443, the project's remote `origin`)`, and a warning for http.
    pub(crate) fn describe(&self) -> String {
        let mut text = format!(
            "{} ({} {}:{}",
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
        text
    }

    /// `; the workspace's configuration says <url>, which is not used` when it says something else.
    pub(crate) fn not_used(&self, workspace_urls: &[String]) -> String {
        let other: Vec<&str> = workspace_urls
            .iter()
            .filter(|u| **u != self.url.text)
            .map(String::as_str)
            .collect();
        if other.is_empty() {
            String::new()
        } else {
            format!(
                "; the workspace's configuration says {}, which is not used",
                other.join(", ")
            )
        }
    }
}

/// Whether `policy` lets `op` reach `url`'s host though no remote of the host names it: a project
/// or org rule whose pattern is exactly `git.<op>.<reversed host>` and that does not deny.
fn rule_names_host(policy: &Policy, op: RemoteOp, url: &RemoteUrl) -> Result<(), PushError> {
    let action = op.rule_action(url)?;
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

/// Writes a git directory an approved operation runs from: `HEAD`, a `config` of its own (bare, so
/// no reflog, nothing else), no hooks; then `links`, each a name in it and the path (as the call
/// sees it) it is a symbolic link to.
pub(crate) fn write_git_dir(
    dir: &Path,
    extra: &[(&str, String)],
    links: &[(&str, std::path::PathBuf)],
) -> Result<(), PushError> {
    let io = |e: std::io::Error| PushError::Git {
        args: "(writing the operation's git directory)".into(),
        dir: dir.to_path_buf(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut writes = vec![
        ("HEAD", "ref: refs/heads/main\n".to_owned()),
        (
            "config",
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n".to_owned(),
        ),
    ];
    writes.extend(extra.iter().cloned());
    for (name, text) in writes {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(path, text).map_err(io)?;
    }
    for (name, target) in links {
        std::os::unix::fs::symlink(target, dir.join(name)).map_err(io)?;
    }
    Ok(())
}
