//! Loopback test servers: a DNS server whose answers the test scripts (and which counts every query),
//! an HTTP server with scripted routes, and a log in a temporary directory. Everything listens on
//! 127.0.0.1 (or ::1) and nothing here ever sends a packet anywhere else.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use chock_broker::{Broker, BrokerConfig, Nameservers};
use chock_decide::Gate;
use chock_log::{Event, Log, SessionHeader};
use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, AAAA};
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

/// A DNS server on 127.0.0.1 answering from a script: each name has a list of stages, and the
/// n-th query of a type for a name gets stage n (the last stage repeats). TTL is 0 so no cache hides
/// a change.
#[derive(Clone)]
pub struct Dns {
    pub addr: SocketAddr,
    zone: Arc<Mutex<HashMap<String, Vec<Vec<IpAddr>>>>>,
    queries: Arc<Mutex<Vec<(String, RecordType)>>>,
    silent: Arc<Mutex<Vec<(String, RecordType)>>>,
}

impl Dns {
    pub async fn start() -> Dns {
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind DNS socket");
        let dns = Dns {
            addr: socket.local_addr().expect("local addr"),
            zone: Arc::default(),
            queries: Arc::default(),
            silent: Arc::default(),
        };
        let server = dns.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                if let Some(reply) = server.answer(&buf[..n]) {
                    let _ = socket.send_to(&reply, peer).await;
                }
            }
        });
        dns
    }

    /// `name` answers `addresses` from now on.
    pub fn set(&self, name: &str, addresses: &[&str]) {
        self.stages(name, &[addresses]);
    }

    /// `name` answers stage 0 to its first query of a type, stage 1 to the second, and so on.
    pub fn stages(&self, name: &str, stages: &[&[&str]]) {
        let stages = stages
            .iter()
            .map(|s| s.iter().map(|a| a.parse().expect("test address")).collect())
            .collect();
        self.zone
            .lock()
            .expect("zone")
            .insert(name.to_owned(), stages);
    }

    /// Queries of `kind` for `name` are counted and never answered (a server that drops AAAA
    /// queries, as some forwarders and firewalls do).
    pub fn silent(&self, name: &str, kind: RecordType) {
        self.silent
            .lock()
            .expect("silent")
            .push((name.to_owned(), kind));
    }

    /// How many queries of `kind` for `name` arrived.
    pub fn count(&self, name: &str, kind: RecordType) -> usize {
        self.queries
            .lock()
            .expect("queries")
            .iter()
            .filter(|(n, k)| n == name && *k == kind)
            .count()
    }

    /// Every name asked about.
    pub fn names_asked(&self) -> Vec<String> {
        self.queries
            .lock()
            .expect("queries")
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn answer(&self, packet: &[u8]) -> Option<Vec<u8>> {
        let request = Message::from_vec(packet).ok()?;
        let query = request.queries().first()?.clone();
        let name = query
            .name()
            .to_ascii()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let kind = query.query_type();
        let seen = {
            let mut queries = self.queries.lock().expect("queries");
            let seen = queries
                .iter()
                .filter(|(n, k)| *n == name && *k == kind)
                .count();
            queries.push((name.clone(), kind));
            seen
        };
        if self
            .silent
            .lock()
            .expect("silent")
            .contains(&(name.clone(), kind))
        {
            return None;
        }
        let mut reply = Message::new();
        reply
            .set_id(request.id())
            .set_message_type(MessageType::Response)
            .set_op_code(request.op_code())
            .set_recursion_desired(request.recursion_desired())
            .set_recursion_available(true)
            .set_authoritative(true)
            .add_query(query.clone());
        let zone = self.zone.lock().expect("zone");
        match zone.get(&name) {
            None => {
                reply.set_response_code(ResponseCode::NXDomain);
            }
            Some(stages) => {
                let stage = &stages[seen.min(stages.len() - 1)];
                for address in stage {
                    let rdata = match (address, kind) {
                        (IpAddr::V4(v4), RecordType::A) => RData::A(A(*v4)),
                        (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(*v6)),
                        _ => continue,
                    };
                    reply.add_answer(Record::from_rdata(query.name().clone(), 0, rdata));
                }
            }
        }
        reply.to_vec().ok()
    }
}

/// One scripted HTTP response.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Never answer (for the time limit).
    pub hang: bool,
}

impl Reply {
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
            hang: false,
        }
    }

    pub fn redirect(to: &str) -> Reply {
        Reply {
            status: 302,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
            hang: false,
        }
    }

    pub fn hang() -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            hang: true,
        }
    }
}

/// An HTTP/1.1 server on loopback answering each path from a table, recording every request head.
#[derive(Clone)]
pub struct Http {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Http {
    pub async fn start() -> Http {
        Self::start_on("127.0.0.1:0")
            .await
            .expect("bind HTTP server")
    }

    pub async fn start_on(bind: &str) -> std::io::Result<Http> {
        let listener = TcpListener::bind(bind).await?;
        let http = Http {
            addr: listener.local_addr()?,
            routes: Arc::default(),
            requests: Arc::default(),
        };
        let server = http.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let server = server.clone();
                tokio::spawn(async move { server.serve(stream).await });
            }
        });
        Ok(http)
    }

    pub fn route(&self, path: &str, reply: Reply) {
        self.routes
            .lock()
            .expect("routes")
            .insert(path.to_owned(), reply);
    }

    pub fn hits(&self) -> usize {
        self.requests.lock().expect("requests").len()
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    async fn serve(&self, mut stream: tokio::net::TcpStream) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        self.requests.lock().expect("requests").push(head);
        let reply = self.routes.lock().expect("routes").get(&path).cloned();
        let reply = reply.unwrap_or(Reply {
            status: 404,
            headers: vec![],
            body: b"no route".to_vec(),
            hang: false,
        });
        if reply.hang {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            return;
        }
        let mut out = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
            reply.status,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let _ = stream.write_all(out.as_bytes()).await;
        let _ = stream.write_all(&reply.body).await;
        let _ = stream.shutdown().await;
    }
}

/// A DNS server answering `site.test` with loopback, and a web server on loopback: the usual pair.
pub async fn site_servers() -> (Dns, Http) {
    let (dns, http) = (Dns::start().await, Http::start().await);
    dns.set("site.test", &["127.0.0.1"]);
    (dns, http)
}

/// A log in a fresh temporary directory (kept alive by the returned guard).
pub fn new_log() -> (Log, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::create(dir.path(), SessionHeader::default()).expect("create log");
    (log, dir)
}

/// A broker resolving through `dns`.
pub fn new_broker(gate: impl Gate + 'static, log: &Log, dns: &Dns, config: BrokerConfig) -> Broker {
    let config = BrokerConfig {
        nameservers: Nameservers::Explicit(vec![dns.addr]),
        ..config
    };
    Broker::new(Arc::new(gate), log.clone(), config).expect("broker")
}

/// A broker resolving through `dns` with the default config and one rule allowing `action`.
pub fn allowing(action: &str, log: &Log, dns: &Dns) -> Broker {
    new_broker(
        chock_decide::RuleGate::new().allow(action),
        log,
        dns,
        BrokerConfig::default(),
    )
}

/// The `net.*` events written so far, as (kind, data).
pub fn net_events(log: &Log) -> Vec<(String, serde_json::Value)> {
    let events: Vec<Event> = chock_log::read_events(log.dir()).expect("read log");
    events
        .into_iter()
        .filter(|e| e.kind.as_str().starts_with("net."))
        .map(|e| (e.kind.as_str().to_owned(), e.data))
        .collect()
}
