//! An approved `git push` (docs/git.md, "The push"): planned on the host from the **host's**
//! repository configuration, read now ([`chock_workspace::plan_push`]), asked about with the plan's
//! refs, ranges and URL, and carried out exactly: the shim is told to run git with the plan's
//! arguments and a git directory the host wrote into the session's read-only directory, so no
//! configuration of the workspace's (its `origin`, `pushurl`, `insteadOf`, `credential.helper`,
//! `http.proxy`) is read by the push. The call's credentials ([`super::Credentials`]) then answer
//! git's prompt about that remote, and, for ssh, an agent proxy is bound for the call.

use std::path::{Path, PathBuf};

use chock_policy::Action;
use chock_policy::git::{Classified, Invocation, Scheme};
use chock_workspace::{PushRequest, PushSource, plan_push};

use super::handler::{CallChannel, inside};
use super::{Answer, CONNECT_MODE, GitAnswer, GitRequest, Reply, known_hosts_for, ssh_command};
use crate::call::refused_words;

/// The variable that puts the shim in askpass mode (git runs `GIT_ASKPASS` with the prompt).
pub const ASKPASS_MODE: &str = "CHOCK_GIT_ASKPASS";

impl CallChannel<'_> {
    /// Whether `classified` is a push this module carries out.
    pub(super) fn is_push(classified: &Classified) -> bool {
        Action::git("push").is_ok_and(|push| classified.action == push)
    }

    /// Settles a push the table denies: the table's decision, logged, and its refusal.
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

    /// Plans, asks about and (approved) hands out the push `classified` names.
    pub(super) async fn push(
        &self,
        req: &GitRequest,
        invocation: &Invocation,
        classified: &Classified,
        git_dir: Option<String>,
        root: &Path,
    ) -> Reply {
        let action = classified.action.clone();
        // A table that denies the push outright is the answer, logged as its rule says, before
        // anything of the push is read.
        if self.pipeline.verdict(&action).decision == chock_policy::Decision::Deny {
            return self.refuse_by_table(&action, req).await;
        }
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
            Reply::plain(Answer::Git(GitAnswer {
                action: action.as_str().to_string(),
                allowed: false,
                rule: "chock".to_string(),
                by: "chock".to_string(),
                reason,
                ..GitAnswer::default()
            }))
        };
        let refused = |by: &str, rule: &str, reason: String| {
            Reply::plain(Answer::Git(GitAnswer {
                action: action.as_str().to_string(),
                allowed: false,
                rule: rule.to_string(),
                by: by.to_string(),
                reason,
                ..GitAnswer::default()
            }))
        };
        let (Some(project), Some(host_dir)) = (self.wiring.project(), self.wiring.host_dir())
        else {
            return unplanned("this session carries out no push".into());
        };
        let Some(git_dir) = git_dir else {
            return unplanned("no repository to push from".into());
        };
        let positional: Vec<&String> = classified
            .args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .collect();
        let request = PushRequest {
            remote: positional.first().map(|s| (*s).clone()),
            refspecs: positional.iter().skip(1).map(|s| (*s).clone()).collect(),
            options: classified
                .args
                .iter()
                .filter(|a| a.starts_with('-'))
                .cloned()
                .collect(),
            branch: invocation.branch.clone(),
            workspace_urls: classified
                .target
                .as_ref()
                .map(|t| t.urls.clone())
                .unwrap_or_default(),
        };
        let source = PushSource {
            git_dir: inside(root, &git_dir),
        };
        let policy = self.pipeline.policy().read().ok().map(|p| p.clone());
        let Some(policy) = policy else {
            return unplanned("the policy could not be read".into());
        };
        let project = project.to_path_buf();
        let planned =
            tokio::task::spawn_blocking(move || plan_push(&project, &source, &request, &policy))
                .await;
        let plan = match planned {
            Ok(Ok(plan)) => plan,
            Ok(Err(e)) => return unplanned(e.to_string()),
            Err(_) => return unplanned("the push could not be planned".into()),
        };
        // An ssh push goes only to a host whose key the host's user trusts: said before anyone is asked.
        let known_hosts = if plan.url.scheme == Scheme::Ssh {
            match host_known_hosts(&plan.url.host, plan.url.port) {
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
        let n = self.credentials.next_push();
        let push_dir = host_dir.join(format!("push-{}-{n}.git", self.call_id));
        let alternates = [PathBuf::from(&git_dir).join("objects")];
        if let Err(e) = plan.write_push_dir(&push_dir, &alternates) {
            return refused("chock", &settled.rule, e.to_string());
        }
        self.credentials.remove_at_end(push_dir.clone());
        let mut env = plan.git_env(&push_dir);
        if plan.url.scheme == Scheme::Ssh {
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
            match self.ssh_env(
                &req.invoked_as,
                &plan.url.host,
                plan.url.port,
                &push_dir,
                &known_hosts,
            ) {
                Ok(more) => env.extend(more),
                Err(reason) => return refused("chock", &settled.rule, reason),
            }
        } else if let Some(shim) = self.gits.real_for(&req.invoked_as, None) {
            // git runs its askpass by path; the shim sits over the real git there.
            env.push(("GIT_ASKPASS".into(), shim.display().to_string()));
            env.push((ASKPASS_MODE.into(), "1".into()));
        }
        self.credentials.approve(plan.clone());
        self.credentials.hand_out(&env);
        let real = self.gits.real_for(&req.invoked_as, None);
        match real.and_then(|p| self.wiring.executable(&p).ok()) {
            Some(fd) => Reply {
                answer: Answer::Git(GitAnswer {
                    action: action.as_str().to_string(),
                    allowed: true,
                    rule: settled.rule.clone(),
                    args: Some(plan.git_args()),
                    env,
                    ..GitAnswer::default()
                }),
                fds: vec![fd],
            },
            None => refused(
                "chock",
                &settled.rule,
                "the real git could not be opened on the host".into(),
            ),
        }
    }

    /// An approved ssh push's `GIT_SSH_COMMAND` and what its `ProxyCommand` needs: the host's ssh,
    /// tunnelled by the shim through the call's proxy to `host:port`, trusting only the host user's
    /// own `known_hosts` entries for it (`lines`), copied into `push_dir` (which the call reads only).
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
