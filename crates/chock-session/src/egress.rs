//! The egress proxy of a confined call (docs/network.md). When a command could be let through to
//! some host (`net.connect.*`), the call's plan asks the sandbox for a listener inside the call's
//! network namespace; the host serves it with the broker while the command runs, and the command
//! finds it through `HTTP_PROXY`/`HTTPS_PROXY`.
//!
//! Each connection is settled by the call's decision pipeline (chock-decide): the session's live
//! table first, and a row saying `ask`, `agent_review` or `agent_then_human` is put to the
//! pipeline's answerers (the command's connection waits for the answer), with `approval.ask`,
//! `approval.answer` and the `decision` written to the log before the broker acts. With nobody to
//! ask such a row is unanswered, a refusal.

use std::net::TcpListener;
use std::sync::Arc;

use chock_broker::{BrokerConfig, CallProxy, PROXY_VARIABLES, proxy_env};
use chock_decide::Pipeline;
use chock_decide::commands_may_connect;
use chock_log::Log;
use chock_policy::{Decision, Policy};
use chock_sandbox::{NetworkPlan, Plan};

use crate::SessionError;

/// The proxy's port inside the call's network namespace. Each call has a namespace of its own, so one
/// fixed port never collides; 3128 is the port tools expect a proxy on.
pub const PROXY_PORT: u16 = 3128;

/// Whether some project or org row under `net.connect.*` puts a connection to a question (ask or a
/// review). Like [`commands_may_connect`], shipped defaults do not count: they would give every call
/// a listener.
fn commands_may_be_asked_to_connect(policy: &Policy) -> bool {
    chock_decide::a_connect_rule_decides(policy, |decision| {
        matches!(
            decision,
            Decision::Ask | Decision::AgentReview | Decision::AgentThenHuman
        )
    })
}

/// The network a call gets: what the caller asked, upgraded to the proxy when some row allows a
/// connection for commands, or (when someone can be asked) puts one to a question, or when the call
/// may carry out an approved git push (`pushes`: the session has the git shim, and its push's one
/// connection is granted through the proxy). A table whose connect rows all deny, or only ask with
/// nobody to ask, gives no proxy otherwise.
pub(crate) fn network_for(
    policy: &Policy,
    asked: NetworkPlan,
    can_ask: bool,
    pushes: bool,
) -> NetworkPlan {
    match asked {
        NetworkPlan::None
            if commands_may_connect(policy)
                || (can_ask && commands_may_be_asked_to_connect(policy))
                || (can_ask && pushes) =>
        {
            NetworkPlan::Proxy { port: PROXY_PORT }
        }
        other => other,
    }
}

/// Points the command at the proxy (both spellings of the variables), replacing any it inherited.
pub(crate) fn point_at_proxy(plan: &mut Plan) {
    if let NetworkPlan::Proxy { port } = plan.network {
        plan.env
            .retain(|(name, _)| !PROXY_VARIABLES.contains(&name.as_str()));
        plan.env.extend(proxy_env(port));
    }
}

/// Serves the listener the sandbox handed back, for `call_id`, on `runtime` (the caller's), until the returned proxy is stopped.
/// Each connection is settled by `pipeline` under the call's id (its live policy, so a ratchet
/// narrowed while the command runs applies to its next connection; its answerers for a question).
/// A push a person approved in the call grants the one connection its plan names
/// (`net.connect.<host>.<port>` of the host's remote), reaching what an exact project rule would; a
/// `deny` row for it still refuses. Every other connection is the pipeline's.
pub(crate) fn serve(
    runtime: &tokio::runtime::Handle,
    pipeline: &Pipeline,
    log: &Log,
    call_id: &str,
    listener: TcpListener,
    credentials: Arc<crate::channel::Credentials>,
) -> Result<CallProxy, SessionError> {
    let gate = PushGrant {
        pipeline: pipeline.clone(),
        inner: pipeline.gate(call_id),
        credentials,
    };
    Ok(CallProxy::start(
        runtime,
        Arc::new(gate),
        log.clone(),
        BrokerConfig::default(),
        call_id,
        listener,
    )?)
}

/// The call's gate: its approved push's connection first, then the pipeline.
struct PushGrant {
    pipeline: Pipeline,
    inner: chock_decide::PipelineGate,
    credentials: Arc<crate::channel::Credentials>,
}

impl chock_decide::Gate for PushGrant {
    fn decide<'a>(
        &'a self,
        action: &'a chock_policy::Action,
        detail: &'a str,
    ) -> chock_decide::GateFuture<'a> {
        if let Some(granted) = self.credentials.granted(action)
            && self.pipeline.verdict(action).decision != Decision::Deny
        {
            return Box::pin(async move {
                chock_decide::GateAnswer::Allow {
                    scope: chock_decide::AllowScope::ExactHost,
                    decided_by: format!("the approved {granted}"),
                }
            });
        }
        self.inner.decide(action, detail)
    }
}
