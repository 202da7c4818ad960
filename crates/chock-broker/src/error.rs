//! What can go wrong at the network door. Each error names the host or URL it concerns.

use crate::address::Refusal;

/// An error from the broker. Refusals (`Refused`, `AddressRefused`) are decisions, not faults: the
/// caller reports them to the model as such.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The gate refused the act.
    #[error("refused `{action}`: {reason}")]
    Refused {
        /// The action name asked.
        action: String,
        /// Why.
        reason: String,
    },
    /// A name resolved to an address the rules refuse; nothing was opened.
    #[error("refused {host}: it resolves to {refusal}")]
    AddressRefused {
        /// The host asked for.
        host: String,
        /// The first refused address.
        refusal: Refusal,
    },
    /// The host is not something an action name can carry.
    #[error("cannot name host `{host}` as an action: {reason}")]
    BadHost {
        /// The host text.
        host: String,
        /// Why.
        reason: String,
    },
    /// The URL is malformed or not http/https.
    #[error("bad URL `{url}`: {reason}")]
    BadUrl {
        /// The URL text.
        url: String,
        /// Why.
        reason: String,
    },
    /// The resolver could not be built from the system's configuration.
    #[error("cannot set up the resolver: {0}")]
    ResolverConfig(String),
    /// The name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// No checked address accepted a connection.
    #[error("cannot connect to {host}:{port}: {reason}")]
    Connect {
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// Why (the last attempt's error).
        reason: String,
    },
    /// TLS failed (including a certificate that does not name the host).
    #[error("TLS with {host} failed: {reason}")]
    Tls {
        /// The host whose name was verified.
        host: String,
        /// Why.
        reason: String,
    },
    /// The HTTP exchange failed.
    #[error("HTTP from {url} failed: {reason}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// More redirects than allowed.
    #[error("too many redirects (more than {limit}) starting at {url}")]
    TooManyRedirects {
        /// The first URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The whole fetch took longer than allowed.
    #[error("{url} took longer than {seconds} s")]
    TimedOut {
        /// The URL.
        url: String,
        /// The limit in seconds.
        seconds: u64,
    },
    /// The search backend's answer could not be read.
    #[error("search backend {backend} answered something unreadable: {reason}")]
    SearchAnswer {
        /// Which backend.
        backend: String,
        /// Why.
        reason: String,
    },
    /// The search configuration names an unknown backend or lacks a part.
    #[error("search backend {backend}: {reason}")]
    SearchConfig {
        /// Which backend.
        backend: String,
        /// What is wrong.
        reason: String,
    },
    /// The search backend needs a key that is not set.
    #[error("search backend {backend} needs an API key in ${env}, which is not set")]
    MissingSearchKey {
        /// Which backend.
        backend: String,
        /// The environment variable named in the configuration.
        env: String,
    },
    /// The decision or connection could not be logged, so the act did not happen.
    #[error("cannot log the network event, so nothing was opened: {0}")]
    Log(String),
}

impl BrokerError {
    /// True for refusals by the table or the address rules (as opposed to faults).
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Refused { .. } | Self::AddressRefused { .. })
    }
}
