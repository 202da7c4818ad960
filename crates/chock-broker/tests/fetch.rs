//! fetch_url against loopback servers and a scripted loopback DNS server. Loopback is reachable only
//! through rules naming the host exactly; every refusal test also checks that nothing was opened.

mod support;

use std::time::Duration;

use chock_broker::{BrokerConfig, BrokerError, FetchLimits};
use chock_decide::RuleGate;
use hickory_resolver::proto::rr::RecordType;
use serde_json::json;
use support::{Dns, Http, Reply, allowing, net_events, new_broker, new_log, site_servers};

#[tokio::test]
async fn an_exact_rule_reaches_a_loopback_page_as_readable_text_and_logs_every_step() {
    let (dns, http) = site_servers().await;
    http.route(
        "/page",
        Reply::ok(
            "text/html",
            "<h1>Hi</h1><script>x()</script><p>body <b>text</b></p>",
        ),
    );
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.site", &log, &dns);

    let url = format!("http://site.test:{}/page", http.port());
    let page = broker.fetch_url(&url).await.expect("allowed fetch");
    assert_eq!(page.status, 200);
    assert_eq!(page.text, "# Hi\n\nbody text");
    assert_eq!(page.final_url, url);

    let events = net_events(&log);
    let kinds: Vec<_> = events
        .iter()
        .map(|(k, d)| {
            format!(
                "{k}/{}",
                d["stage"].as_str().or(d["phase"].as_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "net.decision/gate",
            "net.decision/address",
            "net.connect/open",
            "net.connect/close"
        ]
    );
    assert_eq!(events[0].1["action"], "net.fetch.test.site");
    assert_eq!(events[0].1["decision"], "allow");
    assert_eq!(events[1].1["addresses_checked"], json!(["127.0.0.1"]));
    assert_eq!(
        events[2].1["address_used"],
        format!("127.0.0.1:{}", http.port())
    );
    assert!(events[3].1["bytes_sent"].as_u64().unwrap_or(0) > 0);
    assert!(events[3].1["bytes_received"].as_u64().unwrap_or(0) > 0);
}

#[tokio::test]
async fn a_wildcard_rule_does_not_reach_loopback_and_nothing_is_opened() {
    let (dns, http) = site_servers().await;
    http.route("/", Reply::ok("text/plain", "secret"));
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.*", &log, &dns);

    let err = broker
        .fetch_url(&format!("http://site.test:{}/", http.port()))
        .await
        .expect_err("loopback");
    assert!(matches!(err, BrokerError::AddressRefused { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("only a rule naming this host exactly"),
        "{err}"
    );
    assert_eq!(http.hits(), 0);
    let events = net_events(&log);
    assert_eq!(
        events.last().map(|(_, d)| d["decision"].clone()),
        Some(json!("refuse"))
    );
    assert!(events.iter().all(|(k, _)| k == "net.decision"));
}

#[tokio::test]
async fn a_refused_name_never_reaches_the_resolver() {
    let dns = Dns::start().await;
    dns.set("other.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.site", &log, &dns);
    let err = broker
        .fetch_url("http://other.test/")
        .await
        .expect_err("no rule");
    assert!(matches!(err, BrokerError::Refused { .. }), "{err}");
    assert!(
        dns.names_asked().is_empty(),
        "asked {:?}",
        dns.names_asked()
    );
}

#[tokio::test]
async fn private_metadata_nat64_and_mapped_answers_are_refused_before_connecting() {
    let dns = Dns::start().await;
    let cases: &[(&str, &[&str], &str)] = &[
        ("private.test", &["10.0.0.5"], "net.fetch.test.*"),
        ("meta.test", &["169.254.169.254"], "net.fetch.test.meta"),
        ("meta6.test", &["fd00:ec2::254"], "net.fetch.test.meta6"),
        ("nat64.test", &["64:ff9b::7f00:1"], "net.fetch.test.*"),
        (
            "nat64meta.test",
            &["64:ff9b::a9fe:a9fe"],
            "net.fetch.test.nat64meta",
        ),
        ("mapped.test", &["::ffff:127.0.0.1"], "net.fetch.test.*"),
        (
            "mixed.test",
            &["127.0.0.1", "169.254.169.254"],
            "net.fetch.test.mixed",
        ),
    ];
    for (name, answer, rule) in cases {
        dns.set(name, answer);
        let (log, _dir) = new_log();
        let broker = allowing(rule, &log, &dns);
        let err = broker
            .fetch_url(&format!("http://{name}/"))
            .await
            .expect_err(name);
        assert!(
            matches!(err, BrokerError::AddressRefused { .. }),
            "{name}: {err}"
        );
        assert!(
            net_events(&log).iter().all(|(k, _)| k == "net.decision"),
            "{name} opened something"
        );
    }
}

#[tokio::test]
async fn rebinding_after_a_checked_answer_reaches_nothing_and_the_name_is_looked_up_once_per_fetch()
{
    let (dns, http) = (Dns::start().await, Http::start().await);
    // First answer: the loopback server (allowed by the exact rule). Second: cloud metadata.
    dns.stages("rebind.test", &[&["127.0.0.1"], &["169.254.169.254"]]);
    http.route("/", Reply::ok("text/plain", "first"));
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.rebind", &log, &dns);
    let url = format!("http://rebind.test:{}/", http.port());

    let page = broker
        .fetch_url(&url)
        .await
        .expect("first answer is allowed");
    assert_eq!(page.text, "first");
    assert_eq!(
        dns.count("rebind.test", RecordType::A),
        1,
        "the connection used the checked answer; no second lookup"
    );

    let err = broker
        .fetch_url(&url)
        .await
        .expect_err("rebound to metadata");
    assert!(matches!(err, BrokerError::AddressRefused { .. }), "{err}");
    assert_eq!(http.hits(), 1);
}

#[tokio::test]
async fn an_ipv6_only_name_is_checked_and_pinned_too() {
    let dns = Dns::start().await;
    let Ok(http) = Http::start_on("[::1]:0").await else {
        eprintln!("skipped: this machine has no IPv6 loopback");
        return;
    };
    dns.set("six.test", &["::1"]);
    http.route("/", Reply::ok("text/plain", "over six"));
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.six", &log, &dns);
    let page = broker
        .fetch_url(&format!("http://six.test:{}/", http.port()))
        .await
        .expect("v6 fetch");
    assert_eq!(page.text, "over six");
    let used = net_events(&log)
        .iter()
        .find_map(|(k, d)| (k == "net.connect").then(|| d["address_used"].clone()));
    assert_eq!(used, Some(json!(format!("[::1]:{}", http.port()))));

    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.*", &log, &dns);
    let err = broker
        .fetch_url(&format!("http://six.test:{}/", http.port()))
        .await
        .expect_err("wildcard");
    assert!(matches!(err, BrokerError::AddressRefused { .. }), "{err}");
}

#[tokio::test]
async fn each_redirect_is_decided_and_checked_again() {
    let (dns, http) = site_servers().await;
    dns.set("also.test", &["127.0.0.1"]);
    dns.set("refused.test", &["127.0.0.1"]);
    let port = http.port();
    http.route(
        "/to-also",
        Reply::redirect(&format!("http://also.test:{port}/final")),
    );
    http.route(
        "/to-refused",
        Reply::redirect(&format!("http://refused.test:{port}/final")),
    );
    http.route(
        "/to-wild",
        Reply::redirect(&format!("http://wild.test:{port}/final")),
    );
    http.route("/final", Reply::ok("text/plain", "arrived"));
    http.route("/loop", Reply::redirect("/loop"));
    dns.set("wild.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    let gate = RuleGate::new()
        .allow("net.fetch.test.site")
        .allow("net.fetch.test.also")
        .deny("net.fetch.test.refused")
        .allow("net.fetch.test.*");
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());

    let page = broker
        .fetch_url(&format!("http://site.test:{port}/to-also"))
        .await
        .expect("allowed redirect");
    assert_eq!((page.text.as_str(), page.redirects.len()), ("arrived", 1));

    let err = broker
        .fetch_url(&format!("http://site.test:{port}/to-refused"))
        .await
        .expect_err("denied host");
    assert!(matches!(err, BrokerError::Refused { .. }), "{err}");
    let err = broker
        .fetch_url(&format!("http://site.test:{port}/to-wild"))
        .await
        .expect_err("wildcard host");
    assert!(matches!(err, BrokerError::AddressRefused { .. }), "{err}");
    assert!(!dns.names_asked().contains(&"refused.test".to_owned()));

    let err = broker
        .fetch_url(&format!("http://site.test:{port}/loop"))
        .await
        .expect_err("loop");
    assert!(
        matches!(err, BrokerError::TooManyRedirects { limit: 5, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn size_and_time_limits_hold() {
    let (dns, http) = site_servers().await;
    http.route("/big", Reply::ok("text/plain", vec![b'a'; 5000]));
    http.route("/hang", Reply::hang());
    let (log, _dir) = new_log();
    let limits = FetchLimits {
        max_bytes: 1000,
        timeout: Duration::from_secs(1),
        ..FetchLimits::default()
    };
    let config = BrokerConfig {
        limits,
        ..BrokerConfig::default()
    };
    let broker = new_broker(
        RuleGate::new().allow("net.fetch.test.site"),
        &log,
        &dns,
        config,
    );

    let page = broker
        .fetch_url(&format!("http://site.test:{}/big", http.port()))
        .await
        .expect("big");
    assert!(page.truncated);
    assert_eq!(page.text.len(), 1000);

    let err = broker
        .fetch_url(&format!("http://site.test:{}/hang", http.port()))
        .await
        .expect_err("hang");
    assert!(
        matches!(err, BrokerError::TimedOut { seconds: 1, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn the_page_passes_the_redaction_funnel() {
    let (dns, http) = site_servers().await;
    http.route("/", Reply::ok("text/plain", "token=sk-test-0123456789 end"));
    let (log, _dir) = new_log();
    log.add_secret("sk-test-0123456789").expect("secret");
    let broker = allowing("net.fetch.test.site", &log, &dns);
    let page = broker
        .fetch_url(&format!("http://site.test:{}/", http.port()))
        .await
        .expect("fetch");
    assert_eq!(page.text, format!("token={} end", chock_log::REDACTED));
}

/// A server that echoes a secret into a redirect's `Location` does not get it to the model
/// through `final_url` or `redirects` either.
#[tokio::test]
async fn the_redirect_chain_passes_the_redaction_funnel() {
    let (dns, http) = site_servers().await;
    let port = http.port();
    http.route(
        "/",
        Reply::redirect(&format!("http://site.test:{port}/k?t=sk-test-0123456789")),
    );
    http.route("/k?t=sk-test-0123456789", Reply::ok("text/plain", "landed"));
    let (log, _dir) = new_log();
    log.add_secret("sk-test-0123456789").expect("secret");
    let broker = allowing("net.fetch.test.site", &log, &dns);
    let page = broker
        .fetch_url(&format!("http://site.test:{port}/"))
        .await
        .expect("fetch");
    assert_eq!(page.text, "landed");
    let shown = format!("{} {:?}", page.final_url, page.redirects);
    assert!(!shown.contains("sk-test"), "{shown}");
    assert_eq!(
        page.final_url,
        format!("http://site.test:{port}/k?t={}", chock_log::REDACTED)
    );
}

#[tokio::test]
async fn urls_that_are_not_http_are_refused_before_any_decision() {
    let dns = Dns::start().await;
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.*", &log, &dns);
    for url in [
        "file:///etc/passwd",
        "ftp://site.test/",
        "http://user:pw@site.test/",
        "not a url",
    ] {
        let err = broker.fetch_url(url).await.expect_err(url);
        assert!(matches!(err, BrokerError::BadUrl { .. }), "{url}: {err}");
    }
    assert!(net_events(&log).is_empty());
}

#[tokio::test]
async fn an_address_in_the_url_is_checked_without_asking_dns() {
    let (dns, http) = (Dns::start().await, Http::start().await);
    http.route("/", Reply::ok("text/plain", "by address"));
    let port = http.port();
    let (log, _dir) = new_log();
    let gate = RuleGate::new()
        .allow("net.fetch.1.0.0.127")
        .allow("net.fetch.*");
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());

    let page = broker
        .fetch_url(&format!("http://127.0.0.1:{port}/"))
        .await
        .expect("exact rule");
    assert_eq!(page.text, "by address");
    for url in [
        format!("http://127.0.0.2:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
    ] {
        let err = broker.fetch_url(&url).await.expect_err(&url);
        assert!(
            matches!(err, BrokerError::AddressRefused { .. }),
            "{url}: {err}"
        );
    }
    assert!(
        dns.names_asked().is_empty(),
        "asked {:?}",
        dns.names_asked()
    );
    // Other spellings of an address are read as the address, and decided as it.
    let page = broker
        .fetch_url(&format!("http://2130706433:{port}/"))
        .await
        .expect("decimal spelling");
    assert_eq!(page.final_url, format!("http://127.0.0.1:{port}/"));
    let actions: Vec<_> = net_events(&log)
        .into_iter()
        .filter_map(|(_, d)| d["action"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        actions.last().map(String::as_str),
        Some("net.fetch.1.0.0.127")
    );
    assert_eq!(http.hits(), 2);
}

#[tokio::test]
async fn bodies_that_are_not_text_are_described_not_shown() {
    let (dns, http) = site_servers().await;
    let mut gzipped = Reply::ok("text/html", vec![0x1f, 0x8b, 8, 0, 0xff]);
    gzipped
        .headers
        .push(("Content-Encoding".into(), "gzip".into()));
    http.route("/gz", gzipped);
    http.route("/png", Reply::ok("image/png", vec![0x89, b'P', b'N', b'G']));
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.site", &log, &dns);
    let port = http.port();
    let page = broker
        .fetch_url(&format!("http://site.test:{port}/gz"))
        .await
        .expect("gz");
    assert_eq!(
        page.text,
        "[5 bytes of text/html encoded as gzip, which is not decoded]"
    );
    let page = broker
        .fetch_url(&format!("http://site.test:{port}/png"))
        .await
        .expect("png");
    assert_eq!(page.text, "[4 bytes of image/png, not shown]");
}
