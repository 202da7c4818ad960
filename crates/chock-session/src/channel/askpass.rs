//! `chock askpass`: git's `GIT_ASKPASS` inside a call. The program carries git's prompt over the
//! call's channel; the host answers it only for a push, fetch or pull of this call that a person
//! approved ([`Credentials::approve`]), only for a prompt about that operation's remote (same
//! scheme, host, port and user: [`RemotePlan::prompt_kind`]), and only as the act `secret.password.<host>` settles
//! through the pipeline ([`Pipeline::settle_secret`]): `deny` asks nobody; otherwise the answer is
//! what a person typed after seeing the prompt — so the socket is no oracle: nothing is answered
//! from memory, and nobody answering is a refusal. The password is added to the log's redaction before anything
//! about it is written, never stored, and wiped when the answer is sent. The approval ends with the
//! call ([`Credentials::end`]).

use std::sync::Mutex;

use chock_decide::Pipeline;
use chock_policy::Action;
use chock_policy::git::RemoteUrl;
use chock_workspace::{PromptKind, RemoteOp, RemotePlan};
use serde::{Deserialize, Serialize};

/// `chock askpass`'s request: the prompt git wrote, as git passed it (`argv[1]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskpassRequest {
    /// `Password for 'https://alice@example.org': `.
    pub prompt: String,
}

/// The host's answer to an [`AskpassRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskpassAnswer {
    /// What to print for git; `None`: refused (git then fails the push).
    pub answer: Option<String>,
    /// Why it was refused, in words.
    #[serde(default)]
    pub reason: String,
}

impl AskpassAnswer {
    fn refused(reason: impl Into<String>) -> AskpassAnswer {
        AskpassAnswer {
            answer: None,
            reason: reason.into(),
        }
    }
}

/// What a person approved, as the credentials need it: one push or fetch, its remote's URL, its
/// one connection and the question they answered.
#[derive(Debug, Clone)]
struct Approved {
    op: RemoteOp,
    url: RemoteUrl,
    connect: Action,
    question: String,
}

impl RemotePlan for Approved {
    fn op(&self) -> RemoteOp {
        self.op
    }
    fn url(&self) -> &RemoteUrl {
        &self.url
    }
    fn connect_action(&self) -> &Action {
        &self.connect
    }
    fn question(&self) -> String {
        self.question.clone()
    }
}

/// One call's credentials: the push, fetch or pull a person approved in it, while the call lasts,
/// and what was made for it (its git directory, an ssh agent proxy), undone when the call ends.
#[derive(Debug, Default)]
pub struct Credentials {
    approved: Mutex<Option<Approved>>,
    pushes: std::sync::atomic::AtomicU64,
    made: Mutex<Vec<std::path::PathBuf>>,
    agents: Mutex<Vec<(chock_broker::AgentProxy, std::fs::File)>>,
    /// The program variables the host set for an approved operation (`GIT_SSH_COMMAND`,
    /// `GIT_ASKPASS`): its own git subprocesses inherit them and are not asked about them.
    handed: Mutex<Vec<(String, String)>>,
}

impl Credentials {
    /// Nothing approved yet.
    pub fn new() -> Credentials {
        Credentials::default()
    }

    /// A person approved `plan` (a push, fetch or pull) in this call: prompts about its remote
    /// may now be put to them.
    pub fn approve(&self, plan: &dyn RemotePlan) {
        *self.approved.lock().expect("the approval") = Some(Approved {
            op: plan.op(),
            url: plan.url().clone(),
            connect: plan.connect_action().clone(),
            question: plan.question(),
        });
    }

    /// The call ended: nothing is answered any more, the agent proxies are closed and the push
    /// directories removed.
    pub fn end(&self) {
        *self.approved.lock().expect("the approval") = None;
        self.handed
            .lock()
            .expect("the handed-out variables")
            .clear();
        for (agent, call_root) in self.agents.lock().expect("the agents").drain(..) {
            // Closed (its socket removed) while the call's root it was bound under is still held.
            agent.close();
            drop(call_root);
        }
        for dir in self.made.lock().expect("the directories").drain(..) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Whether `action` is the connection of this call's approved operation: what it is, in words
    /// (`push to <URL>`, `fetch from <URL>`).
    pub(crate) fn granted(&self, action: &chock_policy::Action) -> Option<String> {
        let approved = self.approved.lock().expect("the approval");
        approved
            .as_ref()
            .filter(|plan| plan.connect == *action)
            .map(|plan| format!("{} {}", plan.op.toward(), plan.url.text))
    }

    /// `env` is what the host set for an approved operation of this call.
    pub(crate) fn hand_out(&self, env: &[(String, String)]) {
        const PROGRAMS: [&str; 2] = ["GIT_SSH_COMMAND", "GIT_ASKPASS"];
        let mut handed = self.handed.lock().expect("the handed-out variables");
        handed.extend(
            env.iter()
                .filter(|(k, _)| PROGRAMS.contains(&k.as_str()))
                .cloned(),
        );
    }

    /// This call's approved operation and its URL when `env` carries every program variable the
    /// host set for it, exactly as set: the asking git was started by that operation (a git it
    /// runs inherits them).
    pub(crate) fn operation_of(&self, env: &[(String, String)]) -> Option<(RemoteOp, String)> {
        let handed = self.handed.lock().expect("the handed-out variables");
        if handed.is_empty() || !handed.iter().all(|pair| env.contains(pair)) {
            return None;
        }
        let approved = self.approved.lock().expect("the approval");
        approved
            .as_ref()
            .map(|plan| (plan.op, plan.url.text.clone()))
    }

    /// `env` without the program variables the host itself set for this call's approved operation,
    /// exactly as it set them (a git the push runs inherits them; any other value stays).
    pub(crate) fn without_handed(&self, env: &[(String, String)]) -> Vec<(String, String)> {
        let handed = self.handed.lock().expect("the handed-out variables");
        env.iter()
            .filter(|pair| !handed.contains(pair))
            .cloned()
            .collect()
    }

    /// A number for the call's next push or fetch (its directory's and socket's names).
    pub(crate) fn next_operation(&self) -> u64 {
        self.pushes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    /// `dir` is removed when the call ends.
    pub(crate) fn remove_at_end(&self, dir: std::path::PathBuf) {
        self.made.lock().expect("the directories").push(dir);
    }

    /// `agent` is closed when the call ends; `call_root` (the directory its socket's path goes
    /// through) is held open until then.
    pub(crate) fn hold(&self, agent: chock_broker::AgentProxy, call_root: std::fs::File) {
        self.agents
            .lock()
            .expect("the agents")
            .push((agent, call_root));
    }

    /// Answers one prompt for the call `call_id`: only for this call's approved operation, only about
    /// its remote, and a password only as `secret.password.<host>` settles it through the
    /// pipeline ([`Pipeline::settle_secret`]: `deny` asks nobody; otherwise the prompt is the
    /// question and the answer is what a person typed).
    pub async fn answer(&self, pipeline: &Pipeline, call_id: &str, prompt: &str) -> AskpassAnswer {
        let plan = self.approved.lock().expect("the approval").clone();
        let Some(plan) = plan else {
            return AskpassAnswer::refused(
                "askpass: no push or fetch of this call was approved, so no credential is asked for",
            );
        };
        let asked = match chock_workspace::read_prompt(prompt) {
            Ok((_, url)) => url,
            Err(why) => return AskpassAnswer::refused(format!("askpass: {why}")),
        };
        let Some(kind) = plan.prompt_kind(prompt) else {
            return AskpassAnswer::refused(format!(
                "askpass: the prompt is not about the approved {}'s remote {}",
                plan.op.as_str(),
                plan.url.text
            ));
        };
        if kind == PromptKind::Username
            && let Some(user) = &plan.url.user
        {
            return AskpassAnswer {
                answer: Some(user.clone()),
                reason: String::new(),
            };
        }
        let action = match chock_policy::Action::secret_password(&asked.host) {
            Ok(action) => action,
            Err(e) => {
                return AskpassAnswer::refused(format!(
                    "askpass: the prompt's host `{}` names no act: {e}",
                    asked.host
                ));
            }
        };
        let what = match kind {
            PromptKind::Username => "the user name",
            PromptKind::Password => "the password",
        };
        let (verb, op) = (plan.op.toward(), plan.op.as_str());
        let text = format!(
            "git asks for {what} to {verb} {} (`{action}`; approved: {}). It is used for this \
             {op} only, never stored, and redacted from the log. git's prompt: {}",
            plan.url.text,
            plan.question,
            prompt.trim_end()
        );
        if kind == PromptKind::Username {
            // The user name is no secret, but a password the table denies will not follow it:
            // the refusal is settled (and logged) now, and nobody is asked for a name in vain.
            if pipeline.verdict(&action).decision == chock_policy::Decision::Deny {
                return match pipeline.settle_secret(Some(call_id), &action, &text).await {
                    Ok(settled) => AskpassAnswer::refused(refusal(&action, &settled.settled)),
                    Err(e) => AskpassAnswer::refused(format!(
                        "askpass: `{action}` could not be decided: {e}"
                    )),
                };
            }
            return match pipeline.ask_person(Some(call_id), &text).await {
                Ok(Some((_by, user))) => AskpassAnswer {
                    answer: Some(user),
                    reason: String::new(),
                },
                Ok(None) => AskpassAnswer::refused("askpass: nobody answered the prompt"),
                Err(e) => {
                    AskpassAnswer::refused(format!("askpass: the prompt could not be asked: {e}"))
                }
            };
        }
        match pipeline.settle_secret(Some(call_id), &action, &text).await {
            Ok(chock_decide::SettledSecret {
                secret: Some(secret),
                ..
            }) => AskpassAnswer {
                answer: Some(secret.expose().to_owned()),
                reason: String::new(),
            },
            Ok(settled) => AskpassAnswer::refused(refusal(&action, &settled.settled)),
            Err(e) => {
                AskpassAnswer::refused(format!("askpass: the prompt could not be asked: {e}"))
            }
        }
    }
}

/// Why `action` gives git no password, in words for git's standard error.
fn refusal(action: &chock_policy::Action, settled: &chock_decide::Settled) -> String {
    use chock_decide::{Outcome, RefusedBy};
    match &settled.outcome {
        Outcome::Refused {
            by: RefusedBy::Table,
            ..
        } => format!(
            "askpass: `{action}` is denied by {}: nobody is asked and git gets no password",
            settled.rule
        ),
        Outcome::Refused { by, reason } => {
            let who = match by {
                RefusedBy::Person { name } | RefusedBy::Reviewer { name } => name.as_str(),
                RefusedBy::Table | RefusedBy::Harness => "chock",
            };
            let reason = if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            };
            format!("askpass: `{action}` was refused by {who}{reason}")
        }
        Outcome::Unanswered { .. } => {
            format!("askpass: nobody answered the prompt (`{action}`), so git gets no password")
        }
        Outcome::Allowed { .. } => format!("askpass: `{action}` was allowed but no answer came"),
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        self.end();
    }
}

/// A call's channel that answers `chock askpass` only (a git request is refused): what a caller
/// with no git shim serves, and what the tests drive.
#[derive(Debug)]
pub struct AskpassChannel<'a> {
    /// The session's pipeline.
    pub pipeline: &'a Pipeline,
    /// The call's id.
    pub call_id: &'a str,
    /// The call's credentials.
    pub credentials: &'a Credentials,
}

impl super::Handler for AskpassChannel<'_> {
    fn answer(
        &self,
        request: super::Request,
        _peer: Option<u32>,
    ) -> chock_sandbox::BoxFuture<'_, super::Reply> {
        Box::pin(async move {
            let answer = match request {
                super::Request::Askpass(ask) => super::Answer::Askpass(
                    self.credentials
                        .answer(self.pipeline, self.call_id, &ask.prompt)
                        .await,
                ),
                super::Request::Git(_) => super::Answer::Refused {
                    reason: "git: this call has no git shim".into(),
                },
            };
            super::Reply::plain(answer)
        })
    }
}

/// `chock askpass PROMPT` (and the `chock-askpass` program): asks the call's host for the answer to
/// git's prompt and prints it; a refusal, or no channel, prints the reason on standard error and
/// exits 1, which git takes as no credential.
pub fn main() -> ! {
    let prompt: Vec<String> = std::env::args().skip(1).collect();
    // `chock askpass PROMPT` and `chock-askpass PROMPT` both end with the prompt.
    let prompt = prompt.last().cloned().unwrap_or_default();
    let asked = super::Client::from_call()
        .and_then(|client| client.ask(&super::Request::Askpass(AskpassRequest { prompt })));
    match asked {
        Ok((
            super::Answer::Askpass(AskpassAnswer {
                answer: Some(a), ..
            }),
            _,
        )) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let ok = writeln!(out, "{a}").and_then(|()| out.flush()).is_ok();
            drop(a);
            std::process::exit(if ok { 0 } else { 1 })
        }
        Ok((super::Answer::Askpass(AskpassAnswer { reason, .. }), _))
        | Ok((super::Answer::Refused { reason }, _)) => {
            eprintln!("chock askpass: refused: {reason}");
            std::process::exit(1)
        }
        Ok(_) => {
            eprintln!("chock askpass: the host answered something else");
            std::process::exit(1)
        }
        Err(e) => {
            eprintln!("chock askpass: {e}");
            std::process::exit(1)
        }
    }
}
