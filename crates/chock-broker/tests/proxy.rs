//! The egress proxy over real loopback sockets: CONNECT allowed and refused, plain HTTP forwarded.

mod support;

use chock_broker::BrokerConfig;
use chock_decide::RuleGate;
use serde_json::json;
use support::{Dns, Reply, net_events, new_broker, new_log, site_servers};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP echo server on loopback; counts connections.
async fn echo_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let port = listener.local_addr().expect("addr").port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, count)
}

fn proxy_listener() -> std::net::TcpListener {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy")
}

/// Sends `request` to the proxy as a new client and reads the whole answer (the proxy closes after
/// a refusal or a plain response).
async fn ask_proxy(proxy: std::net::SocketAddr, request: &str) -> String {
    let mut client = TcpStream::connect(proxy).await.expect("to proxy");
    client.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.expect("read");
    answer
}

async fn read_until_blank_line(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.expect("read") == 0 {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn an_allowed_connect_is_spliced_both_ways_and_counted() {
    let dns = Dns::start().await;
    let (port, connections) = echo_server().await;
    dns.set("echo.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    let gate = RuleGate::new().allow(&format!("net.connect.test.echo.{port}"));
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default()).for_call("call-1");
    let proxy = broker.serve_proxy(proxy_listener()).expect("serve");

    let mut client = TcpStream::connect(proxy.local_addr())
        .await
        .expect("to proxy");
    client
        .write_all(
            format!("CONNECT echo.test:{port} HTTP/1.1\r\nHost: echo.test:{port}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("write");
    let head = read_until_blank_line(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    client.write_all(b"ping").await.expect("write");
    let mut back = [0u8; 4];
    client.read_exact(&mut back).await.expect("echo");
    assert_eq!(&back, b"ping");
    drop(client);
    proxy.shutdown().await;

    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
    let events = net_events(&log);
    let close = events
        .iter()
        .find(|(_, d)| d["phase"] == "close")
        .expect("close event")
        .clone();
    assert_eq!(
        (
            close.1["bytes_sent"].clone(),
            close.1["bytes_received"].clone()
        ),
        (json!(4), json!(4))
    );
    assert_eq!(close.1["door"], "proxy");
    assert_eq!(
        events[0].1["action"],
        format!("net.connect.test.echo.{port}")
    );
}

#[tokio::test]
async fn a_refused_connect_gets_403_and_nothing_is_opened() {
    let dns = Dns::start().await;
    let (port, connections) = echo_server().await;
    dns.set("echo.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    // Wrong port, then a wildcard that may not reach loopback.
    let gate = RuleGate::new()
        .allow("net.connect.test.echo.1")
        .allow("net.connect.test.*");
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());
    let proxy = broker.serve_proxy(proxy_listener()).expect("serve");

    for target in [
        format!("echo.test:{port}"),
        format!("127.0.0.1:{port}"),
        "nowhere.example:443".to_owned(),
    ] {
        let answer = ask_proxy(
            proxy.local_addr(),
            &format!("CONNECT {target} HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{target}: {answer}");
        assert!(answer.contains("refused"), "{answer}");
    }
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(net_events(&log).iter().all(|(k, _)| k == "net.decision"));
    assert!(!dns.names_asked().contains(&"nowhere.example".to_owned()));
}

#[tokio::test]
async fn a_plain_http_request_is_forwarded_in_origin_form() {
    let (dns, http) = site_servers().await;
    http.route("/a?b=1", Reply::ok("text/plain", "through the proxy"));
    let (log, _dir) = new_log();
    let gate = RuleGate::new().allow(&format!("net.connect.test.site.{}", http.port()));
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());
    let proxy = broker.serve_proxy(proxy_listener()).expect("serve");

    let mut client = TcpStream::connect(proxy.local_addr())
        .await
        .expect("to proxy");
    let port = http.port();
    client
        .write_all(format!("GET http://site.test:{port}/a?b=1 HTTP/1.1\r\nHost: site.test:{port}\r\nProxy-Connection: keep-alive\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("through the proxy"), "{answer}");
    let seen = http.requests.lock().expect("requests")[0].clone();
    assert!(seen.starts_with("GET /a?b=1 HTTP/1.1\r\n"), "{seen}");
    assert!(
        !seen.to_ascii_lowercase().contains("proxy-connection"),
        "{seen}"
    );

    // A plain request to a host the table does not name is refused.
    let answer = ask_proxy(
        proxy.local_addr(),
        "GET http://site.test:1/ HTTP/1.1\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert_eq!(http.hits(), 1);
}

#[tokio::test]
async fn garbage_gets_400() {
    let dns = Dns::start().await;
    let (log, _dir) = new_log();
    let broker = new_broker(RuleGate::new(), &log, &dns, BrokerConfig::default());
    let proxy = broker.serve_proxy(proxy_listener()).expect("serve");
    let answer = ask_proxy(proxy.local_addr(), "GET /relative HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // A host no action name can carry.
    let answer = ask_proxy(proxy.local_addr(), "CONNECT bad!host:443 HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

/// The proxy tests that count threads run one at a time (the test harness runs tests at once).
static ONE_PROXY_TEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A proxy stopped from a thread outside any runtime (a service's owner) is served on the
/// runtime whose handle it was given, and its close record is written before `stop` returns.
#[test]
fn a_call_proxy_serves_on_the_given_runtime_until_stopped() {
    let _one = ONE_PROXY_TEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let egress = serve_one_connection_and_stop(runtime.handle());
    assert_eq!(egress, 0, "threads of a runtime of the proxy's own");
}

/// On the caller's multi-thread runtime (the agent's: a call runs on its blocking pool), the
/// proxy is served on that runtime: no runtime of its own, no `chock-egress` thread.
#[test]
fn a_call_proxy_in_a_runtime_serves_on_it() {
    let _one = ONE_PROXY_TEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let egress = runtime
        .block_on(async {
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || serve_one_connection_and_stop(&handle)).await
        })
        .expect("the call's thread");
    assert_eq!(egress, 0, "threads of a runtime of the proxy's own");
}

/// Serves one CONNECT through a `CallProxy`, stops it, and checks the log; returns how many
/// `chock-egress` threads ran while it served.
fn serve_one_connection_and_stop(runtime: &tokio::runtime::Handle) -> usize {
    use std::io::{Read, Write};
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = upstream.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = upstream.accept() {
            let mut buf = [0u8; 5];
            if stream.read_exact(&mut buf).is_ok() {
                let _ = stream.write_all(&buf);
            }
        }
    });
    let (log, _dir) = new_log();
    let gate = std::sync::Arc::new(RuleGate::new().allow(&format!("net.connect.1.0.0.127.{port}")));
    let listener = proxy_listener();
    let proxy_addr = listener.local_addr().expect("addr");
    let proxy = chock_broker::CallProxy::start(
        runtime,
        gate,
        log.clone(),
        BrokerConfig::default(),
        "call-7",
        listener,
    )
    .expect("start");

    let mut client = std::net::TcpStream::connect(proxy_addr).expect("to proxy");
    client
        .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .expect("write");
    let mut head = [0u8; 39];
    client.read_exact(&mut head).expect("head");
    assert_eq!(&head[..], b"HTTP/1.1 200 Connection established\r\n\r\n");
    client.write_all(b"hello").expect("write");
    let mut back = [0u8; 5];
    client.read_exact(&mut back).expect("echo");
    assert_eq!(&back, b"hello");
    drop(client);
    let egress = egress_threads();
    proxy.stop();

    assert!(
        std::net::TcpStream::connect(proxy_addr).is_err(),
        "the listener is closed after stop"
    );
    let events: Vec<_> = chock_log::read_events(log.dir())
        .expect("read")
        .into_iter()
        .filter(|e| e.kind.as_str().starts_with("net."))
        .collect();
    assert!(
        events
            .iter()
            .all(|e| e.call_id.as_deref() == Some("call-7"))
    );
    assert_eq!(
        events.last().map(|e| e.data["phase"].clone()),
        Some(json!("close"))
    );
    egress
}

/// The threads of this process named `chock-egress`.
fn egress_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "chock-egress")
        .count()
}

#[test]
fn the_proxy_environment_names_both_spellings() {
    let env = chock_broker::proxy_env(3128);
    let names: Vec<_> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
    );
    assert!(env.iter().all(|(_, v)| v == "http://127.0.0.1:3128"));
}

/// A CONNECT target that spells 127.0.0.1 the legacy ways (decimal, hex, octal, short) is read as
/// that address, as a URL's host would be: decided at `net.connect.1.0.0.127.<port>`, checked as
/// loopback, never sent to DNS as a name. An IPv6 zone id is no host at all.
#[tokio::test]
async fn legacy_ipv4_spellings_in_a_connect_are_decided_as_the_address() {
    let dns = Dns::start().await;
    let (port, connections) = echo_server().await;
    let (log, _dir) = new_log();
    let gate = RuleGate::new().allow(&format!("net.connect.1.0.0.127.{port}"));
    let broker = new_broker(gate, &log, &dns, BrokerConfig::default());
    let proxy = broker.serve_proxy(proxy_listener()).expect("serve");

    let spellings = ["2130706433", "0x7f.1", "0177.0.0.1", "127.1", "127.0.0.1."];
    for host in spellings {
        let mut client = TcpStream::connect(proxy.local_addr())
            .await
            .expect("to proxy");
        client
            .write_all(format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let head = read_until_blank_line(&mut client).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{host}: {head}");
        client.write_all(b"ping").await.expect("write");
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.expect("echo");
        assert_eq!(&back, b"ping", "{host}");
    }
    for host in ["[fe80::1%eth0]", "[fe80::1%25eth0]"] {
        let request = format!("CONNECT {host}:{port} HTTP/1.1\r\n\r\n");
        let answer = ask_proxy(proxy.local_addr(), &request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{host}: {answer}");
    }
    proxy.shutdown().await;

    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        spellings.len()
    );
    assert!(dns.names_asked().is_empty(), "{:?}", dns.names_asked());
    let gates: Vec<_> = net_events(&log)
        .into_iter()
        .filter(|(_, d)| d["stage"] == "gate")
        .map(|(_, d)| (d["action"].clone(), d["host"].clone()))
        .collect();
    assert_eq!(gates.len(), spellings.len());
    let expected = (
        json!(format!("net.connect.1.0.0.127.{port}")),
        json!("127.0.0.1"),
    );
    assert!(gates.iter().all(|g| *g == expected), "{gates:?}");
}
