//! The host's network broker: per-host decisions, checked and pinned DNS, `fetch_url`, `web_search`,
//! the egress proxy served into a sandbox, and the connections of the host's own HTTP clients (a
//! streamable HTTP MCP server's, [`Broker::open_stream`]).
//!
//! A tool call's network namespace is empty. Everything that reaches another host goes through the
//! host process: it asks the [`Gate`] (the policy table, an approval), logs the answer, resolves the
//! name itself, checks every address of the answer against the [`AddressPolicy`], logs that, and
//! connects to a checked address only, with no second lookup. docs/network.md describes the door.
#![forbid(unsafe_code)]

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
use chock_policy::Action;
use rustls::pki_types::CertificateDer;

pub use address::{AddressClass, AddressPolicy, Refusal, classify};
pub use call_proxy::{CallProxy, PROXY_VARIABLES, proxy_env};
pub use door::{ByteCounts, Counted, PinnedConnection};
pub use error::BrokerError;
pub use events::Door;
pub use fetch::{FetchLimits, FetchedPage};
pub use html::{decode_entities, html_to_text};
pub use proxy::ProxyHandle;
pub use resolve::{NameResolver, Nameservers};
pub use search::{SearchConfig, SearchHit, SearchResults};
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
#[derive(Clone)]
pub struct Broker {
    keeper: DoorKeeper,
    tls: Arc<rustls::ClientConfig>,
    config: Arc<BrokerConfig>,
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
        Ok(Self {
            keeper: DoorKeeper {
                gate,
                log: NetLog::new(log, None),
                resolver,
                connect_timeout: config.limits.connect_timeout,
            },
            tls,
            config: Arc::new(config),
        })
    }

    /// The same broker, logging its events under `call_id` (the confined call a proxy serves).
    #[must_use]
    pub fn for_call(&self, call_id: &str) -> Self {
        let mut keeper = self.keeper.clone();
        keeper.log = NetLog::new(self.keeper.log.log().clone(), Some(call_id.to_owned()));
        Self {
            keeper,
            tls: self.tls.clone(),
            config: self.config.clone(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Decide `net.connect.<reversed host>.<port>`, resolve, check and connect: the stream handed
    /// back is already connected to a checked address. This is what a guest that "opens no socket"
    /// is handed; the proxy uses it for every CONNECT.
    pub async fn connect(
        &self,
        door: Door,
        host: &str,
        port: u16,
    ) -> Result<PinnedConnection, BrokerError> {
        let host = canonical_host(host)?;
        let action = Action::net_connect(&host, port).map_err(|e| BrokerError::BadHost {
            host: host.clone(),
            reason: e.to_string(),
        })?;
        let detail = format!("open a TCP connection to {host}:{port}");
        self.keeper
            .open(door, &action, (&host, port), &detail)
            .await
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
