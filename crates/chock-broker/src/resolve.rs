//! Name resolution on the host, with hickory.
//!
//! The broker resolves names itself instead of calling libc's getaddrinfo: the answer it checks must
//! be the answer it connects to, and a library resolver gives every address of both families (A and
//! AAAA) to check. In production the nameservers come from the system's resolv.conf, read by hickory;
//! tests point the resolver at a DNS server of their own on loopback.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfigGroup, ResolveHosts, ResolverConfig,
};
use hickory_resolver::name_server::TokioConnectionProvider;

use crate::error::BrokerError;

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

/// A resolver that returns every A and AAAA address of a name.
#[derive(Clone)]
pub struct NameResolver {
    inner: TokioResolver,
}

impl std::fmt::Debug for NameResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameResolver").finish_non_exhaustive()
    }
}

impl NameResolver {
    /// Build a resolver for `nameservers`.
    pub fn new(nameservers: &Nameservers) -> Result<Self, BrokerError> {
        let provider = TokioConnectionProvider::default();
        let mut builder = match nameservers {
            Nameservers::System => TokioResolver::builder(provider)
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
                TokioResolver::builder_with_config(
                    ResolverConfig::from_parts(None, vec![], group),
                    provider,
                )
            }
        };
        let opts = builder.options_mut();
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        opts.timeout = Duration::from_secs(5);
        opts.attempts = 2;
        if matches!(nameservers, Nameservers::Explicit(_)) {
            opts.use_hosts_file = ResolveHosts::Never;
            opts.ndots = 0;
        }
        Ok(Self {
            inner: builder.build(),
        })
    }

    /// Every address `host` resolves to (A and AAAA), in the resolver's order. An IP literal is
    /// returned as itself without asking anyone.
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
        let answer =
            self.inner
                .lookup_ip(fqdn.as_str())
                .await
                .map_err(|e| BrokerError::Resolve {
                    host: host.to_owned(),
                    reason: e.to_string(),
                })?;
        let mut addresses: Vec<IpAddr> = Vec::new();
        for address in answer.iter() {
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
        if addresses.is_empty() {
            return Err(BrokerError::Resolve {
                host: host.to_owned(),
                reason: "no addresses".into(),
            });
        }
        Ok(addresses)
    }
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
