//! The egress proxy of one confined call, for synchronous callers: chock-session runs a call on
//! threads, so this owns a small tokio runtime that serves the proxy while the command runs.

use std::sync::Arc;
use std::time::Duration;

use chock_log::Log;
use tokio::runtime::Runtime;

use crate::error::BrokerError;
use crate::gate::Gate;
use crate::proxy::ProxyHandle;
use crate::{Broker, BrokerConfig};

/// The variables a command reads to find the proxy. Both spellings, because curl reads only the
/// lower-case `http_proxy` and some tools only the upper-case ones.
pub const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/// The environment that points a command at a proxy on `127.0.0.1:port` in its own namespace.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    PROXY_VARIABLES
        .iter()
        .map(|name| ((*name).to_owned(), url.clone()))
        .collect()
}

/// A proxy serving one call's listener until [`CallProxy::stop`] (or drop).
#[derive(Debug)]
pub struct CallProxy {
    runtime: Option<Runtime>,
    handle: Option<ProxyHandle>,
}

impl CallProxy {
    /// Serve `listener` (handed back by the sandbox) for `call_id`, deciding through `gate`.
    pub fn start(
        gate: Arc<dyn Gate>,
        log: Log,
        config: BrokerConfig,
        call_id: &str,
        listener: std::net::TcpListener,
    ) -> Result<CallProxy, BrokerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("chock-egress")
            .enable_all()
            .build()
            .map_err(|e| BrokerError::Runtime(e.to_string()))?;
        let handle = {
            let _inside = runtime.enter();
            Broker::new(gate, log, config)?
                .for_call(call_id)
                .serve_proxy(listener)?
        };
        Ok(CallProxy {
            runtime: Some(runtime),
            handle: Some(handle),
        })
    }

    /// Stop serving: open connections get a moment to end (and log their close), then are cut.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let (Some(runtime), Some(handle)) = (self.runtime.take(), self.handle.take()) {
            runtime.block_on(handle.shutdown());
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for CallProxy {
    fn drop(&mut self) {
        self.shut();
    }
}
