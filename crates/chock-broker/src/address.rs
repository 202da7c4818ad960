//! Which addresses the broker may connect to.
//!
//! Every address a name resolves to is classified here before anything opens. Addresses that carry an
//! IPv4 address inside an IPv6 one (IPv4-mapped, the NAT64 prefixes) are unwrapped first and judged by
//! the IPv4 rules, so `::ffff:127.0.0.1` and `64:ff9b::7f00:1` are loopback like `127.0.0.1`.
//!
//! Two kinds of refusal exist. Some ranges are never reachable (cloud metadata, link-local, multicast,
//! documentation, reserved, tunnels); others (loopback, the private ranges, shared address space,
//! unique-local) are reachable only when the table names the host exactly, because those are where an
//! operator's own services live and a wildcard rule must not stretch to them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use chock_decide::AllowScope;

/// What an address is, as far as the broker cares. Each class names its range in `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// An ordinary public address.
    Public,
    /// 0.0.0.0/8 or `::`.
    Unspecified,
    /// 127.0.0.0/8 or `::1`.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT.
    SharedAddressSpace,
    /// 169.254.0.0/16 or fe80::/10, which holds 169.254.169.254 (cloud metadata).
    LinkLocal,
    /// fd00:ec2::254, the IPv6 cloud metadata address.
    CloudMetadata,
    /// 224.0.0.0/4 or ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 198.18.0.0/15 or 2001:2::/48.
    Benchmarking,
    /// 192.0.0.0/24, 240.0.0.0/4, and IPv6 outside 2000::/3 not named elsewhere, ORCHID, discard-only.
    Reserved,
    /// fc00::/7.
    UniqueLocal,
    /// fec0::/10 (deprecated, still routed on some private networks).
    SiteLocal,
    /// 2002::/16 (6to4) and 192.88.99.0/24 (its relay anycast).
    SixToFour,
    /// 2001::/32.
    Teredo,
    /// ::/96 with a non-zero tail (IPv4-compatible, deprecated).
    Ipv4Compatible,
}

impl AddressClass {
    /// Whether a rule that names the host exactly may reach this class. Only the classes where an
    /// operator's own services live qualify; the rest are refused whatever the table says.
    pub fn reachable_by_exact_rule(self) -> bool {
        matches!(
            self,
            Self::Public
                | Self::Loopback
                | Self::Private
                | Self::SharedAddressSpace
                | Self::UniqueLocal
                | Self::SiteLocal
        )
    }

    /// The range in words, for refusals and the log.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Public => "a public address",
            Self::Unspecified => "unspecified (0.0.0.0/8, ::)",
            Self::Loopback => "loopback (127.0.0.0/8, ::1)",
            Self::Private => "private (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)",
            Self::SharedAddressSpace => "shared address space (100.64.0.0/10)",
            Self::LinkLocal => "link-local (169.254.0.0/16, fe80::/10; holds cloud metadata)",
            Self::CloudMetadata => "the cloud metadata address fd00:ec2::254",
            Self::Multicast => "multicast (224.0.0.0/4, ff00::/8)",
            Self::Broadcast => "broadcast (255.255.255.255)",
            Self::Documentation => {
                "documentation (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20)"
            }
            Self::Benchmarking => "benchmarking (198.18.0.0/15, 2001:2::/48)",
            Self::Reserved => {
                "reserved (192.0.0.0/24, 240.0.0.0/4, or outside IPv6 global unicast)"
            }
            Self::UniqueLocal => "unique-local (fc00::/7)",
            Self::SiteLocal => "site-local (fec0::/10)",
            Self::SixToFour => "6to4 (2002::/16, 192.88.99.0/24)",
            Self::Teredo => "Teredo (2001::/32)",
            Self::Ipv4Compatible => "IPv4-compatible (::/96, deprecated)",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why an address was refused: the address as answered, the IPv4 address it carried (if unwrapped),
/// and its class.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// The address as the resolver answered it.
    pub address: IpAddr,
    /// The address that was judged (differs from `address` when an IPv4 address was unwrapped).
    pub judged: IpAddr,
    /// The class that refused it.
    pub class: AddressClass,
    /// Whether a rule naming the host exactly would have reached it.
    pub exact_rule_would_reach: bool,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.address)?;
        if self.judged != self.address {
            write!(f, " (carrying {})", self.judged)?;
        }
        write!(f, " is {}", self.class)?;
        if self.exact_rule_would_reach {
            f.write_str("; only a rule naming this host exactly (no wildcard) reaches it")
        } else {
            f.write_str("; never reachable through the broker")
        }
    }
}

impl std::error::Error for Refusal {}

/// The address rules for one decision. Built from how the act was allowed: a wildcard (or an
/// approval) reaches public addresses only; a rule naming the host exactly also reaches the operator's
/// own ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPolicy {
    scope: AllowScope,
}

impl AddressPolicy {
    /// Rules for an act allowed by `scope`.
    pub fn for_scope(scope: AllowScope) -> Self {
        Self { scope }
    }

    /// Public addresses only.
    pub fn public_only() -> Self {
        Self::for_scope(AllowScope::Pattern)
    }

    /// Check one address.
    pub fn check(&self, address: IpAddr) -> Result<(), Refusal> {
        let (judged, class) = classify(address);
        let allowed = match class {
            AddressClass::Public => true,
            other => self.scope == AllowScope::ExactHost && other.reachable_by_exact_rule(),
        };
        if allowed {
            Ok(())
        } else {
            Err(Refusal {
                address,
                judged,
                class,
                exact_rule_would_reach: class.reachable_by_exact_rule(),
            })
        }
    }

    /// Check every address of an answer; the first refused one refuses the whole answer.
    ///
    /// Stricter than dropping refused addresses on purpose: a rebinding attacker mixes a public
    /// address with an internal one and waits for a client to pick the internal one. An answer that
    /// carries any refused address says the name is not what it claims.
    pub fn check_all(&self, addresses: &[IpAddr]) -> Result<(), Refusal> {
        addresses.iter().try_for_each(|a| self.check(*a))
    }
}

/// Classify an address, unwrapping IPv4 carried in IPv6. Returns the address judged and its class.
///
/// The well-known NAT64 prefix 64:ff9b::/96 carries the IPv4 address in its last 32 bits; for the
/// local-use prefix see `classify_local_nat64`.
pub fn classify(address: IpAddr) -> (IpAddr, AddressClass) {
    match address {
        IpAddr::V4(v4) => (address, classify_v4(v4)),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(addr: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(addr) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(addr: Ipv6Addr, net: Ipv6Addr, len: u32) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    (u128::from(addr) & mask) == (u128::from(net) & mask)
}

/// The IPv4 table, most specific first.
fn classify_v4(a: Ipv4Addr) -> AddressClass {
    use AddressClass as C;
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        ([255, 255, 255, 255], 32, C::Broadcast),
        ([0, 0, 0, 0], 8, C::Unspecified),
        ([127, 0, 0, 0], 8, C::Loopback),
        ([10, 0, 0, 0], 8, C::Private),
        ([172, 16, 0, 0], 12, C::Private),
        ([192, 168, 0, 0], 16, C::Private),
        ([100, 64, 0, 0], 10, C::SharedAddressSpace),
        ([169, 254, 0, 0], 16, C::LinkLocal),
        ([192, 0, 2, 0], 24, C::Documentation),
        ([198, 51, 100, 0], 24, C::Documentation),
        ([203, 0, 113, 0], 24, C::Documentation),
        ([198, 18, 0, 0], 15, C::Benchmarking),
        ([192, 88, 99, 0], 24, C::SixToFour),
        ([192, 0, 0, 0], 24, C::Reserved),
        ([224, 0, 0, 0], 4, C::Multicast),
        ([240, 0, 0, 0], 4, C::Reserved),
    ];
    TABLE
        .iter()
        .find(|(net, len, _)| in_v4(a, *net, *len))
        .map_or(C::Public, |(_, _, class)| *class)
}

fn v6(s: &str) -> Ipv6Addr {
    // Only called with the literals below; a typo there is caught by the tests of every range.
    s.parse().unwrap_or(Ipv6Addr::UNSPECIFIED)
}

/// The IPv4 address embedded after a prefix of `prefix_len` bits (RFC 6052: the octet at bits 64..72,
/// "u", is skipped), and whether the reading is consistent: "u" and the suffix after the address zero.
fn rfc6052_v4(a: Ipv6Addr, prefix_len: u32) -> (Ipv4Addr, bool) {
    let o = a.octets();
    let mut i = (prefix_len / 8) as usize;
    let mut out = [0u8; 4];
    for byte in &mut out {
        if i == 8 {
            i = 9;
        }
        *byte = o[i];
        i += 1;
    }
    let consistent = o[8] == 0 && o[i..].iter().all(|b| *b == 0);
    (Ipv4Addr::from(out), consistent)
}

/// The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215): the network picks where inside it the IPv4
/// address sits, which the bytes cannot tell. Every consistent reading is judged and the worst wins;
/// readings that land in 0.0.0.0/8 are the zero padding of another layout and are skipped. The true
/// reading is always among those judged, so no layout hides an internal address.
fn classify_local_nat64(a: Ipv6Addr) -> (IpAddr, AddressClass) {
    [48, 56, 64, 96]
        .iter()
        .map(|len| rfc6052_v4(a, *len))
        .filter(|(v4, consistent)| *consistent && v4.octets()[0] != 0)
        .map(|(v4, _)| (IpAddr::V4(v4), classify_v4(v4)))
        .reduce(worse)
        .unwrap_or((IpAddr::V6(a), AddressClass::Reserved))
}

fn worse(a: (IpAddr, AddressClass), b: (IpAddr, AddressClass)) -> (IpAddr, AddressClass) {
    let rank = |c: AddressClass| match c {
        AddressClass::Public => 0,
        c if c.reachable_by_exact_rule() => 1,
        _ => 2,
    };
    if rank(b.1) > rank(a.1) { b } else { a }
}

fn classify_v6(a: Ipv6Addr) -> (IpAddr, AddressClass) {
    use AddressClass as C;
    let own = |c| (IpAddr::V6(a), c);
    if a.is_unspecified() {
        return own(C::Unspecified);
    }
    if a.is_loopback() {
        return own(C::Loopback);
    }
    if let Some(v4) = a.to_ipv4_mapped() {
        return (IpAddr::V4(v4), classify_v4(v4));
    }
    if in_v6(a, v6("64:ff9b::"), 96) {
        let [.., w, x, y, z] = a.octets();
        let v4 = Ipv4Addr::new(w, x, y, z);
        return (IpAddr::V4(v4), classify_v4(v4));
    }
    if in_v6(a, v6("64:ff9b:1::"), 48) {
        return classify_local_nat64(a);
    }
    if in_v6(a, Ipv6Addr::UNSPECIFIED, 96) {
        return own(C::Ipv4Compatible);
    }
    if a == v6("fd00:ec2::254") {
        return own(C::CloudMetadata);
    }
    const TABLE: &[(&str, u32, AddressClass)] = &[
        ("fe80::", 10, C::LinkLocal),
        ("fec0::", 10, C::SiteLocal),
        ("fc00::", 7, C::UniqueLocal),
        ("ff00::", 8, C::Multicast),
        ("2001:db8::", 32, C::Documentation),
        ("3fff::", 20, C::Documentation),
        ("2001:2::", 48, C::Benchmarking),
        ("2001::", 32, C::Teredo),
        ("2001:10::", 28, C::Reserved),
        ("2001:20::", 28, C::Reserved),
        ("2002::", 16, C::SixToFour),
        ("100::", 64, C::Reserved),
    ];
    if let Some((_, _, class)) = TABLE.iter().find(|(net, len, _)| in_v6(a, v6(net), *len)) {
        return own(*class);
    }
    if !in_v6(a, v6("2000::"), 3) {
        return own(C::Reserved);
    }
    own(C::Public)
}
