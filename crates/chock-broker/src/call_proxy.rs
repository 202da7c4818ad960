//! The egress proxy of one confined call, or of a session's service, served on the caller's
//! runtime (the handle it passes): the proxy makes no runtime and no thread of its own, so a call
//! is awaited end to end on one runtime.

use std::sync::Arc;

use chock_log::Log;
use tokio::runtime::Handle;

use crate::error::BrokerError;
use crate::proxy::ProxyHandle;
use crate::{Broker, BrokerConfig};
use chock_decide::Gate;

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

/// A proxy serving one call's listener until [`CallProxy::shutdown`], [`CallProxy::stop`] or
/// drop.
#[derive(Debug)]
pub struct CallProxy {
    runtime: Handle,
    handle: Option<ProxyHandle>,
}

impl CallProxy {
    /// Serve `listener` (handed back by the sandbox) for `call_id` on `runtime` (the caller's:
    /// one that is being driven, e.g. `Handle::current()` in the async code that awaits the
    /// call), deciding through `gate`.
    pub fn start(
        runtime: &Handle,
        gate: Arc<dyn Gate>,
        log: Log,
        config: BrokerConfig,
        call_id: &str,
        listener: std::net::TcpListener,
    ) -> Result<CallProxy, BrokerError> {
        let handle = {
            let _inside = runtime.enter();
            Broker::new(gate, log, config)?
                .for_call(call_id)
                .proxy()
                .serve(listener)?
        };
        Ok(CallProxy {
            runtime: runtime.clone(),
            handle: Some(handle),
        })
    }

    /// Stop serving: open connections get a moment to end (and log their close), then are cut;
    /// this thread waits for that, so the close records come first. For a thread that is not
    /// one of the runtime's workers (a service's owner, a call on the blocking pool): async code
    /// awaits [`CallProxy::shutdown`] instead.
    pub fn stop(mut self) {
        if let Some(ended) = self.shut() {
            let _ = ended.recv();
        }
    }

    /// As [`CallProxy::stop`], awaited: the connections' close records are written before it
    /// returns, so they come before the call's result.
    pub async fn shutdown(mut self) {
        if let Some(handle) = self.handle.take() {
            handle.shutdown().await;
        }
    }

    /// Starts the shutdown on the runtime; what tells when it is done.
    fn shut(&mut self) -> Option<std::sync::mpsc::Receiver<()>> {
        let handle = self.handle.take()?;
        let (done, ended) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            handle.shutdown().await;
            let _ = done.send(());
        });
        Some(ended)
    }
}

impl Drop for CallProxy {
    /// A proxy dropped unstopped still shuts down, on its runtime; nothing waits for it here,
    /// since the drop may run on one of that runtime's own threads.
    fn drop(&mut self) {
        let _ = self.shut();
    }
}
