//! The session's answers on a call's channel: a git invocation classified on the host, from the
//! repository as the call sees it, and settled through the call's pipeline like any other act.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chock_decide::Pipeline;
use chock_policy::git::{self, Invocation};
use chock_sandbox::BoxFuture;
use chock_workspace::RemoteOp;

use super::guest_view::{CallFiles, GuestView};
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
    /// The push or fetch a person approved in this call, for `chock askpass`.
    pub credentials: &'a super::Credentials,
    /// For a call in a microVM guest: the host's view of its workspace, the only files its
    /// requests are read from (a guest call has no host pid, and its init is not trusted).
    pub guest: Option<&'a GuestView>,
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
        let (files, root) = match self.guest {
            // A guest's request names its working directory; the host reads nothing outside
            // the workspace (its init checked the directory is the asking process's own).
            Some(view) => {
                if !req.cwd.starts_with('/') || !view.holds(&req.cwd) {
                    return refused(format!(
                        "the working directory `{}` is outside the workspace",
                        req.cwd
                    ));
                }
                (CallFiles::Guest(view.clone()), None)
            }
            None => {
                let Some(pid) = peer else {
                    return refused("the asking process could not be identified".into());
                };
                // The call's own view of its files: the asking process's root and working
                // directory, whatever the request claims.
                let root = PathBuf::from(format!("/proc/{pid}/root"));
                if let Err(reason) = same_dir(&root, &req.cwd, pid) {
                    return refused(reason);
                }
                (CallFiles::Root(root.clone()), Some(root))
            }
        };
        let (invocation, git_dir, places) = {
            let mut req = req.clone();
            // A git an approved push runs (its `pack-objects`) carries what the host set for it.
            req.env = self.credentials.without_handed(&req.env);
            let gits = self.gits.clone();
            match tokio::task::spawn_blocking(move || invocation_of(&req, &files, &gits)).await {
                Ok(found) => found,
                Err(_) => return refused("the repository could not be read".into()),
            }
        };
        if let Some(view) = self.guest
            && let Some(outside) = places.iter().find(|p| !view.holds(p))
        {
            return refused(format!(
                "the repository's `{outside}` is outside the workspace"
            ));
        }
        let classified = git::classify(&invocation);
        match &root {
            Some(root) => {
                if let Some(reply) = self
                    .remote(&req, &invocation, &classified, git_dir, root)
                    .await
                {
                    return reply;
                }
            }
            // A push carries out from the call's host root, which a guest call has not; a
            // fetch from a guest runs as written, with no credential, decided as any act is.
            None if chock_policy::Action::git("push").is_ok_and(|a| classified.action == a) => {
                return Reply::plain(Answer::Git(GitAnswer {
                    action: classified.action.as_str().to_string(),
                    allowed: false,
                    by: "chock".into(),
                    reason: "a push from a microVM guest is not built yet (docs/microvm.md)".into(),
                    ..GitAnswer::default()
                }));
            }
            None => {}
        }
        let action = classified.action.clone();
        let mut detail = format!("run `git {}` in the sandbox", invocation.args.join(" "));
        if let Some(target) = &classified.target {
            detail.push_str(&format!(" (reaches {})", target.urls.join(", ")));
        }
        if let Some(why) = &classified.reason {
            detail.push_str(&format!(" ({why})"));
        }
        let settled = match transport_of_operation(&req, self.credentials) {
            // The remote helper, `send-pack` or `fetch-pack` an approved push or fetch starts, to
            // its own URL (and what a fetch stores its objects with): part of the act a person
            // approved, so not asked again; the harness's decision is logged.
            Some((op, url)) => self.pipeline.decide_without_table(
                Some(self.call_id),
                Some(&action),
                chock_decide::Harness::Allow {
                    why: format!("a transport helper of the approved {} {url}", op.toward()),
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
        if self.guest.is_some() {
            // No descriptor crosses the guest's port: the answer names the real git, a file of
            // the `/usr` the guest sees read-only, and the guest's init hands on a sealed copy.
            return match real.filter(|p| p.starts_with("/usr/")) {
                Some(p) => {
                    answer.program = Some(p.to_string_lossy().into_owned());
                    Reply::plain(Answer::Git(answer))
                }
                None => {
                    answer.allowed = false;
                    answer.by = "chock".into();
                    answer.reason = "the real git is not under /usr, which the guest sees".into();
                    Reply::plain(Answer::Git(answer))
                }
            };
        }
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

/// The commands git starts to carry a push or fetch over https.
const TRANSPORT_HELPERS: [&str; 4] = ["remote-http", "remote-https", "send-pack", "fetch-pack"];

/// What a fetch's transport starts to store what it received (they name no URL).
const FETCH_STORES: [&str; 2] = ["index-pack", "unpack-objects"];

/// The approved operation and its URL when `req` is one of git's transport helpers started by it
/// (it carries the variables the host set for it) and names that URL as its remote, or, for a
/// fetch, one of the commands that store what it received; else `None`.
fn transport_of_operation(
    req: &GitRequest,
    credentials: &super::Credentials,
) -> Option<(RemoteOp, String)> {
    let (op, url) = credentials.operation_of(&req.env)?;
    let helper = req.args.first()?;
    if op == RemoteOp::Fetch && FETCH_STORES.contains(&helper.as_str()) {
        return Some((op, url));
    }
    if !TRANSPORT_HELPERS.contains(&helper.as_str()) {
        return None;
    }
    let same = |arg: &String| arg.trim_end_matches('/') == url.trim_end_matches('/');
    req.args[1..].iter().any(same).then_some((op, url))
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
/// Also the directories it names (where git runs, its git and common directories, its work
/// tree), for a guest's request to be held to the workspace.
fn invocation_of(
    req: &GitRequest,
    files: &CallFiles,
    gits: &Gits,
) -> (Invocation, Option<String>, Vec<String>) {
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
        None => discover(files, &dir),
    };
    let mut places = vec![dir.clone()];
    places.extend(location.work_tree.as_ref().map(|w| resolve(&dir, w)));
    let mut configs: Vec<String> = Vec::new();
    let home = env_of(&req.env, "HOME").unwrap_or("/");
    if env_of(&req.env, "GIT_CONFIG_NOSYSTEM").is_none() {
        configs.push(gits.system_config().to_string());
    }
    let xdg = env_of(&req.env, "XDG_CONFIG_HOME")
        .map_or_else(|| resolve(home, ".config"), str::to_string);
    configs.push(resolve(&xdg, "git/config"));
    configs.push(resolve(home, ".gitconfig"));
    let mut branch = None;
    if let Some(gd) = &git_dir {
        let common = match &location.common_dir {
            Some(c) => resolve(&dir, c),
            None => files
                .read_string(&resolve(gd, "commondir"))
                .map_or_else(|| gd.clone(), |c| resolve(gd, c.trim())),
        };
        places.push(gd.clone());
        places.push(common.clone());
        configs.push(resolve(&common, "config"));
        branch = files.read_string(&resolve(gd, "HEAD")).and_then(|h| {
            h.trim()
                .strip_prefix("ref: refs/heads/")
                .map(str::to_string)
        });
    }
    let config: Vec<(String, Option<String>)> = configs
        .iter()
        .flat_map(|f| match files {
            CallFiles::Root(root) => gits.read_config(&inside(root, f)),
            CallFiles::Guest(_) => files
                .read(f)
                .map(|text| gits.read_config_text(&text))
                .unwrap_or_default(),
        })
        .collect();
    let mut path_commands = Vec::new();
    let path = env_of(&req.env, "PATH").unwrap_or(chock_sandbox::DEFAULT_PATH);
    let mut unseen = false;
    for d in path.split(':').chain(gits.exec_dirs()) {
        let Some(names) = files.names(d) else {
            unseen = true;
            continue;
        };
        for name in names {
            if let Some(x) = name.strip_prefix("git-") {
                path_commands.push(x.to_string());
            }
        }
    }
    if unseen {
        // A directory of `PATH` the host cannot see (a guest's `/tmp`) may hold a `git-<x>` git
        // would run before an alias `x`: every alias is taken for such a program, so an
        // invocation through one is `git.unknown`, never the alias's milder act.
        path_commands.extend(
            config
                .iter()
                .filter_map(|(k, _): &(String, Option<String>)| {
                    let (section, name) = k.split_once('.')?;
                    section
                        .eq_ignore_ascii_case("alias")
                        .then(|| name.to_string())
                }),
        );
    }
    let invocation = Invocation {
        args,
        env: req.env.clone(),
        config,
        branch,
        path_commands,
    };
    (invocation, git_dir, places)
}

/// The git directory git finds from `dir`: the first `.git` (a directory, or a file naming one)
/// in it or above it.
fn discover(files: &CallFiles, dir: &str) -> Option<String> {
    let mut at = PathBuf::from(dir);
    loop {
        let candidate = at.join(".git");
        let text = candidate.to_string_lossy().into_owned();
        if files.is_dir(&text) {
            return Some(text);
        }
        if let Some(body) = files.read_string(&text)
            && let Some(target) = body.trim().strip_prefix("gitdir:")
        {
            return Some(resolve(&at.to_string_lossy(), target.trim()));
        }
        if !at.pop() {
            return None;
        }
    }
}
