//! Where an approved `git fetch` or `git pull` that gets a credential may read from, and how it is
//! carried out — the push's counterpart (docs/git.md, "The approved fetch and pull").
//!
//! [`plan_fetch`] reads the **host's** configuration now and picks the remote and URL the same way
//! a push does ([`crate::remote`]): the workspace's `origin`, `url`, `insteadOf` are shown beside the
//! target and never decide it; a URL no remote of the host names needs an exact project or org rule
//! `git.fetch.<reversed host>`. The refs fetched are the invocation's (a branch name is read as
//! `refs/heads/<name>`, written to the host's tracking ref for it) or, with none, the host's own
//! `remote.<name>.fetch` refspecs (a pull: the branch's `branch.<b>.merge`).
//!
//! The fetch runs from a git directory the host writes ([`FetchPlan::write_fetch_dir`]): its own
//! `config` (nothing of the workspace's is read, so no `insteadOf`, `credential.helper` or
//! `http.proxy` of the agent's), no hooks, and symbolic links to the workspace's `objects`, `refs`,
//! `packed-refs`, `shallow` and `FETCH_HEAD`, so what is fetched lands in the workspace. A pull then
//! merges (or with `--rebase` rebases onto) `FETCH_HEAD` in the workspace: a local act of its own,
//! asked like any other ([`FetchPlan::then_args`]).

use std::path::{Path, PathBuf};

use chock_policy::git::RemoteUrl;
use chock_policy::{Action, Policy};

use crate::push::PushError;
use crate::remote::{Reach, RemoteOp, RemotePlan, host_config, reach, write_git_dir};

/// Options handed to the fetch as given.
const FETCH_OPTIONS: &[&str] = &[
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--progress",
    "--no-progress",
    "-f",
    "--force",
    "-t",
    "--tags",
    "-n",
    "--no-tags",
];

/// Options of `git pull` handed to its merge.
const MERGE_OPTIONS: &[&str] = &[
    "--ff",
    "--no-ff",
    "--ff-only",
    "--edit",
    "--no-edit",
    "--commit",
    "--no-commit",
    "--squash",
    "--no-squash",
    "--stat",
    "--no-stat",
];

/// What the invocation in the sandbox asked for, as the classifier read it on the workspace's view.
#[derive(Debug, Clone, Default)]
pub struct FetchRequest {
    /// `git pull` rather than `git fetch`.
    pub pull: bool,
    /// The argument naming the remote (a name or a URL), as written; `None` for git's default.
    pub remote: Option<String>,
    /// The refspecs after it.
    pub refspecs: Vec<String>,
    /// The options given.
    pub options: Vec<String>,
    /// The workspace's current branch, for the default remote and a pull's upstream.
    pub branch: Option<String>,
    /// The URLs the workspace's own configuration would have used: shown beside the real source.
    pub workspace_urls: Vec<String>,
}

/// An approved fetch's (or pull's) whole plan: shown in the question, logged, carried out exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPlan {
    /// `git pull` rather than `git fetch`.
    pub pull: bool,
    /// The remote's name in the host's configuration (`None` for a URL a rule let through).
    pub remote: Option<String>,
    /// Where it reads from.
    pub url: RemoteUrl,
    /// The refspecs carried out (`+refs/heads/main:refs/remotes/origin/main`).
    pub refspecs: Vec<String>,
    /// The options handed to the fetch.
    pub options: Vec<String>,
    /// A pull's next step in the workspace (`merge FETCH_HEAD`), asked as its own act.
    pub then: Option<Vec<String>>,
    /// What the workspace's configuration would have used instead, when that differs.
    pub workspace_urls: Vec<String>,
    connect: Action,
}

impl FetchPlan {
    /// The question's text: the refs, the URL, what the workspace said if it differs, and a pull's
    /// merge.
    pub fn question(&self) -> String {
        let reach = Reach {
            remote: self.remote.clone(),
            url: self.url.clone(),
            connect: self.connect.clone(),
        };
        let refs = if self.refspecs.is_empty() {
            "the remote's HEAD".to_owned()
        } else {
            self.refspecs.join(", ")
        };
        let mut text = format!("fetch {refs} from {}", reach.describe());
        if let Some(then) = &self.then {
            text.push_str(&format!(", then `git {}` in the workspace", then.join(" ")));
        }
        text.push_str(&reach.not_used(&self.workspace_urls));
        text
    }

    /// The arguments after `git` that carry the fetch out, from the host's URL.
    pub fn git_args(&self) -> Vec<String> {
        let mut args = vec!["fetch".to_owned(), "--no-auto-maintenance".to_owned()];
        args.extend(self.options.iter().cloned());
        args.push("--".to_owned());
        args.push(self.url.text.clone());
        args.extend(self.refspecs.iter().cloned());
        args
    }

    /// The arguments of a pull's second step, run in the workspace after the fetch succeeded.
    pub fn then_args(&self) -> Option<Vec<String>> {
        self.then.clone()
    }

    /// The environment the fetch runs with: the git directory the host wrote, no user or system
    /// configuration, no terminal prompt.
    pub fn git_env(&self, fetch_dir: &Path) -> Vec<(String, String)> {
        vec![
            ("GIT_DIR".into(), fetch_dir.display().to_string()),
            ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ]
    }

    /// Writes the git directory the fetch runs from: its own `HEAD` and `config`, no hooks, and
    /// links to the workspace's `objects`, `refs`, `packed-refs`, `shallow` and `FETCH_HEAD`
    /// (`workspace_git_dir` as the fetching git sees it), so objects and refs land there.
    pub fn write_fetch_dir(&self, dir: &Path, workspace_git_dir: &Path) -> Result<(), PushError> {
        let links: Vec<(&str, PathBuf)> =
            ["objects", "refs", "packed-refs", "shallow", "FETCH_HEAD"]
                .into_iter()
                .map(|name| (name, workspace_git_dir.join(name)))
                .collect();
        write_git_dir(dir, &[], &links)
    }
}

impl RemotePlan for FetchPlan {
    fn op(&self) -> RemoteOp {
        RemoteOp::Fetch
    }
    fn url(&self) -> &RemoteUrl {
        &self.url
    }
    fn connect_action(&self) -> &Action {
        &self.connect
    }
    fn question(&self) -> String {
        FetchPlan::question(self)
    }
}

/// Plans a fetch or pull: reads the host's configuration in `project` now, picks the URL from it
/// and the refs to fetch.
pub fn plan_fetch(
    project: &Path,
    request: &FetchRequest,
    policy: &Policy,
) -> Result<FetchPlan, PushError> {
    let what = if request.pull { "pull" } else { "fetch" };
    let refused = |spec: &str, why: &str| PushError::Refspec(format!("{what} {spec}"), why.into());
    let config = host_config(project)?;
    let Reach {
        remote,
        url,
        connect,
    } = reach(
        &config,
        RemoteOp::Fetch,
        request.remote.as_deref(),
        request.branch.as_deref(),
        policy,
    )?;
    let mut options = Vec::new();
    let mut merge = Vec::new();
    let mut rebase = false;
    for option in &request.options {
        let o = option.as_str();
        if FETCH_OPTIONS.contains(&o) && !(request.pull && matches!(o, "-t" | "--tags")) {
            options.push(option.clone());
        } else if request.pull && MERGE_OPTIONS.contains(&o) {
            merge.push(option.clone());
        } else if request.pull && matches!(o, "-r" | "--rebase") {
            rebase = true;
        } else if request.pull && o == "--no-rebase" {
            rebase = false;
        } else {
            return Err(refused(
                o,
                "this option is not carried out by an approved fetch",
            ));
        }
    }
    // The host's refspecs for the remote: `+refs/heads/*:refs/remotes/origin/*`.
    let configured: Vec<String> = match &remote {
        Some(name) => {
            let key = format!("remote.{name}.fetch");
            config
                .entries()
                .iter()
                .filter(|(k, _)| *k == key)
                .filter_map(|(_, v)| v.clone())
                .collect()
        }
        None => Vec::new(),
    };
    let mut wanted = request.refspecs.clone();
    if wanted.is_empty() && request.pull {
        let branch = request
            .branch
            .as_deref()
            .ok_or_else(|| refused("", "no refspec and no current branch"))?;
        let upstream = config.value(&format!("branch.{branch}.merge"));
        let its_remote = config.value(&format!("branch.{branch}.remote"));
        match (upstream, its_remote) {
            (Some(merge_ref), Some(r)) if Some(r) == remote.as_deref() => {
                wanted.push(merge_ref.to_owned())
            }
            _ => {
                return Err(refused(
                    "",
                    "the project's configuration names no upstream of the current branch on this remote; name the branch (`git pull origin main`)",
                ));
            }
        }
    }
    let refspecs = if wanted.is_empty() {
        configured
    } else {
        let mut out = Vec::new();
        for spec in &wanted {
            out.push(carried(spec, &configured, request.pull).map_err(|why| refused(spec, why))?);
        }
        out
    };
    let then = request.pull.then(|| {
        let mut args = if rebase {
            vec!["rebase".to_owned()]
        } else {
            let mut a = vec!["merge".to_owned()];
            a.extend(merge.iter().cloned());
            a
        };
        args.push("FETCH_HEAD".to_owned());
        args
    });
    if rebase && !merge.is_empty() {
        return Err(refused(
            &merge.join(" "),
            "merge options are not carried out with `--rebase`",
        ));
    }
    Ok(FetchPlan {
        pull: request.pull,
        remote,
        url,
        refspecs,
        options,
        then,
        workspace_urls: request.workspace_urls.clone(),
        connect,
    })
}

/// One refspec as it is carried out: `main` is `refs/heads/main`, written to the tracking ref the
/// host's refspecs give it (`+refs/heads/main:refs/remotes/origin/main`) so the workspace has it;
/// a spec with a destination is kept. A glob in a pull, a negative or empty source are refused.
fn carried(spec: &str, configured: &[String], pull: bool) -> Result<String, &'static str> {
    let (force, body) = match spec.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    if body.is_empty() || body.starts_with('^') || body.starts_with(':') || body.starts_with('-') {
        return Err("names no ref of the remote to fetch");
    }
    if pull && body.contains('*') {
        return Err("a glob refspec is not merged by an approved pull");
    }
    if body.contains(':') {
        return Ok(spec.to_owned());
    }
    let full = if body.starts_with("refs/") || body == "HEAD" {
        body.to_owned()
    } else {
        format!("refs/heads/{body}")
    };
    for c in configured {
        let (cforce, cbody) = match c.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, c.as_str()),
        };
        let Some((src, dst)) = cbody.split_once(':') else {
            continue;
        };
        let mapped = match (src.split_once('*'), dst.split_once('*')) {
            (Some((sp, ss)), Some((dp, ds))) => full
                .strip_prefix(sp)
                .and_then(|rest| rest.strip_suffix(ss))
                .map(|mid| format!("{dp}{mid}{ds}")),
            (None, None) if src == full => Some(dst.to_owned()),
            _ => None,
        };
        if let Some(dst) = mapped {
            let plus = if force || cforce { "+" } else { "" };
            return Ok(format!("{plus}{full}:{dst}"));
        }
    }
    Ok(format!("{}{full}", if force { "+" } else { "" }))
}
