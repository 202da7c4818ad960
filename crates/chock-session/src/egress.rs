//! The egress proxy of a confined call (docs/network.md). When some rule of the table lets commands
//! connect somewhere (`net.connect.*`), the call's plan asks the sandbox for a listener inside the
//! call's network namespace; the host serves it with the broker while the command runs, and the
//! command finds it through `HTTP_PROXY`/`HTTPS_PROXY`. Each connection is decided by the table alone:
//! a running command cannot wait for a person, so `ask` refuses.

use std::net::TcpListener;
use std::sync::{Arc, RwLock};

use chock_broker::{
    BrokerConfig, CallProxy, PROXY_VARIABLES, TableGate, commands_may_connect, proxy_env,
};
use chock_log::Log;
use chock_policy::Policy;
use chock_sandbox::{NetworkPlan, Plan};

use crate::SessionError;

/// The proxy's port inside the call's network namespace. Each call has a namespace of its own, so one
/// fixed port never collides; 3128 is the port tools expect a proxy on.
pub const PROXY_PORT: u16 = 3128;

/// The network a call gets: what the caller asked, upgraded to the proxy when the table allows some
/// connection for commands.
pub(crate) fn network_for(policy: &Policy, asked: NetworkPlan) -> NetworkPlan {
    match asked {
        NetworkPlan::None if commands_may_connect(policy) => {
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

/// Serves the listener the sandbox handed back, for `call_id`, until the returned proxy is stopped.
/// Each connection is decided by the session's live policy, so a ratchet narrowed while the command
/// runs applies to its next connection.
pub(crate) fn serve(
    live_policy: Arc<RwLock<Policy>>,
    log: &Log,
    call_id: &str,
    listener: TcpListener,
) -> Result<CallProxy, SessionError> {
    let gate = Arc::new(TableGate::live(live_policy));
    Ok(CallProxy::start(
        gate,
        log.clone(),
        BrokerConfig::default(),
        call_id,
        listener,
    )?)
}
