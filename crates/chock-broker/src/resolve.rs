//! Name resolution on the host, with hickory.
//!
//! The broker resolves names itself instead of calling libc's getaddrinfo: the answer it checks must
//! be the answer it connects to, and a library resolver gives every address of both families (A and
//! AAAA) to check. In production the nameservers come from the system's resolv.conf, read by hickory;
//! tests point the resolver at a DNS server of their own on loopback.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::lookup_ip::LookupIp;
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{ResolveError, TokioResolver};

use crate::error::BrokerError;

/// How long a lookup still waits for one address family once the other has answered with
/// addresses. A DNS server that never answers one family (AAAA queries dropped by a forwarder or a
/// firewall is the usual case) would otherwise hold every connection for the resolver's three
/// tries of 5 s, and each proxied plain-HTTP request is a connection of its own: an http `git
/// push` through the proxy makes four. Longer than RFC 8305's 50 ms, so that a family that is
/// merely slower is still in the answer every address of which is checked.
const RESOLUTION_DELAY: Duration = Duration::from_millis(250);

/// Where the broker's resolver asks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Nameservers {
    /// The system's configuration (resolv.conf and the hosts file), read by hickory.
    #[default]
    System,
    /// These servers over plain UDP (falling back to TCP), and no hosts file. Tests use this with a
    /// loopback server.
    Explicit(Vec<SocketAddr>),
}

/// A resolver that returns every A and AAAA address of a name: one resolver per family, asked at
/// once, so that a family that does not answer costs a connection `RESOLUTION_DELAY` (250 ms) when the
/// other did.
#[derive(Clone)]
pub struct NameResolver {
    v4: TokioResolver,
    v6: TokioResolver,
}

impl std::fmt::Debug for NameResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameResolver").finish_non_exhaustive()
    }
}

impl NameResolver {
    /// Build a resolver for `nameservers`.
    pub fn new(nameservers: &Nameservers) -> Result<Self, BrokerError> {
        let (config, mut opts) = match nameservers {
            Nameservers::System => hickory_resolver::system_conf::read_system_conf()
                .map_err(|e| BrokerError::ResolverConfig(e.to_string()))?,
            Nameservers::Explicit(servers) => {
                let mut group = NameServerConfigGroup::new();
                for server in servers {
                    group.merge(NameServerConfigGroup::from_ips_clear(
                        &[server.ip()],
                        server.port(),
                        true,
                    ));
                }
                let mut opts = ResolverOpts::default();
                opts.use_hosts_file = ResolveHosts::Never;
                opts.ndots = 0;
                (ResolverConfig::from_parts(None, vec![], group), opts)
            }
        };
        opts.timeout = Duration::from_secs(5);
        opts.attempts = 2;
        let family = |strategy: LookupIpStrategy| {
            let mut opts = opts.clone();
            opts.ip_strategy = strategy;
            TokioResolver::builder_with_config(config.clone(), TokioConnectionProvider::default())
                .with_options(opts)
                .build()
        };
        Ok(Self {
            v4: family(LookupIpStrategy::Ipv4Only),
            v6: family(LookupIpStrategy::Ipv6Only),
        })
    }

    /// Every address `host` resolves to (A and AAAA), the family that answered first first. An IP
    /// literal is returned as itself without asking anyone. Both families are asked at once; once
    /// one has given addresses, the other is waited for `RESOLUTION_DELAY` (250 ms) at most, and what it
    /// has not answered by then is not in the answer. A family that gives nothing (no such
    /// record, or an error) leaves the other to be waited for in full.
    pub async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, BrokerError> {
        if let Ok(ip) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(vec![ip]);
        }
        // A trailing dot makes the name absolute, so no search domain is tried.
        let fqdn = if host.ends_with('.') {
            host.to_owned()
        } else {
            format!("{host}.")
        };
        // Boxed: two resolvers' lookups in flight are large futures, and this one is awaited
        // deep in a connection's (a test's whole client flow ran out of a thread's 2 MiB stack
        // with them inline).
        let mut v4 = Box::pin(self.v4.lookup_ip(fqdn.as_str()));
        let mut v6 = Box::pin(self.v6.lookup_ip(fqdn.as_str()));
        let first = tokio::select! {
            found = &mut v4 => Answered::V4(found),
            found = &mut v6 => Answered::V6(found),
        };
        let (found, other) = match first {
            Answered::V4(found) => (found, v6),
            Answered::V6(found) => (found, v4),
        };
        let answer = match addresses(found) {
            Ok(mut addresses) if !addresses.is_empty() => {
                if let Ok(Ok(more)) = tokio::time::timeout(RESOLUTION_DELAY, other).await {
                    addresses.extend(addresses_of(&more));
                }
                Ok(addresses)
            }
            first => match (first, addresses(other.await)) {
                (_, Ok(addresses)) => Ok(addresses),
                (Err(e), Err(_)) | (Ok(_), Err(e)) => Err(e.to_string()),
            },
        };
        let resolved = answer.map_err(|reason| BrokerError::Resolve {
            host: host.to_owned(),
            reason,
        })?;
        let mut unique: Vec<IpAddr> = Vec::new();
        for address in resolved {
            if !unique.contains(&address) {
                unique.push(address);
            }
        }
        if unique.is_empty() {
            return Err(BrokerError::Resolve {
                host: host.to_owned(),
                reason: "no addresses".into(),
            });
        }
        Ok(unique)
    }
}

/// Which family's lookup finished first, and how.
enum Answered {
    V4(Result<LookupIp, ResolveError>),
    V6(Result<LookupIp, ResolveError>),
}

fn addresses_of(lookup: &LookupIp) -> Vec<IpAddr> {
    lookup.iter().collect()
}

fn addresses(found: Result<LookupIp, ResolveError>) -> Result<Vec<IpAddr>, ResolveError> {
    found.map(|lookup| addresses_of(&lookup))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Production reads the system's configuration; building the resolver sends nothing.
    #[test]
    fn the_system_configuration_is_read() {
        if !std::path::Path::new("/etc/resolv.conf").exists() {
            eprintln!("skipped: no /etc/resolv.conf on this machine");
            return;
        }
        NameResolver::new(&Nameservers::System).expect("resolv.conf is readable by hickory");
    }

    #[tokio::test]
    async fn an_address_is_its_own_answer() {
        let resolver = NameResolver::new(&Nameservers::Explicit(vec![])).expect("resolver");
        assert_eq!(
            resolver.lookup("192.0.2.1").await.expect("v4"),
            vec!["192.0.2.1".parse::<IpAddr>().expect("ip")]
        );
        assert_eq!(
            resolver.lookup("[2001:db8::1]").await.expect("v6"),
            vec!["2001:db8::1".parse::<IpAddr>().expect("ip")]
        );
    }
}
