//! The host's network broker: per-host decisions, checked and pinned DNS, `fetch_url`, `web_search`,
//! the egress proxy served into a sandbox, and the connections of the host's own HTTP clients (a
//! streamable HTTP MCP server's, [`Broker::open_stream`]).
//!
//! A tool call's network namespace is empty. Everything that reaches another host goes through the
//! host process: it asks the [`Gate`] (the policy table, an approval), logs the answer, resolves the
//! name itself, checks every address of the answer against the [`AddressPolicy`], logs that, and
//! connects to a checked address only, with no second lookup. docs/network.md describes the door.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod address;
mod call_proxy;
mod door;
mod error;
mod events;
mod fetch;
mod html;
mod proxy;
mod resolve;
mod search;
mod ssh_agent;
mod stream;

use std::sync::Arc;

use chock_decide::Gate;
use std::time::Duration;

use chock_log::Log;
use rustls::pki_types::CertificateDer;

pub use address::{AddressClass, AddressPolicy, Refusal, classify};
pub use call_proxy::{CallProxy, PROXY_VARIABLES, proxy_env};
pub use door::{ByteCounts, Counted, PinnedConnection};
pub use error::BrokerError;
pub use events::Door;
pub use fetch::{FetchLimits, FetchedPage, Fetcher};
pub use html::{decode_entities, html_to_text};
pub use proxy::{EgressProxy, ProxyHandle};
pub use resolve::{NameResolver, Nameservers};
pub use search::{SearchConfig, SearchHit, SearchResults, Searcher};
pub use ssh_agent::{AgentCounts, AgentProxy};
pub use stream::BrokeredStream;

use door::DoorKeeper;
use events::NetLog;

/// How the broker is set up. `Default` is production: the system's nameservers, the webpki roots,
/// the default limits, no search backend.
#[derive(Debug, Clone, Default)]
pub struct BrokerConfig {
    /// Where names are resolved.
    pub nameservers: Nameservers,
    /// Limits for `fetch_url` and `web_search`.
    pub limits: FetchLimits,
    /// Certificates trusted in addition to the webpki roots (a company's own CA; tests' own CA).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The search backend, if any.
    pub search: Option<SearchConfig>,
}

/// The network door of one session (or one call, see [`Broker::for_call`]). Cheap to clone.
///
/// It composes the parts that act through the door, each holding only what it needs: the
/// [`Fetcher`] (`fetch_url`), the [`Searcher`] (`web_search`) and the [`EgressProxy`] (the proxy
/// served into a sandbox). Every one of them opens its connections through the same door
/// (`door.rs`: decide, log, resolve, check every address, log, connect, log), which is all they
/// share.
#[derive(Clone)]
pub struct Broker {
    keeper: DoorKeeper,
    tls: Arc<rustls::ClientConfig>,
    config: Arc<BrokerConfig>,
    fetcher: Fetcher,
    searcher: Searcher,
    proxy: EgressProxy,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker that asks `gate`, logs to `log`, and resolves as `config` says.
    pub fn new(gate: Arc<dyn Gate>, log: Log, config: BrokerConfig) -> Result<Self, BrokerError> {
        let resolver = NameResolver::new(&config.nameservers)?;
        let tls = Arc::new(fetch::tls_config(&config.extra_roots)?);
        let keeper = DoorKeeper {
            gate,
            log: NetLog::new(log, None),
            resolver,
            connect_timeout: config.limits.connect_timeout,
        };
        Ok(Self::assemble(keeper, tls, Arc::new(config)))
    }

    /// The parts, each given the door `keeper`.
    fn assemble(
        keeper: DoorKeeper,
        tls: Arc<rustls::ClientConfig>,
        config: Arc<BrokerConfig>,
    ) -> Self {
        let fetcher = Fetcher::new(keeper.clone(), tls.clone(), config.limits);
        let searcher = Searcher::new(keeper.clone(), fetcher.clone(), config.search.clone());
        let proxy = EgressProxy::new(keeper.clone());
        Self {
            keeper,
            tls,
            config,
            fetcher,
            searcher,
            proxy,
        }
    }

    /// The same broker, logging its events under `call_id` (the confined call a proxy serves).
    #[must_use]
    pub fn for_call(&self, call_id: &str) -> Self {
        let mut keeper = self.keeper.clone();
        keeper.log = NetLog::new(self.keeper.log.log().clone(), Some(call_id.to_owned()));
        Self::assemble(keeper, self.tls.clone(), self.config.clone())
    }

    /// The configuration in force.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// What makes `fetch_url`'s GETs, for a caller that needs nothing else of the broker.
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// What runs `web_search`, for a caller that needs nothing else of the broker.
    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    /// The egress proxy a confined call's listener is served by.
    pub fn proxy(&self) -> &EgressProxy {
        &self.proxy
    }

    /// Fetch `url` and return it as readable, redacted text ([`Fetcher::fetch_url`]).
    pub async fn fetch_url(&self, url: &str) -> Result<FetchedPage, BrokerError> {
        self.fetcher.fetch_url(url).await
    }

    /// Search the web with the configured backend ([`Searcher::search`]).
    pub async fn web_search(
        &self,
        query: &str,
        max_hits: usize,
    ) -> Result<SearchResults, BrokerError> {
        self.searcher.search(query, max_hits).await
    }

    /// Serve the egress proxy on `listener` ([`EgressProxy::serve`]). Must be called inside a
    /// tokio runtime.
    pub fn serve_proxy(&self, listener: std::net::TcpListener) -> Result<ProxyHandle, BrokerError> {
        self.proxy.serve(listener)
    }

    /// Decide `net.connect.<reversed host>.<port>`, resolve, check and connect: the stream handed
    /// back is already connected to a checked address. This is what a guest that "opens no socket"
    /// is handed; the proxy makes the same act for every CONNECT.
    pub async fn connect(
        &self,
        door: Door,
        host: &str,
        port: u16,
    ) -> Result<PinnedConnection, BrokerError> {
        self.keeper.connect(door, host, port).await
    }

    /// Decide `net.connect.<reversed host>.<port>`, resolve, check and connect (as
    /// [`Broker::connect`]), then, with `tls`, speak TLS verifying `host`'s certificate against
    /// the webpki roots and the configured extra roots. Nothing is sent before the decision and
    /// the address check are logged.
    pub async fn open_stream(
        &self,
        door: Door,
        host: &str,
        port: u16,
        tls: bool,
    ) -> Result<BrokeredStream, BrokerError> {
        BrokeredStream::open(&self.keeper, &self.tls, door, host, port, tls).await
    }

    /// Pass `text` through the log's redaction funnel, so a known secret never reaches the model.
    pub fn redact(&self, text: &str) -> String {
        self.keeper.log.log().redact(text)
    }
}

/// The one spelling of a host that action names, the resolver and the log get: read by the same
/// WHATWG host parser a URL's host goes through, so a CONNECT target and a URL agree. An IPv4
/// address in any legacy spelling (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) becomes its
/// dotted form and is decided and checked as that address, never sent to DNS as a name; a name is
/// lower-cased (IDNA to ASCII) without a trailing dot; an IPv6 address loses its brackets; a zone
/// id (`fe80::1%eth0`) or any other character a host cannot hold is refused.
pub(crate) fn canonical_host(host: &str) -> Result<String, BrokerError> {
    let bad = |reason: String| BrokerError::BadHost {
        host: host.to_owned(),
        reason,
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let parsed = if bare.contains(':') {
        url::Host::parse(&format!("[{bare}]"))
    } else {
        url::Host::parse(bare)
    };
    match parsed.map_err(|e| bad(e.to_string()))? {
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            if name.is_empty() {
                return Err(bad("empty host name".into()));
            }
            Ok(name.to_owned())
        }
        url::Host::Ipv4(v4) => Ok(v4.to_string()),
        url::Host::Ipv6(v6) => Ok(v6.to_string()),
    }
}

/// Default timeouts, in one place.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
