//! web_search against loopback backends speaking SearXNG's and Brave's JSON.

mod support;

use chock_broker::{BrokerConfig, BrokerError, SearchConfig, SearchHit};
use chock_decide::RuleGate;
use support::{Dns, Http, Reply, net_events, new_broker, new_log};

const SEARXNG: &str = r#"{"query":"rust sandbox","results":[
  {"title":"Landlock &amp; Rust","url":"https://example.org/landlock","content":"Unprivileged <b>sandboxing</b>."},
  {"title":"no url here"},
  {"title":"Second","url":"https://example.org/2","content":"two"},
  {"title":"Third","url":"https://example.org/3","content":"three"}]}"#;

#[tokio::test]
async fn searxng_results_come_back_cleaned_and_both_decisions_are_logged() {
    let (dns, http) = (Dns::start().await, Http::start().await);
    dns.set("search.test", &["127.0.0.1"]);
    http.route(
        "/search?q=rust+sandbox&format=json",
        Reply::ok("application/json", SEARXNG),
    );
    let (log, _dir) = new_log();
    let search = SearchConfig::Searxng {
        url: format!("http://search.test:{}/", http.port()),
    };
    let config = BrokerConfig {
        search: Some(search),
        ..BrokerConfig::default()
    };
    let gate = RuleGate::new()
        .allow("web.search")
        .allow("net.fetch.test.search");
    let broker = new_broker(gate, &log, &dns, config);

    let results = broker.web_search("rust sandbox", 2).await.expect("search");
    assert_eq!(
        results.hits,
        vec![
            SearchHit {
                title: "Landlock & Rust".into(),
                url: "https://example.org/landlock".into(),
                snippet: "Unprivileged sandboxing.".into()
            },
            SearchHit {
                title: "Second".into(),
                url: "https://example.org/2".into(),
                snippet: "two".into()
            },
        ]
    );
    let actions: Vec<_> = net_events(&log)
        .into_iter()
        .filter_map(|(_, d)| d["action"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(actions, ["web.search", "net.fetch.test.search"]);
}

#[tokio::test]
async fn a_refused_search_sends_nothing_and_the_backend_host_is_decided_too() {
    let (dns, http) = (Dns::start().await, Http::start().await);
    dns.set("search.test", &["127.0.0.1"]);
    let search = SearchConfig::Searxng {
        url: format!("http://search.test:{}", http.port()),
    };
    let config = BrokerConfig {
        search: Some(search),
        ..BrokerConfig::default()
    };

    let (log, _dir) = new_log();
    let broker = new_broker(
        RuleGate::new().allow("net.fetch.test.search"),
        &log,
        &dns,
        config.clone(),
    );
    let err = broker
        .web_search("anything", 5)
        .await
        .expect_err("web.search not allowed");
    assert!(
        matches!(err, BrokerError::Refused { ref action, .. } if action == "web.search"),
        "{err}"
    );

    let broker = new_broker(
        RuleGate::new()
            .allow("web.search")
            .allow("net.fetch.test.*"),
        &log,
        &dns,
        config,
    );
    let err = broker
        .web_search("anything", 5)
        .await
        .expect_err("backend on loopback via wildcard");
    assert!(matches!(err, BrokerError::AddressRefused { .. }), "{err}");
    assert_eq!(http.hits(), 0);
    assert!(dns.names_asked().iter().all(|n| n == "search.test"));
}

#[tokio::test]
async fn brave_sends_its_key_in_a_header_and_reads_web_results() {
    let (dns, http) = (Dns::start().await, Http::start().await);
    dns.set("brave.test", &["127.0.0.1"]);
    let body = r#"{"web":{"results":[{"title":"A <strong>hit</strong>","url":"https://example.org/a","description":"The <strong>answer</strong>"}]}}"#;
    http.route(
        "/res/v1/web/search?q=answer",
        Reply::ok("application/json", body),
    );
    // PATH is set wherever tests run; it stands in for a key variable.
    let search = SearchConfig::Brave {
        url: format!("http://brave.test:{}/res/v1/web/search", http.port()),
        api_key_env: "PATH".into(),
    };
    let config = BrokerConfig {
        search: Some(search),
        ..BrokerConfig::default()
    };
    let (log, _dir) = new_log();
    let broker = new_broker(
        RuleGate::new()
            .allow("web.search")
            .allow("net.fetch.test.brave"),
        &log,
        &dns,
        config,
    );

    let results = broker.web_search("answer", 10).await.expect("search");
    assert_eq!(
        results.hits,
        vec![SearchHit {
            title: "A hit".into(),
            url: "https://example.org/a".into(),
            snippet: "The answer".into()
        }]
    );
    let key = std::env::var("PATH").expect("PATH");
    let request = http.requests.lock().expect("requests")[0].to_ascii_lowercase();
    assert!(
        request.contains(&format!(
            "x-subscription-token: {}",
            key.to_ascii_lowercase()
        )),
        "{request}"
    );
}

#[tokio::test]
async fn a_missing_key_is_named() {
    let dns = Dns::start().await;
    let search = SearchConfig::Brave {
        url: "http://brave.test/".into(),
        api_key_env: "CHOCK_TEST_NO_SUCH_KEY".into(),
    };
    let config = BrokerConfig {
        search: Some(search),
        ..BrokerConfig::default()
    };
    let (log, _dir) = new_log();
    let broker = new_broker(RuleGate::new().allow("web.search"), &log, &dns, config);
    let err = broker.web_search("q", 1).await.expect_err("no key");
    assert_eq!(
        err.to_string(),
        "search backend brave needs an API key in $CHOCK_TEST_NO_SUCH_KEY, which is not set"
    );
}

#[test]
fn search_config_reads_from_toml() {
    let searx: SearchConfig =
        toml::from_str("backend = \"searxng\"\nurl = \"https://searx.example.org\"")
            .expect("searxng");
    assert_eq!(
        searx,
        SearchConfig::Searxng {
            url: "https://searx.example.org".into()
        }
    );
    let brave: SearchConfig =
        toml::from_str("backend = \"brave\"\napi_key_env = \"BRAVE_KEY\"").expect("brave");
    assert_eq!(
        brave,
        SearchConfig::Brave {
            url: "https://api.search.brave.com/res/v1/web/search".into(),
            api_key_env: "BRAVE_KEY".into()
        }
    );
    assert!(toml::from_str::<SearchConfig>("backend = \"bing\"").is_err());
}

#[tokio::test]
async fn the_key_does_not_follow_a_redirect_to_another_host() {
    let (dns, http) = (Dns::start().await, Http::start().await);
    dns.set("brave.test", &["127.0.0.1"]);
    dns.set("elsewhere.test", &["127.0.0.1"]);
    let port = http.port();
    http.route(
        "/s?q=moved",
        Reply::redirect(&format!("http://elsewhere.test:{port}/landing")),
    );
    http.route(
        "/landing",
        Reply::ok("application/json", r#"{"web":{"results":[]}}"#),
    );
    let search = SearchConfig::Brave {
        url: format!("http://brave.test:{port}/s"),
        api_key_env: "PATH".into(),
    };
    let config = BrokerConfig {
        search: Some(search),
        ..BrokerConfig::default()
    };
    let (log, _dir) = new_log();
    let gate = RuleGate::new()
        .allow("web.search")
        .allow("net.fetch.test.brave")
        .allow("net.fetch.test.elsewhere");
    let broker = new_broker(gate, &log, &dns, config);
    let results = broker.web_search("moved", 3).await.expect("search");
    assert!(results.hits.is_empty());
    let requests = http.requests.lock().expect("requests").clone();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains("x-subscription-token")
    );
    assert!(
        !requests[1]
            .to_ascii_lowercase()
            .contains("x-subscription-token"),
        "{}",
        requests[1]
    );
}

#[test]
fn search_config_from_loose_parts() {
    assert_eq!(
        SearchConfig::from_parts("searxng", Some("https://s.example.org"), None).expect("searxng"),
        SearchConfig::Searxng {
            url: "https://s.example.org".into()
        }
    );
    assert_eq!(
        SearchConfig::from_parts("brave", None, Some("K")).expect("brave"),
        SearchConfig::Brave {
            url: "https://api.search.brave.com/res/v1/web/search".into(),
            api_key_env: "K".into()
        }
    );
    let missing = SearchConfig::from_parts("searxng", None, None)
        .expect_err("no url")
        .to_string();
    assert!(missing.contains("`url` is required"), "{missing}");
    let unknown = SearchConfig::from_parts("bing", None, None)
        .expect_err("unknown")
        .to_string();
    assert!(unknown.contains("unknown backend `bing`"), "{unknown}");
    let aliased: SearchConfig =
        toml::from_str("backend = \"brave\"\nkey_env = \"K\"").expect("alias");
    assert!(matches!(aliased, SearchConfig::Brave { ref api_key_env, .. } if api_key_env == "K"));
}
