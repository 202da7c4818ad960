//! The egress proxy of one confined call, or of a session's service. Inside a multi-thread tokio
//! runtime (the confined call is awaited on one: the agent's, or the one `chock exec` makes for
//! its command) the proxy is served on that runtime; only a caller with none, or on a runtime of
//! one thread, gets a small runtime of the proxy's own.

use std::sync::Arc;
use std::time::Duration;

use chock_log::Log;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

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

/// A proxy serving one call's listener until [`CallProxy::stop`] (or drop).
#[derive(Debug)]
pub struct CallProxy {
    runtime: Option<Served>,
    handle: Option<ProxyHandle>,
}

/// Which runtime serves the proxy.
#[derive(Debug)]
enum Served {
    /// The caller's own (a multi-thread runtime it runs in).
    Callers(Handle),
    /// One made for this proxy: the caller runs in no runtime.
    Own(Runtime),
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
        // A current-thread runtime is left alone: `stop` waits for the shutdown, which such a
        // runtime could only run on the thread that waits.
        let runtime = match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => Served::Callers(h),
            _ => Served::Own(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("chock-egress")
                    .enable_all()
                    .build()
                    .map_err(|e| BrokerError::Runtime(e.to_string()))?,
            ),
        };
        let handle = {
            let _inside = match &runtime {
                Served::Callers(h) => h.enter(),
                Served::Own(rt) => rt.enter(),
            };
            Broker::new(gate, log, config)?
                .for_call(call_id)
                .proxy()
                .serve(listener)?
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

    /// As [`CallProxy::stop`], awaited: for a caller on a runtime (the session's call awaited
    /// end to end), which must not wait for the shutdown on one of its own threads.
    pub async fn shutdown(mut self) {
        match (self.runtime.take(), self.handle.take()) {
            (Some(Served::Callers(_)), Some(handle)) => handle.shutdown().await,
            (Some(Served::Own(runtime)), Some(handle)) => {
                handle.shutdown().await;
                runtime.shutdown_background();
            }
            _ => {}
        }
    }

    fn shut(&mut self) {
        match (self.runtime.take(), self.handle.take()) {
            (Some(Served::Own(runtime)), Some(handle)) => {
                runtime.block_on(handle.shutdown());
                runtime.shutdown_timeout(Duration::from_secs(1));
            }
            (Some(Served::Callers(runtime)), Some(handle)) => {
                // The shutdown runs on the caller's runtime; this thread (the call's, on its
                // blocking pool) waits for it, so the connections' close records come before
                // the call's result, as with a runtime of the proxy's own.
                let (done, ended) = std::sync::mpsc::channel();
                runtime.spawn(async move {
                    handle.shutdown().await;
                    let _ = done.send(());
                });
                let _ = ended.recv();
            }
            _ => {}
        }
    }
}

impl Drop for CallProxy {
    fn drop(&mut self) {
        self.shut();
    }
}
