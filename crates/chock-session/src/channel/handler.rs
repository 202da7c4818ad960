//! The session's answers on a call's channel: a git invocation classified on the host, from the
//! repository as the call sees it, and settled through the call's pipeline like any other act.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chock_decide::Pipeline;
use chock_policy::git::{self, Invocation};
use chock_sandbox::BoxFuture;

use super::serve::{Handler, Reply};
use super::{Answer, GitAnswer, GitRequest, Request};
use crate::call::refused_words;
use crate::git_shim::{Gits, Wiring};

/// One call's answerer: the session's pipeline under the call's id, and the host's real gits.
pub(crate) struct CallChannel<'a> {
    pub pipeline: &'a Pipeline,
    pub call_id: &'a str,
    pub gits: &'a Gits,
    pub wiring: &'a Wiring,
    /// The push a person approved in this call, for `chock askpass`.
    pub credentials: &'a super::Credentials,
}

impl Handler for CallChannel<'_> {
    fn answer(&self, request: Request, peer: Option<u32>) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            match request {
                Request::Git(git) => self.git(git, peer).await,
                Request::Askpass(ask) => Reply::plain(Answer::Askpass(
                    self.credentials
                        .answer(self.pipeline, self.call_id, &ask.prompt)
                        .await,
                )),
            }
        })
    }
}

impl CallChannel<'_> {
    async fn git(&self, req: GitRequest, peer: Option<u32>) -> Reply {
        let refused = |reason: String| {
            Reply::plain(Answer::Refused {
                reason: format!("git: {reason}"),
            })
        };
        let Some(pid) = peer else {
            return refused("the asking process could not be identified".into());
        };
        // The call's own view of its files: the asking process's root and working directory,
        // whatever the request claims.
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        if let Err(reason) = same_dir(&root, &req.cwd, pid) {
            return refused(reason);
        }
        let (invocation, git_dir) = {
            let mut req = req.clone();
            // A git an approved push runs (its `pack-objects`) carries what the host set for it.
            req.env = self.credentials.without_handed(&req.env);
            let root = root.clone();
            let gits = self.gits.clone();
            match tokio::task::spawn_blocking(move || invocation_of(&req, &root, &gits)).await {
                Ok(found) => found,
                Err(_) => return refused("the repository could not be read".into()),
            }
        };
        let classified = git::classify(&invocation);
        if Self::is_push(&classified) {
            return self
                .push(&req, &invocation, &classified, git_dir, &root)
                .await;
        }
        let action = classified.action.clone();
        let mut detail = format!("run `git {}` in the sandbox", invocation.args.join(" "));
        if let Some(target) = &classified.target {
            detail.push_str(&format!(" (reaches {})", target.urls.join(", ")));
        }
        if let Some(why) = &classified.reason {
            detail.push_str(&format!(" ({why})"));
        }
        let settled = match transport_of_push(&req, self.credentials) {
            // The remote helper and `send-pack` an approved push starts, to its own URL: part of
            // the act a person approved, so not asked again; the harness's decision is logged.
            Some(url) => self.pipeline.decide_without_table(
                Some(self.call_id),
                Some(&action),
                chock_decide::Harness::Allow {
                    why: format!("a transport helper of the approved push to {url}"),
                },
            ),
            None => {
                self.pipeline
                    .settle(Some(self.call_id), &action, &detail)
                    .await
            }
        };
        let settled = match settled {
            Ok(s) => s,
            Err(e) => return refused(format!("{action} could not be decided: {e}")),
        };
        let mut answer = GitAnswer {
            action: action.as_str().to_string(),
            allowed: settled.allowed(),
            rule: settled.rule.clone(),
            by: String::new(),
            reason: classified.reason.clone().unwrap_or_default(),
            ..GitAnswer::default()
        };
        if !answer.allowed {
            let (by, reason) = refused_words(&settled);
            answer.by = by;
            if answer.reason.is_empty() {
                answer.reason = reason;
            }
            return Reply::plain(Answer::Git(answer));
        }
        let real = self
            .gits
            .real_for(&req.invoked_as, env_of(&req.env, "PATH"));
        // The first copy of a git (a few MiB) is made off the runtime's workers.
        let executable =
            real.and_then(|p| crate::nix::off_the_runtime(|| self.wiring.executable(&p).ok()));
        match executable {
            Some(fd) => Reply {
                answer: Answer::Git(answer),
                fds: vec![fd],
            },
            None => {
                answer.allowed = false;
                answer.by = "chock".into();
                answer.reason = "the real git could not be opened on the host".into();
                Reply::plain(Answer::Git(answer))
            }
        }
    }
}

/// The commands git starts to carry a push over https, and the one a fetch would.
const TRANSPORT_HELPERS: [&str; 4] = ["remote-http", "remote-https", "send-pack", "fetch-pack"];

/// The approved push's URL when `req` is one of git's transport helpers started by that push
/// (it carries the variables the host set for it) and names that URL as its remote; else `None`.
fn transport_of_push(req: &GitRequest, credentials: &super::Credentials) -> Option<String> {
    let url = credentials.push_of(&req.env)?;
    let helper = req.args.first()?;
    if !TRANSPORT_HELPERS.contains(&helper.as_str()) {
        return None;
    }
    let same = |arg: &String| arg.trim_end_matches('/') == url.trim_end_matches('/');
    req.args[1..].iter().any(same).then_some(url)
}

fn env_of<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The request's working directory must be the asking process's own (same device and inode),
/// so the repository read is the one git will use.
fn same_dir(root: &Path, cwd: &str, pid: u32) -> Result<(), String> {
    if !cwd.starts_with('/') {
        return Err(format!("the working directory `{cwd}` is not absolute"));
    }
    let claimed = std::fs::metadata(inside(root, cwd))
        .map_err(|e| format!("the working directory `{cwd}` cannot be read: {e}"))?;
    let real = std::fs::metadata(format!("/proc/{pid}/cwd"))
        .map_err(|e| format!("the asking process's working directory cannot be read: {e}"))?;
    if (claimed.dev(), claimed.ino()) != (real.dev(), real.ino()) {
        return Err(format!(
            "the working directory `{cwd}` is not the asking process's"
        ));
    }
    Ok(())
}

/// `path` (absolute inside the call) as the host reaches it through the call's root.
pub(super) fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Joins a call path to a base, as git resolves a relative one; absolute stays absolute.
fn resolve(base: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", base.trim_end_matches('/'))
    }
}

/// The invocation as git will see it: its arguments (a `git-<command>` started by that name runs
/// the command), its environment, the repository's configuration as git would layer it, the
/// branch `HEAD` names, and the `git-<x>` programs on its `PATH`.
fn invocation_of(req: &GitRequest, root: &Path, gits: &Gits) -> (Invocation, Option<String>) {
    let mut args = req.args.clone();
    let name = req.invoked_as.rsplit('/').next().unwrap_or("");
    if let Some(sub) = name.strip_prefix("git-") {
        args.insert(0, sub.to_string());
    }
    // git sets `GIT_EXEC_PATH` to its own exec path for what it starts (its `maintenance` after
    // a commit): that value names the programs git would run anyway, so it is not a swap.
    let env: Vec<(String, String)> = req
        .env
        .iter()
        .filter(|(k, v)| {
            k != "GIT_EXEC_PATH" || !gits.exec_dirs().any(|d| d == v.trim_end_matches('/'))
        })
        .cloned()
        .collect();
    let req = &GitRequest { env, ..req.clone() };
    let location = git::locate(&args, &req.env);
    let mut dir = req.cwd.clone();
    for c in &location.chdir {
        dir = resolve(&dir, c);
    }
    let git_dir = match &location.git_dir {
        Some(d) => Some(resolve(&dir, d)),
        None => discover(root, &dir),
    };
    let mut files: Vec<PathBuf> = Vec::new();
    let home = env_of(&req.env, "HOME").unwrap_or("/");
    if env_of(&req.env, "GIT_CONFIG_NOSYSTEM").is_none() {
        files.push(inside(root, gits.system_config()));
    }
    let xdg = env_of(&req.env, "XDG_CONFIG_HOME")
        .map_or_else(|| resolve(home, ".config"), str::to_string);
    files.push(inside(root, &resolve(&xdg, "git/config")));
    files.push(inside(root, &resolve(home, ".gitconfig")));
    let mut branch = None;
    if let Some(gd) = &git_dir {
        let common = match &location.common_dir {
            Some(c) => resolve(&dir, c),
            None => std::fs::read_to_string(inside(root, &resolve(gd, "commondir")))
                .map_or_else(|_| gd.clone(), |c| resolve(gd, c.trim())),
        };
        files.push(inside(root, &resolve(&common, "config")));
        branch = std::fs::read_to_string(inside(root, &resolve(gd, "HEAD")))
            .ok()
            .and_then(|h| {
                h.trim()
                    .strip_prefix("ref: refs/heads/")
                    .map(str::to_string)
            });
    }
    let config = files.iter().flat_map(|f| gits.read_config(f)).collect();
    let mut path_commands = Vec::new();
    let path = env_of(&req.env, "PATH").unwrap_or(chock_sandbox::DEFAULT_PATH);
    for d in path.split(':').chain(gits.exec_dirs()) {
        let Ok(entries) = std::fs::read_dir(inside(root, d)) else {
            continue;
        };
        for e in entries.flatten() {
            if let Some(x) = e.file_name().to_str().and_then(|n| n.strip_prefix("git-")) {
                path_commands.push(x.to_string());
            }
        }
    }
    let invocation = Invocation {
        args,
        env: req.env.clone(),
        config,
        branch,
        path_commands,
    };
    (invocation, git_dir)
}

/// The git directory git finds from `dir`: the first `.git` (a directory, or a file naming one)
/// in it or above it.
fn discover(root: &Path, dir: &str) -> Option<String> {
    let mut at = PathBuf::from(dir);
    loop {
        let candidate = at.join(".git");
        let text = candidate.to_string_lossy().into_owned();
        let host = inside(root, &text);
        if host.is_dir() {
            return Some(text);
        }
        if let Ok(body) = std::fs::read_to_string(&host)
            && let Some(target) = body.trim().strip_prefix("gitdir:")
        {
            return Some(resolve(&at.to_string_lossy(), target.trim()));
        }
        if !at.pop() {
            return None;
        }
    }
}
