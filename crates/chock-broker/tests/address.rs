//! Every range of the address rules, judged for a wildcard allow and for an exact-host allow.

use std::net::IpAddr;

use chock_broker::{AddressClass as C, AddressPolicy, classify};
use chock_decide::AllowScope;

/// (address, class, the IPv4 address judged if unwrapped, reachable by a wildcard rule, by an exact rule)
const TABLE: &[(&str, C, Option<&str>, bool, bool)] = &[
    // public
    ("8.8.8.8", C::Public, None, true, true),
    ("1.1.1.1", C::Public, None, true, true),
    ("2606:4700:4700::1111", C::Public, None, true, true),
    ("172.32.0.1", C::Public, None, true, true),
    ("100.128.0.1", C::Public, None, true, true),
    ("169.253.255.255", C::Public, None, true, true),
    // unspecified, loopback
    ("0.0.0.0", C::Unspecified, None, false, false),
    ("0.1.2.3", C::Unspecified, None, false, false),
    ("::", C::Unspecified, None, false, false),
    ("127.0.0.1", C::Loopback, None, false, true),
    ("127.255.255.254", C::Loopback, None, false, true),
    ("::1", C::Loopback, None, false, true),
    // private
    ("10.0.0.1", C::Private, None, false, true),
    ("10.255.255.255", C::Private, None, false, true),
    ("172.16.0.1", C::Private, None, false, true),
    ("172.31.255.255", C::Private, None, false, true),
    ("192.168.1.1", C::Private, None, false, true),
    ("100.64.0.1", C::SharedAddressSpace, None, false, true),
    ("100.127.255.255", C::SharedAddressSpace, None, false, true),
    // link-local and metadata
    ("169.254.169.254", C::LinkLocal, None, false, false),
    ("169.254.0.1", C::LinkLocal, None, false, false),
    ("fe80::1", C::LinkLocal, None, false, false),
    ("febf::1", C::LinkLocal, None, false, false),
    ("fd00:ec2::254", C::CloudMetadata, None, false, false),
    // multicast, broadcast, reserved
    ("224.0.0.1", C::Multicast, None, false, false),
    ("239.255.255.250", C::Multicast, None, false, false),
    ("ff02::1", C::Multicast, None, false, false),
    ("255.255.255.255", C::Broadcast, None, false, false),
    ("240.0.0.1", C::Reserved, None, false, false),
    ("192.0.0.8", C::Reserved, None, false, false),
    ("100::1", C::Reserved, None, false, false),
    ("2001:10::1", C::Reserved, None, false, false),
    ("2001:20::1", C::Reserved, None, false, false),
    ("4000::1", C::Reserved, None, false, false),
    ("::2:3", C::Ipv4Compatible, None, false, false),
    // documentation and benchmarking
    ("192.0.2.1", C::Documentation, None, false, false),
    ("198.51.100.7", C::Documentation, None, false, false),
    ("203.0.113.255", C::Documentation, None, false, false),
    ("2001:db8::1", C::Documentation, None, false, false),
    ("3fff::1", C::Documentation, None, false, false),
    ("198.18.0.1", C::Benchmarking, None, false, false),
    ("198.19.255.255", C::Benchmarking, None, false, false),
    ("2001:2::1", C::Benchmarking, None, false, false),
    // IPv6 private-like
    ("fc00::1", C::UniqueLocal, None, false, true),
    ("fd12:3456::1", C::UniqueLocal, None, false, true),
    ("fec0::1", C::SiteLocal, None, false, true),
    // tunnels
    ("2002:c000:0204::1", C::SixToFour, None, false, false),
    ("192.88.99.1", C::SixToFour, None, false, false),
    (
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        C::Teredo,
        None,
        false,
        false,
    ),
    // IPv4-mapped: unwrapped and judged as IPv4
    (
        "::ffff:127.0.0.1",
        C::Loopback,
        Some("127.0.0.1"),
        false,
        true,
    ),
    (
        "::ffff:169.254.169.254",
        C::LinkLocal,
        Some("169.254.169.254"),
        false,
        false,
    ),
    ("::ffff:10.1.2.3", C::Private, Some("10.1.2.3"), false, true),
    ("::ffff:8.8.8.8", C::Public, Some("8.8.8.8"), true, true),
    // NAT64 well-known prefix: unwrapped
    (
        "64:ff9b::7f00:1",
        C::Loopback,
        Some("127.0.0.1"),
        false,
        true,
    ),
    (
        "64:ff9b::a9fe:a9fe",
        C::LinkLocal,
        Some("169.254.169.254"),
        false,
        false,
    ),
    ("64:ff9b::a00:1", C::Private, Some("10.0.0.1"), false, true),
    ("64:ff9b::808:808", C::Public, Some("8.8.8.8"), true, true),
    // NAT64 local-use prefix: every RFC 6052 reading, worst wins
    ("64:ff9b:1::808:808", C::Public, Some("8.8.8.8"), true, true),
    (
        "64:ff9b:1:7f00:0:100::",
        C::Loopback,
        Some("127.0.0.1"),
        false,
        true,
    ),
    (
        "64:ff9b:1:808:8:800::",
        C::Public,
        Some("8.8.8.8"),
        true,
        true,
    ),
    ("64:ff9b:1:0:ff00::808:808", C::Reserved, None, false, false),
    (
        "64:ff9b:1::7f00:1",
        C::Loopback,
        Some("127.0.0.1"),
        false,
        true,
    ),
    (
        "64:ff9b:1:a9fe:a9:fe00::",
        C::LinkLocal,
        Some("169.254.169.254"),
        false,
        false,
    ),
];

#[test]
fn every_range_is_classified_and_judged_for_both_kinds_of_rule() {
    let wildcard = AddressPolicy::for_scope(AllowScope::Pattern);
    let exact = AddressPolicy::for_scope(AllowScope::ExactHost);
    let mut wrong = Vec::new();
    for (text, class, unwrapped, by_wildcard, by_exact) in TABLE {
        let address: IpAddr = text.parse().expect("table address");
        let judged: IpAddr = unwrapped.map_or(address, |u| u.parse().expect("table address"));
        let got = classify(address);
        if got != (judged, *class) {
            wrong.push(format!(
                "{text}: classified as {got:?}, want ({judged}, {class:?})"
            ));
        }
        if wildcard.check(address).is_ok() != *by_wildcard {
            wrong.push(format!(
                "{text}: wildcard rule reaches it = {}",
                !by_wildcard
            ));
        }
        if exact.check(address).is_ok() != *by_exact {
            wrong.push(format!("{text}: exact rule reaches it = {}", !by_exact));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn one_refused_address_refuses_the_whole_answer() {
    let exact = AddressPolicy::for_scope(AllowScope::ExactHost);
    let answer: Vec<IpAddr> = ["127.0.0.1", "169.254.169.254"]
        .iter()
        .map(|a| a.parse().expect("ip"))
        .collect();
    let refusal = exact
        .check_all(&answer)
        .expect_err("metadata in the answer");
    assert_eq!(refusal.class, C::LinkLocal);
    assert_eq!(
        refusal.to_string(),
        "169.254.169.254 is link-local (169.254.0.0/16, fe80::/10; holds cloud metadata); never reachable through the broker"
    );
}

#[test]
fn a_refusal_names_the_carried_address_and_what_would_reach_it() {
    let refusal = AddressPolicy::public_only()
        .check("::ffff:10.0.0.1".parse().expect("ip"))
        .expect_err("private");
    assert_eq!(
        refusal.to_string(),
        "::ffff:10.0.0.1 (carrying 10.0.0.1) is private (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16); \
         only a rule naming this host exactly (no wildcard) reaches it"
    );
}
