//! The egress proxy of a confined call (docs/network.md). When a command could be let through to
//! some host (`net.connect.*`), the call's plan asks the sandbox for a listener inside the call's
//! network namespace; the host serves it with the broker while the command runs, and the command
//! finds it through `HTTP_PROXY`/`HTTPS_PROXY`.
//!
//! Each connection is decided by the session's live table first. A row saying `ask`, `agent_review`
//! or `agent_then_human` is put to the call's [`EgressAsker`] when the caller gave one (the agent
//! passes its approval broker; the command's connection waits for the answer), with `approval.ask`
//! and `approval.answer` written to the log before the broker acts. With no asker such a row refuses:
//! an approval nobody can answer is a refusal.

use std::fmt;
use std::net::TcpListener;
use std::sync::{Arc, RwLock};

use chock_broker::{
    BrokerConfig, CallProxy, Gate, GateAnswer, GateFuture, PROXY_VARIABLES, TableGate,
    commands_may_connect, proxy_env, scope_of,
};
use chock_log::{EventKind, Log};
use chock_policy::{Action, Decision, Pattern, Policy};
use chock_sandbox::{NetworkPlan, Plan};
use serde_json::json;

use crate::SessionError;

/// The proxy's port inside the call's network namespace. Each call has a namespace of its own, so one
/// fixed port never collides; 3128 is the port tools expect a proxy on.
pub const PROXY_PORT: u16 = 3128;

/// Who answers when the table puts a command's connection to a question: the agent's approval broker
/// (a terminal, a reviewer model). The session reads the table itself and asks this gate only for
/// `ask` / `agent_review` / `agent_then_human` rows, logging the question and the answer around it;
/// the gate must come back with a refusal when nobody answers. Pass one only when someone can answer:
/// its presence is also what gives a call the proxy for rows that can only be asked.
#[derive(Clone)]
pub struct EgressAsker(pub Arc<dyn Gate>);

impl fmt::Debug for EgressAsker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EgressAsker(..)")
    }
}

/// Whether some project or org row under `net.connect.*` puts a connection to a question (ask or a
/// review). Like [`commands_may_connect`], shipped defaults do not count: they would give every call
/// a listener.
fn commands_may_be_asked_to_connect(policy: &Policy) -> bool {
    let Ok(connect) = Pattern::parse("net.connect.*") else {
        return false;
    };
    policy
        .project_rules()
        .rules()
        .iter()
        .chain(policy.org_rules().rules())
        .any(|rule| {
            matches!(
                rule.decision,
                Decision::Ask | Decision::AgentReview | Decision::AgentThenHuman
            ) && rule.pattern.overlaps(&connect)
        })
}

/// The network a call gets: what the caller asked, upgraded to the proxy when some row allows a
/// connection for commands, or (when someone can be asked) puts one to a question. A table whose
/// connect rows all deny, or only ask with nobody to ask, gives no proxy.
pub(crate) fn network_for(policy: &Policy, asked: NetworkPlan, can_ask: bool) -> NetworkPlan {
    match asked {
        NetworkPlan::None
            if commands_may_connect(policy)
                || (can_ask && commands_may_be_asked_to_connect(policy)) =>
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

/// The gate of a call with someone to ask: the live table, then the asker, logged.
struct AskingGate {
    table: TableGate,
    live_policy: Arc<RwLock<Policy>>,
    asker: Arc<dyn Gate>,
    log: Log,
    call_id: String,
}

impl AskingGate {
    async fn answer(&self, action: &Action, detail: &str) -> GateAnswer {
        let verdict = match self.live_policy.read() {
            Ok(policy) => policy.decide(action),
            Err(poisoned) => poisoned.into_inner().decide(action),
        };
        if !matches!(
            verdict.decision,
            Decision::Ask | Decision::AgentReview | Decision::AgentThenHuman
        ) {
            return self.table.answer(action);
        }
        let call_id = Some(self.call_id.as_str());
        let asked = self.log.append(
            EventKind::ApprovalAsk,
            call_id,
            json!({
                "action": action.as_str(),
                "decision": verdict.decision.as_str(),
                "decided_by": verdict.decided_by.to_string(),
                "what": detail,
            }),
        );
        if let Err(e) = asked {
            return GateAnswer::refuse(format!("the question could not be logged: {e}"));
        }
        let answer = self.asker.decide(action, detail).await;
        let (approved, by) = match &answer {
            GateAnswer::Allow { decided_by, .. } => (true, decided_by.clone()),
            GateAnswer::Refuse { reason } => (false, reason.clone()),
        };
        let logged = self.log.append(
            EventKind::ApprovalAnswer,
            call_id,
            json!({ "action": action.as_str(), "approved": approved, "by": by }),
        );
        if let Err(e) = logged {
            return GateAnswer::refuse(format!("the answer could not be logged: {e}"));
        }
        match answer {
            // The reach follows the row that was asked (`scope_of`, the one rule for every door): a
            // project or org row naming the host exactly may reach it on a private address once
            // approved; a wildcard row, the agent's own ratchet row or a shipped default reaches
            // public addresses only.
            GateAnswer::Allow { decided_by, .. } => GateAnswer::Allow {
                scope: scope_of(&verdict, action),
                decided_by: format!(
                    "{}: {}; {decided_by}",
                    verdict.decided_by,
                    verdict.decision.as_str()
                ),
            },
            refused => refused,
        }
    }
}

impl Gate for AskingGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(self.answer(action, detail))
    }
}

/// Serves the listener the sandbox handed back, for `call_id`, until the returned proxy is stopped.
/// Each connection is decided by the session's live policy (so a ratchet narrowed while the command
/// runs applies to its next connection), and a question goes to `asker` when there is one.
pub(crate) fn serve(
    live_policy: Arc<RwLock<Policy>>,
    asker: Option<&EgressAsker>,
    log: &Log,
    call_id: &str,
    listener: TcpListener,
) -> Result<CallProxy, SessionError> {
    let table = TableGate::live(Arc::clone(&live_policy));
    let gate: Arc<dyn Gate> = match asker {
        None => Arc::new(table),
        Some(asker) => Arc::new(AskingGate {
            table,
            live_policy,
            asker: Arc::clone(&asker.0),
            log: log.clone(),
            call_id: call_id.to_string(),
        }),
    };
    Ok(CallProxy::start(
        gate,
        log.clone(),
        BrokerConfig::default(),
        call_id,
        listener,
    )?)
}
