//! A name whose DNS server never answers one address family (AAAA queries dropped, as some
//! forwarders and firewalls do): the broker does not wait out the resolver's retries of that family
//! on every connection, which made each plain-HTTP request through the egress proxy (four for an
//! http `git push` or `git fetch`) take 15 s. An answer whose families both come is still checked
//! whole.

mod support;

use chock_broker::{BrokerConfig, BrokerError, Door};
use chock_decide::RuleGate;
use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND};
use chock_test_support::installed;
use hickory_resolver::proto::rr::RecordType;
use support::{Dns, Http, new_broker, new_log};

const PASSWORD: &str = "correct-horse-battery-staple";

/// Real git through the proxy to a real smart-HTTP server whose name's AAAA queries are never
/// answered: every request reaches the server, each on a connection of its own, and each
/// connection's lookup asked for the AAAA record once — none waited for the resolver to try it
/// again (it tries three times, 5 s each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_through_the_proxy_does_not_wait_for_a_family_the_dns_never_answers() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let dns = Dns::start().await;
    let server = GitHttpServer::start("alice", PASSWORD);
    let port = server.addr().port();
    dns.set("git.test", &["127.0.0.1"]);
    dns.silent("git.test", RecordType::AAAA);
    let (log, _dir) = new_log();
    let gate = RuleGate::new().allow(&format!("net.connect.test.git.{port}"));
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());
    let proxy = broker
        .serve_proxy(std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy"))
        .expect("serve");

    let home = tempfile::tempdir().expect("home");
    let url = format!("http://alice:{PASSWORD}@git.test:{port}/repo.git");
    let out = tokio::process::Command::new("git")
        .args(["ls-remote", &url])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("http_proxy", format!("http://{}", proxy.local_addr()))
        .output()
        .await
        .expect("git runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = server.served();
    assert!(
        served.iter().any(|s| s.authorized),
        "the request with the password reached the server: {served:?}"
    );
    // The server closes every connection after one request, as the proxy does with a plain
    // request: one connection, and one lookup, per request.
    assert_eq!(
        dns.count("git.test", RecordType::AAAA),
        served.len(),
        "each connection asked for AAAA once: {served:?}"
    );
    assert_eq!(dns.count("git.test", RecordType::A), served.len());
}

/// The other way round: a name the DNS gives only an AAAA record for, whose A queries go
/// unanswered, is reached over IPv6 without waiting for the A record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_a_query_does_not_hold_an_ipv6_connection() {
    let Ok(http) = Http::start_on("[::1]:0").await else {
        eprintln!("skipped: no IPv6 loopback on this machine");
        return;
    };
    let dns = Dns::start().await;
    dns.set("six.test", &["::1"]);
    dns.silent("six.test", RecordType::A);
    let (log, _dir) = new_log();
    let gate = RuleGate::new().allow(&format!("net.connect.test.six.{}", http.port()));
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());
    for _ in 0..2 {
        let connection = broker
            .connect(Door::Proxy, "six.test", http.port())
            .await
            .expect("connected over IPv6");
        assert_eq!(connection.address, http.addr);
    }
    assert_eq!(dns.count("six.test", RecordType::A), 2, "one A query each");
}

/// Both families answering at once are both checked: an answer that mixes an address the rule
/// reaches with one nothing reaches (the cloud metadata address) is refused whole, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_families_both_come_is_checked_whole() {
    let dns = Dns::start().await;
    dns.set("mixed.test", &["127.0.0.1", "fd00:ec2::254"]);
    let (log, _dir) = new_log();
    let broker = new_broker(
        RuleGate::new().allow("net.connect.test.mixed.80"),
        &log,
        &dns,
        BrokerConfig::default(),
    );
    match broker.connect(Door::Proxy, "mixed.test", 80).await {
        Err(BrokerError::AddressRefused { refusal, .. }) => {
            assert_eq!(
                refusal.address,
                "fd00:ec2::254".parse::<std::net::IpAddr>().unwrap()
            );
        }
        other => panic!("not refused: {other:?}"),
    }
}
