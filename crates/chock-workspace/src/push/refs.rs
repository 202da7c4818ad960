//! The refs a push writes: each refspec read, its commit taken from the workspace's objects, and its
//! range measured against what the host's repository last saw of the remote.

use std::path::Path;
use std::process::Command;

use super::{PushError, PushRequest, PushSource, host_git};

/// Options of `git push` a plan carries out as given; any other refuses the plan, naming it.
const PLAIN_OPTIONS: &[&str] = &[
    "-u",
    "--set-upstream",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--progress",
    "--no-progress",
    "--no-verify",
];

/// One ref a push writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedRef {
    /// The source as written (`main`, `HEAD`, `feature`).
    pub source: String,
    /// The commit it names in the workspace.
    pub commit: String,
    /// The remote ref written (`refs/heads/main`).
    pub destination: String,
    /// Whether it may overwrite history (`+` or `--force`).
    pub force: bool,
    /// The commit the host last saw at the destination (`refs/remotes/<remote>/<branch>`), if any.
    pub base: Option<String>,
    /// How many commits `base..commit` holds (all of `commit`'s history with no base), when countable.
    pub commits: Option<u64>,
}

impl PushedRef {
    /// `main (3f2a1b0c9d8e..9a8b7c6d5e4f, 2 commits) → refs/heads/main`.
    pub fn describe(&self) -> String {
        let short = |c: &str| c.chars().take(12).collect::<String>();
        let range = match &self.base {
            Some(base) => format!("{}..{}", short(base), short(&self.commit)),
            None => format!("{} and its history", short(&self.commit)),
        };
        let count = self.commits.map_or_else(String::new, |n| {
            format!(", {n} commit{}", if n == 1 { "" } else { "s" })
        });
        let force = if self.force { ", forced" } else { "" };
        format!(
            "{} ({range}{count}{force}) → {}",
            self.source, self.destination
        )
    }

    /// `[+]<commit>:<destination>`.
    pub fn refspec(&self) -> String {
        format!(
            "{}{}:{}",
            if self.force { "+" } else { "" },
            self.commit,
            self.destination
        )
    }
}

/// Runs git on the workspace's directory with no user or system configuration, so nothing but the
/// repository's own files is read, and no program of its configuration runs for a ref lookup.
fn workspace_git(source: &PushSource, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(&source.git_dir)
        .args(["-c", "core.fsmonitor=false"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit `name` names in the workspace, and its full ref name when it is a branch or tag.
fn resolve(source: &PushSource, name: &str) -> Option<(String, Option<String>)> {
    if name.starts_with('-') {
        return None;
    }
    let commit = workspace_git(
        source,
        &["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")],
    )?;
    let full = workspace_git(source, &["rev-parse", "--symbolic-full-name", name])
        .filter(|f| f.starts_with("refs/heads/") || f.starts_with("refs/tags/"));
    Some((commit, full))
}

/// Reads every refspec of `request` (the current branch when none is written).
pub(super) fn read(
    project: &Path,
    source: &PushSource,
    request: &PushRequest,
    remote: Option<&str>,
) -> Result<Vec<PushedRef>, PushError> {
    let refused =
        |what: &str, why: &str| PushError::Refspec(format!("push {what}"), why.to_owned());
    let mut force_all = false;
    for option in &request.options {
        match option.as_str() {
            "-f" | "--force" => force_all = true,
            o if PLAIN_OPTIONS.contains(&o) => {}
            o => {
                return Err(refused(
                    o,
                    "this option is not carried out by an approved push",
                ));
            }
        }
    }
    let specs = if request.refspecs.is_empty() {
        let branch = request
            .branch
            .clone()
            .ok_or_else(|| refused("", "no refspec and no current branch"))?;
        vec![branch]
    } else {
        request.refspecs.clone()
    };
    let mut refs = Vec::new();
    for spec in &specs {
        let (force, body) = match spec.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (force_all, spec.as_str()),
        };
        if body.contains('*') {
            return Err(refused(
                spec,
                "a glob refspec is not carried out by an approved push",
            ));
        }
        let (src, dst) = match body.split_once(':') {
            Some(("", _)) => {
                return Err(refused(
                    spec,
                    "deleting a remote ref is not carried out by an approved push",
                ));
            }
            Some((src, dst)) => (src, Some(dst)),
            None => (body, None),
        };
        let (commit, full) = resolve(source, src)
            .ok_or_else(|| refused(spec, "names no commit in the workspace"))?;
        let destination = match (dst, &full) {
            (Some(d), _) if d.starts_with("refs/") => d.to_owned(),
            (Some(d), Some(f)) if f.starts_with("refs/tags/") => format!("refs/tags/{d}"),
            (Some(d), _) if !d.is_empty() => format!("refs/heads/{d}"),
            (None, Some(f)) => f.clone(),
            _ => {
                return Err(refused(
                    spec,
                    "names no branch or tag to write (write `<commit>:refs/heads/<name>`)",
                ));
            }
        };
        let base = match (remote, destination.strip_prefix("refs/heads/")) {
            (Some(remote), Some(branch)) => {
                let tracking = format!("refs/remotes/{remote}/{branch}");
                host_git(project, &["rev-parse", "--verify", "-q", &tracking])
                    .ok()
                    .map(|o| String::from_utf8_lossy(&o).trim().to_owned())
                    .filter(|c| !c.is_empty())
            }
            _ => None,
        };
        let range = match &base {
            Some(b) => format!("{b}..{commit}"),
            None => commit.clone(),
        };
        let commits = workspace_git(source, &["rev-list", "--count", &range])
            .and_then(|n| n.parse::<u64>().ok());
        refs.push(PushedRef {
            source: src.to_owned(),
            commit,
            destination,
            force,
            base,
            commits,
        });
    }
    Ok(refs)
}
