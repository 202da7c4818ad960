//! TLS over the pinned stream verifies the host name the URL names, not the address connected to.
//! A test CA (made here) is trusted through `BrokerConfig::extra_roots`; the server is on loopback.

mod support;

use std::sync::Arc;

use chock_broker::{BrokerConfig, BrokerError};
use chock_decide::RuleGate;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use support::{Dns, allowing, new_broker, new_log};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A CA and a server certificate for `name` signed by it.
fn ca_and_server(
    name: &str,
) -> (
    CertificateDer<'static>,
    CertificateDer<'static>,
    PrivateKeyDer<'static>,
) {
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = KeyPair::generate().expect("server key");
    let server = CertificateParams::new(vec![name.to_owned()])
        .expect("server params")
        .signed_by(&key, &ca, &ca_key)
        .expect("server cert");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (ca.der().clone(), server.der().clone(), key)
}

/// An HTTPS server on loopback answering every request with `body`.
async fn https_server(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    body: &'static str,
) -> u16 {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

#[tokio::test]
async fn https_verifies_the_name_the_url_names() {
    let (ca, cert, key) = ca_and_server("tls.test");
    let port = https_server(cert, key, "secure hello").await;
    let dns = Dns::start().await;
    dns.set("tls.test", &["127.0.0.1"]);
    dns.set("impostor.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    let config = BrokerConfig {
        extra_roots: vec![ca],
        ..BrokerConfig::default()
    };
    let gate = RuleGate::new()
        .allow("net.fetch.test.tls")
        .allow("net.fetch.test.impostor");
    let broker = new_broker(gate, &log, &dns, config);

    let page = broker
        .fetch_url(&format!("https://tls.test:{port}/"))
        .await
        .expect("https fetch");
    assert_eq!(page.text, "secure hello");

    // Same address, same server, but the URL names another host: the certificate does not match.
    let err = broker
        .fetch_url(&format!("https://impostor.test:{port}/"))
        .await
        .expect_err("wrong name");
    assert!(
        matches!(err, BrokerError::Tls { ref host, .. } if host == "impostor.test"),
        "{err}"
    );
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let (_ca, cert, key) = ca_and_server("tls.test");
    let port = https_server(cert, key, "never read").await;
    let dns = Dns::start().await;
    dns.set("tls.test", &["127.0.0.1"]);
    let (log, _dir) = new_log();
    let broker = allowing("net.fetch.test.tls", &log, &dns);
    let err = broker
        .fetch_url(&format!("https://tls.test:{port}/"))
        .await
        .expect_err("unknown CA");
    assert!(matches!(err, BrokerError::Tls { .. }), "{err}");
}
