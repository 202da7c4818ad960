//! An approved `git push`, `git fetch` or `git pull` that may need a credential (docs/git.md, "The
//! approved push" and "The approved fetch and pull"): planned on the host from the **host's**
//! repository configuration, read now ([`chock_workspace::plan_push`], [`chock_workspace::plan_fetch`]),
//! asked about with the plan's refs and URL, and carried out exactly: the shim is told to run git
//! with the plan's arguments, in a clean environment, from a git directory the host wrote into the
//! session's read-only directory, so no configuration of the workspace's (its `origin`, `pushurl`,
//! `insteadOf`, `credential.helper`, `http.proxy`) and no variable of the agent's is read by it. The
//! call's credentials ([`super::Credentials`]) then answer git's prompt about that remote, and, for
//! ssh, an agent proxy is bound for the call. One flow for both directions: only the plan differs.

use std::path::{Path, PathBuf};

use chock_policy::Action;
use chock_policy::git::{Classified, Invocation, Location, Scheme};
use chock_workspace::{
    FetchPlan, FetchRequest, PushError, PushPlan, PushRequest, PushSource, RemotePlan, plan_fetch,
    plan_push,
};

use super::handler::{CallChannel, inside};
use super::{Answer, CONNECT_MODE, GitAnswer, GitRequest, Reply, known_hosts_for, ssh_command};
use crate::call::refused_words;

/// The variable that puts the shim in askpass mode (git runs `GIT_ASKPASS` with the prompt).
pub const ASKPASS_MODE: &str = "CHOCK_GIT_ASKPASS";

/// An approved operation's plan: what differs between a push and a fetch.
enum Planned {
    Push(PushPlan),
    Fetch(FetchPlan),
}

impl Planned {
    fn plan(&self) -> &dyn RemotePlan {
        match self {
            Planned::Push(p) => p,
            Planned::Fetch(p) => p,
        }
    }

    fn question(&self) -> String {
        self.plan().question()
    }

    /// Writes the git directory it runs from; `git_dir` is the workspace's, as the call sees it.
    fn write_dir(&self, dir: &Path, git_dir: &str) -> Result<(), PushError> {
        match self {
            Planned::Push(p) => p.write_push_dir(dir, &[PathBuf::from(git_dir).join("objects")]),
            Planned::Fetch(p) => p.write_fetch_dir(dir, Path::new(git_dir)),
        }
    }

    fn git_args(&self) -> Vec<String> {
        match self {
            Planned::Push(p) => p.git_args(),
            Planned::Fetch(p) => p.git_args(),
        }
    }

    fn git_env(&self, dir: &Path) -> Vec<(String, String)> {
        match self {
            Planned::Push(p) => p.git_env(dir),
            Planned::Fetch(p) => p.git_env(dir),
        }
    }

    fn then(&self) -> Option<Vec<String>> {
        match self {
            Planned::Push(_) => None,
            Planned::Fetch(p) => p.then_args(),
        }
    }
}

/// Which operation `classified` is, when it is one this module carries out.
enum Kind {
    Push,
    Fetch { pull: bool },
}

impl CallChannel<'_> {
    /// Whether `classified` is a push, fetch or pull this module carries out.
    fn kind_of(classified: &Classified) -> Option<Kind> {
        let is = |name: &str| Action::git(name).is_ok_and(|a| classified.action == a);
        if is("push") {
            Some(Kind::Push)
        } else if is("fetch") || is("pull") {
            Some(Kind::Fetch { pull: is("pull") })
        } else {
            None
        }
    }

    /// Settles an operation the table denies: the table's decision, logged, and its refusal.
    async fn refuse_by_table(&self, action: &Action, req: &GitRequest) -> Reply {
        let detail = format!("run `git {}` in the sandbox", req.args.join(" "));
        let (rule, by, reason) = match self
            .pipeline
            .settle(Some(self.call_id), action, &detail)
            .await
        {
            Ok(settled) => {
                let (by, reason) = refused_words(&settled);
                (settled.rule.clone(), by, reason)
            }
            Err(e) => (
                "chock".to_string(),
                "chock".to_string(),
                format!("{action} could not be decided: {e}"),
            ),
        };
        Reply::plain(Answer::Git(GitAnswer {
            action: action.as_str().to_string(),
            allowed: false,
            rule,
            by: by.to_string(),
            reason,
            ..GitAnswer::default()
        }))
    }

    /// Plans, asks about and (approved) hands out the push, fetch or pull `classified` names.
    /// `None`: not one this carries out — a fetch from a remote the host does not name, or from a
    /// URL no rule lets a credential reach, runs as written, with no credential (the caller decides
    /// it like any other act).
    pub(super) async fn remote(
        &self,
        req: &GitRequest,
        invocation: &Invocation,
        classified: &Classified,
        git_dir: Option<String>,
        root: &Path,
    ) -> Option<Reply> {
        let kind = Self::kind_of(classified)?;
        let action = classified.action.clone();
        // Refused before anyone is asked (no plan can be made): the refusal is still the act's
        // decision, and is logged as the harness's before the shim hears it.
        let unplanned = |reason: String| {
            let logged = self.pipeline.decide_without_table(
                Some(self.call_id),
                Some(&action),
                chock_decide::Harness::Refuse {
                    why: reason.clone(),
                },
            );
            let reason = match logged {
                Ok(_) => reason,
                Err(e) => format!("{reason} (and the refusal could not be logged: {e})"),
            };
            Some(Reply::plain(Answer::Git(GitAnswer {
                action: action.as_str().to_string(),
                allowed: false,
                rule: "chock".to_string(),
                by: "chock".to_string(),
                reason,
                ..GitAnswer::default()
            })))
        };
        let refused = |by: &str, rule: &str, reason: String| {
            Some(Reply::plain(Answer::Git(GitAnswer {
                action: action.as_str().to_string(),
                allowed: false,
                rule: rule.to_string(),
                by: by.to_string(),
                reason,
                ..GitAnswer::default()
            })))
        };
        let (Some(project), Some(host_dir)) = (self.wiring.project(), self.wiring.host_dir())
        else {
            return match kind {
                Kind::Push => unplanned("this session carries out no push".into()),
                Kind::Fetch { .. } => None,
            };
        };
        if let Kind::Push = kind
            && self.pipeline.verdict(&action).decision == chock_policy::Decision::Deny
        {
            // A table that denies the push outright is the answer, logged as its rule says,
            // before anything of the push is read.
            return Some(self.refuse_by_table(&action, req).await);
        }
        let Some(git_dir) = git_dir else {
            return match kind {
                Kind::Push => unplanned("no repository to push from".into()),
                Kind::Fetch { .. } => None,
            };
        };
        let positional: Vec<&String> = classified
            .args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .collect();
        let remote = positional.first().map(|s| (*s).clone());
        let refspecs: Vec<String> = positional.iter().skip(1).map(|s| (*s).clone()).collect();
        let options: Vec<String> = classified
            .args
            .iter()
            .filter(|a| a.starts_with('-'))
            .cloned()
            .collect();
        let workspace_urls = classified
            .target
            .as_ref()
            .map(|t| t.urls.clone())
            .unwrap_or_default();
        let branch = invocation.branch.clone();
        let policy = self.pipeline.policy().read().ok().map(|p| p.clone());
        let Some(policy) = policy else {
            return unplanned("the policy could not be read".into());
        };
        let project = project.to_path_buf();
        let planned = match kind {
            Kind::Push => {
                let request = PushRequest {
                    remote,
                    refspecs,
                    options,
                    branch,
                    workspace_urls,
                };
                let source = PushSource {
                    git_dir: inside(root, &git_dir),
                };
                tokio::task::spawn_blocking(move || {
                    plan_push(&project, &source, &request, &policy).map(Planned::Push)
                })
                .await
            }
            Kind::Fetch { pull } => {
                let request = FetchRequest {
                    pull,
                    remote,
                    refspecs,
                    options,
                    branch,
                    workspace_urls,
                };
                tokio::task::spawn_blocking(move || {
                    plan_fetch(&project, &request, &policy).map(Planned::Fetch)
                })
                .await
            }
        };
        let plan = match (planned, &kind) {
            (Ok(Ok(plan)), _) => plan,
            // A fetch the host's configuration and rules give no credential to: as written.
            (
                Ok(Err(PushError::UnknownRemote(_) | PushError::NoRule { .. } | PushError::Url(_))),
                Kind::Fetch { .. },
            ) => return None,
            (Ok(Err(e)), _) => return unplanned(e.to_string()),
            (Err(_), _) => return unplanned("the operation could not be planned".into()),
        };
        if let Kind::Fetch { .. } = kind
            && self.pipeline.verdict(&action).decision == chock_policy::Decision::Deny
        {
            return Some(self.refuse_by_table(&action, req).await);
        }
        let url = plan.plan().url().clone();
        // An ssh remote is reached only on a host whose key the host's user trusts: said before
        // anyone is asked.
        let known_hosts = if url.scheme == Scheme::Ssh {
            match host_known_hosts(&url.host, url.port) {
                Ok(lines) => lines,
                Err(reason) => return unplanned(reason),
            }
        } else {
            String::new()
        };
        let detail = format!(
            "run `git {}` in the sandbox: {}",
            req.args.join(" "),
            plan.question()
        );
        let settled = match self
            .pipeline
            .settle(Some(self.call_id), &action, &detail)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                return refused(
                    "chock",
                    "chock",
                    format!("{action} could not be decided: {e}"),
                );
            }
        };
        if !settled.allowed() {
            let (by, reason) = refused_words(&settled);
            return refused(&by, &settled.rule, reason);
        }
        let n = self.credentials.next_operation();
        let op = plan.plan().op().as_str();
        let op_dir = host_dir.join(format!("{op}-{}-{n}.git", self.call_id));
        if let Err(e) = plan.write_dir(&op_dir, &git_dir) {
            return refused("chock", &settled.rule, e.to_string());
        }
        self.credentials.remove_at_end(op_dir.clone());
        // A clean environment: nothing of the agent's (`GIT_CONFIG_PARAMETERS`, `http_proxy`,
        // `GIT_SSL_NO_VERIFY`, …) reaches the git that holds the credential.
        let mut env = clean_env(req);
        env.extend(plan.git_env(&op_dir));
        if url.scheme == Scheme::Ssh {
            let Some(upstream) = std::env::var_os("SSH_AUTH_SOCK") else {
                return refused(
                    "chock",
                    &settled.rule,
                    "no ssh agent on the host (SSH_AUTH_SOCK)".into(),
                );
            };
            // Bound in the call's own `/tmp` (reached through the asking process's root, held open
            // so the socket can be removed after it): a socket under a path the call sees through
            // its read-only overlay cannot be connected to.
            let name = format!("chock-agent-{}-{n}.sock", self.call_id);
            let call_root = match std::fs::File::open(root) {
                Ok(dir) => dir,
                Err(e) => return refused("chock", &settled.rule, format!("the call's root: {e}")),
            };
            let sock = PathBuf::from(format!(
                "/proc/self/fd/{}/tmp/{name}",
                std::os::fd::AsRawFd::as_raw_fd(&call_root)
            ));
            match chock_broker::AgentProxy::start(&sock, Path::new(&upstream)) {
                Ok(proxy) => self.credentials.hold(proxy, call_root),
                Err(e) => {
                    return refused("chock", &settled.rule, format!("the ssh agent proxy: {e}"));
                }
            }
            env.push(("SSH_AUTH_SOCK".into(), format!("/tmp/{name}")));
            match self.ssh_env(&req.invoked_as, &url.host, url.port, &op_dir, &known_hosts) {
                Ok(more) => env.extend(more),
                Err(reason) => return refused("chock", &settled.rule, reason),
            }
        } else if let Some(shim) = self.gits.real_for(&req.invoked_as, None) {
            // git runs its askpass by path; the shim sits over the real git there.
            env.push(("GIT_ASKPASS".into(), shim.display().to_string()));
            env.push((ASKPASS_MODE.into(), "1".into()));
        }
        self.credentials.approve(plan.plan());
        self.credentials.hand_out(&env);
        let real = self.gits.real_for(&req.invoked_as, None);
        Some(match real.and_then(|p| self.wiring.executable(&p).ok()) {
            Some(fd) => Reply {
                answer: Answer::Git(GitAnswer {
                    action: action.as_str().to_string(),
                    allowed: true,
                    rule: settled.rule.clone(),
                    args: Some(plan.git_args()),
                    env,
                    env_clear: true,
                    then: plan.then().map(|then| located(&classified.location, then)),
                    ..GitAnswer::default()
                }),
                fds: vec![fd],
            },
            None => {
                return refused(
                    "chock",
                    &settled.rule,
                    "the real git could not be opened on the host".into(),
                );
            }
        })
    }

    /// An approved ssh operation's `GIT_SSH_COMMAND` and what its `ProxyCommand` needs: the host's
    /// ssh, tunnelled by the shim through the call's proxy to `host:port`, trusting only the host
    /// user's own `known_hosts` entries for it (`lines`), copied into `push_dir` (which the call
    /// reads only).
    fn ssh_env(
        &self,
        invoked_as: &str,
        host: &str,
        port: u16,
        push_dir: &Path,
        lines: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let written = push_dir.join("known_hosts");
        std::fs::write(&written, lines).map_err(|e| format!("{}: {e}", written.display()))?;
        let ssh = chock_sandbox::DEFAULT_PATH
            .split(':')
            .map(|d| Path::new(d).join("ssh"))
            .find(|p| p.starts_with("/usr/") && p.is_file())
            .ok_or_else(|| "no ssh under /usr on the host".to_string())?;
        let shim = self
            .gits
            .real_for(invoked_as, None)
            .ok_or_else(|| "no git to run the ssh tunnel as".to_string())?;
        Ok(vec![
            (
                "GIT_SSH_COMMAND".into(),
                ssh_command(&ssh, &shim, host, port, &written),
            ),
            ("GIT_SSH_VARIANT".into(), "ssh".into()),
            (CONNECT_MODE.into(), "1".into()),
        ])
    }
}

/// The host user's `~/.ssh/known_hosts` lines for `host:port`; none is a refusal naming why.
fn host_known_hosts(host: &str, port: u16) -> Result<String, String> {
    let home = std::env::var_os("HOME")
        .ok_or_else(|| "no HOME on the host, so no known_hosts to trust".to_string())?;
    let known = Path::new(&home).join(".ssh/known_hosts");
    known_hosts_for(&known, host, port).map_err(|e| e.to_string())
}

/// The environment an approved operation's git starts from, instead of the agent's: the call's
/// `PATH`, its `HOME`, the call's channel and its egress proxy; the plan adds its own.
fn clean_env(req: &GitRequest) -> Vec<(String, String)> {
    let home = req
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "HOME")
        .map_or_else(|| "/".to_owned(), |(_, v)| v.clone());
    let mut env = vec![
        ("PATH".to_owned(), chock_sandbox::DEFAULT_PATH.to_owned()),
        ("HOME".to_owned(), home),
        (
            chock_sandbox::HOST_CHANNEL_ENV.to_owned(),
            chock_sandbox::HOST_CHANNEL_FD.to_string(),
        ),
    ];
    env.extend(chock_broker::proxy_env(crate::egress::PROXY_PORT));
    env
}

/// A pull's next step, run where the invocation ran: its `-C`s, `--git-dir` and `--work-tree` (or
/// `GIT_DIR`, `GIT_WORK_TREE`, read the same), before the command.
fn located(location: &Location, then: Vec<String>) -> Vec<String> {
    let mut args = Vec::new();
    for dir in &location.chdir {
        args.push("-C".to_owned());
        args.push(dir.clone());
    }
    if let Some(dir) = &location.git_dir {
        args.push(format!("--git-dir={dir}"));
    }
    if let Some(dir) = &location.work_tree {
        args.push(format!("--work-tree={dir}"));
    }
    args.extend(then);
    args
}
