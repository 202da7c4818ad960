//! Who reaches the daemon. Over the unix socket: another uid is refused (by the directory's mode,
//! and by the peer check when the mode is opened up), `--group` lets one group in, a peer in
//! another user or mount namespace is refused, and a command inside a session reaches neither the
//! socket nor the loopback port. Over loopback HTTP: no token, a foreign `Origin` or a rebinding
//! `Host` is refused; the one-time login link works once; no CORS header is ever sent.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use chock_client::{ClientError, DaemonClient};
use chock_protocol::rpc::{Call, NoParams, Notice, SessionList, SessionState};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One raw HTTP/1.1 request to `addr`; the response's status, head and body.
async fn http(addr: std::net::SocketAddr, request: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn post(host: &str, extra: &[&str], body: &str) -> String {
    let mut req = format!(
        "POST /rpc HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in extra {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

#[test]
fn the_loopback_port_refuses_requests_without_the_token_from_a_foreign_origin_or_host() {
    let world = World::new();
    runtime().block_on(async {
        let server = chock_daemon::serve(world.options(Some("127.0.0.1:0"), 64))
            .await
            .unwrap();
        let info = server.http().unwrap().clone();
        let addr = info.addr;
        let host = addr.to_string();
        let token = std::fs::read_to_string(&info.token_file).unwrap();
        assert_eq!(
            std::fs::metadata(&info.token_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let bearer = format!("Authorization: Bearer {token}");
        let json = "Content-Type: application/json";
        let custom = "X-Chock: 1";
        // The right request works.
        let (status, head, body) = http(addr, &post(&host, &[&bearer, json, custom], LIST_REQUEST)).await;
        assert_eq!(status, 200, "{head}{body}");
        assert!(body.contains("\"sessions\""), "{body}");
        assert!(!head.contains("access-control"), "no CORS header: {head}");
        let refused = |what: &str, (status, head, body): (u16, String, String)| {
            assert_eq!(status, 403, "{what}: {head}{body}");
            assert!(body.contains("\"kind\":\"forbidden\""), "{what}: {body}");
            assert!(!head.contains("access-control"), "{what}: {head}");
            body
        };
        let body = refused("no token", http(addr, &post(&host, &[json, custom], LIST_REQUEST)).await);
        assert!(body.contains("no valid token"), "{body}");
        refused(
            "a wrong token",
            http(addr, &post(&host, &["Authorization: Bearer 00", json, custom], LIST_REQUEST)).await,
        );
        let body = refused(
            "a rebinding Host",
            http(addr, &post(&format!("evil.example:{}", addr.port()), &[&bearer, json, custom], LIST_REQUEST)).await,
        );
        assert!(body.contains("DNS-rebinding"), "{body}");
        refused(
            "localhost is not the bound address",
            http(addr, &post(&format!("localhost:{}", addr.port()), &[&bearer, json, custom], LIST_REQUEST)).await,
        );
        let body = refused(
            "a foreign Origin",
            http(addr, &post(&host, &[&bearer, json, custom, "Origin: http://evil.example"], LIST_REQUEST)).await,
        );
        assert!(body.contains("Origin"), "{body}");
        refused(
            "no custom header",
            http(addr, &post(&host, &[&bearer, json], LIST_REQUEST)).await,
        );
        refused(
            "not a JSON body",
            http(addr, &post(&host, &[&bearer, "Content-Type: text/plain", custom], LIST_REQUEST)).await,
        );
        // The token in a query string is not a token.
        let query = format!(
            "POST /rpc?token={token} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{json}\r\n{custom}\r\nContent-Length: {}\r\n\r\n{LIST_REQUEST}",
            LIST_REQUEST.len()
        );
        refused("a token in the query", http(addr, &query).await);
        // A preflight gets no CORS answer.
        let (_, head, _) = http(
            addr,
            &format!("OPTIONS /rpc HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(!head.contains("access-control"), "{head}");
        // The one-time link's code (in the fragment, never sent by a browser) is traded once for
        // the token by a JSON POST; no cookie is ever set, and a cookie is never a credential
        // (a browser sends 127.0.0.1's cookies to every port of it).
        let code = info.login_link.rsplit_once("#login=").unwrap().1.to_string();
        let once = format!("{{\"once\":\"{code}\"}}");
        let login = |extra: &[&str], body: &str| post(&host, extra, body).replacen("POST /rpc", "POST /login", 1);
        refused("a login without X-Chock", http(addr, &login(&[json], &once)).await);
        refused(
            "a login from a foreign Origin",
            http(addr, &login(&[json, custom, "Origin: http://evil.example"], &once)).await,
        );
        let (status, head, body) = http(addr, &login(&[json, custom], &once)).await;
        assert_eq!(status, 200, "{head}{body}");
        assert!(!head.contains("set-cookie"), "{head}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["token"], token.as_str());
        refused("a login code used twice", http(addr, &login(&[json, custom], &once)).await);
        refused(
            "a login code the daemon never made",
            http(addr, &login(&[json, custom], &once.replace(&code, &"0".repeat(64)))).await,
        );
        let get = |path: &str, host: &str| {
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        };
        let (status, _, _) = http(addr, &get(&format!("/login?once={code}"), &host)).await;
        assert_ne!(status, 200, "no GET trades a code");
        let cookie = format!("Cookie: chock_token={token}");
        refused("the token in a cookie", http(addr, &post(&host, &[&cookie, json, custom], LIST_REQUEST)).await);
        // The UI page itself needs no token but the right Host, and cannot be framed.
        let (status, head, body) = http(addr, &get("/", &host)).await;
        assert_eq!(status, 200);
        assert!(head.contains("x-frame-options: deny") && head.contains("content-security-policy"), "{head}");
        assert!(body.contains("Chock"));
        refused("the UI from a rebinding Host", http(addr, &get("/", "evil.example")).await);
        // The WebSocket: the token is needed, and a foreign Origin is refused.
        let mut ws = DaemonClient::tcp(addr, &token, &host, Some(&format!("http://{host}")))
            .await
            .unwrap();
        let list: SessionList = ws.call(&Call::SessionsList(NoParams {})).await.unwrap();
        assert!(list.sessions.is_empty());
        for (what, token, host, origin) in [
            ("no token", "nope", host.clone(), None),
            ("a foreign Origin", token.as_str(), host.clone(), Some("http://evil.example")),
            ("a rebinding Host", token.as_str(), format!("evil.example:{}", addr.port()), None),
        ] {
            match DaemonClient::tcp(addr, token, &host, origin).await {
                Err(ClientError::Refused(why)) => assert!(why.contains("403"), "{what}: {why}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        server.stop().await;
    });
    assert!(matches!(
        chock_daemon::loopback_addr("0.0.0.0:8080"),
        Err(chock_daemon::DaemonError::NotLoopback { .. })
    ));
    assert!(matches!(
        chock_daemon::loopback_addr("192.168.1.10:8080"),
        Err(chock_daemon::DaemonError::NotLoopback { .. })
    ));
    chock_daemon::loopback_addr("[::1]:8080").unwrap();
}

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg(name)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Opens every directory above `dir` (inside the world) to others, so that only the daemon's own
/// directory and its checks stand in the way.
fn open_path(world: &World, dir: &std::path::Path) {
    let base = world.base.clone();
    let mut at = dir.to_path_buf();
    while at.starts_with(&base) {
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).unwrap();
        if !at.pop() {
            break;
        }
    }
}

#[test]
fn another_uid_is_refused_and_a_group_named_with_group_is_let_in() {
    if !is_root() {
        println!("skipped: switching to another uid needs root (CI runs this as root)");
        return;
    }
    if !user_exists("chockci") {
        println!("skipped: no unprivileged user `chockci` to connect as");
        return;
    }
    let world = World::new();
    let as_chockci = [
        "setpriv",
        "--reuid=chockci",
        "--regid=chockci",
        "--clear-groups",
    ];
    runtime().block_on(async {
        let server = world.serve().await;
        let socket = server.socket().to_path_buf();
        // Our own request passes.
        let (status, out) = curl_list(&["env"], &socket);
        assert_eq!(status, 0, "{out}");
        assert!(out.contains("\"sessions\""), "{out}");
        let dir = socket.parent().unwrap();
        assert_eq!(
            std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
            0o600
        );
        open_path(&world, dir.parent().unwrap());
        // The directory's mode keeps another user out.
        let (status, out) = curl_list(&as_chockci, &socket);
        assert_ne!(status, 0, "{out}");
        assert!(!out.contains("\"sessions\""), "{out}");
        // With the directory and the socket opened up, the peer check refuses it.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (_, out) = curl_list(&as_chockci, &socket);
        assert!(out.contains("\"kind\":\"forbidden\""), "{out}");
        assert!(out.contains("is not this daemon's user"), "{out}");
        assert!(!out.contains("\"sessions\""), "{out}");
        server.stop().await;
        // `--group chockci` lets that group's members in, through a directory they can pass but
        // not list.
        let mut opts = world.options(None, 64);
        opts.group = Some("chockci".into());
        let server = chock_daemon::serve(opts).await.unwrap();
        let socket = server.socket().to_path_buf();
        let meta = std::fs::metadata(socket.parent().unwrap()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o710);
        let (status, out) = curl_list(&as_chockci, &socket);
        assert_eq!(status, 0, "{out}");
        assert!(out.contains("\"sessions\""), "the group is let in: {out}");
        server.stop().await;
    });
}

#[test]
fn a_peer_in_another_user_or_mount_namespace_is_refused() {
    let world = World::new();
    runtime().block_on(async {
        let server = world.serve().await;
        let socket = server.socket().to_path_buf();
        let probe = Command::new("unshare")
            .args(["--user", "--map-current-user", "true"])
            .status();
        if !probe.is_ok_and(|s| s.success()) {
            println!("skipped: this machine cannot make a user namespace");
            server.stop().await;
            return;
        }
        // A user namespace that maps back to this very uid, as a confined call's does.
        let (_, out) = curl_list(&["unshare", "--user", "--map-current-user"], &socket);
        assert!(out.contains("\"kind\":\"forbidden\""), "{out}");
        assert!(out.contains("another user namespace"), "{out}");
        if is_root() {
            let (_, out) = curl_list(&["unshare", "--mount"], &socket);
            assert!(out.contains("another mnt namespace"), "{out}");
        } else {
            println!("skipped the mount namespace: making one needs root");
        }
        server.stop().await;
    });
}

#[test]
fn a_command_inside_a_session_reaches_neither_the_socket_nor_the_port() {
    let world = World::new();
    runtime().block_on(async {
        let server = chock_daemon::serve(world.options(Some("127.0.0.1:0"), 256))
            .await
            .unwrap();
        let socket = server.socket().to_path_buf();
        let port = server.http().unwrap().addr.port();
        let probe = format!(
            "test -e {sock} && echo socket-present || echo socket-absent\n\
             test -e {dir} && echo dir-present || echo dir-absent\n\
             curl -s -m 5 --noproxy '*' --unix-socket {sock} -H 'Content-Type: application/json' -H 'X-Chock: 1' -d '{LIST_REQUEST}' http://localhost/rpc\n\
             echo unix=$?\n\
             curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/\n\
             echo tcp=$?\n\
             (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null\n\
             echo devtcp=$?\n",
            sock = socket.display(),
            dir = socket.parent().unwrap().display(),
        );
        std::fs::write(world.project.join("probe.sh"), probe).unwrap();
        let provider = world.script(
            "probe.toml",
            r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "bash probe.sh" }

[[turn]]
text = "done"
"#,
        );
        let mut client = world.client(&server).await;
        let started = start(&mut client, &world, &provider, "probe").await;
        until(&mut client, |n| match n {
            Notice::SessionState(s) if s.session == started.session && s.state == SessionState::Idle => Some(()),
            _ => None,
        })
        .await;
        let log = world.log_lines(&started.session);
        let result = log
            .iter()
            .find(|l| l["kind"] == "tool.result")
            .expect("the probe ran");
        let output = result["data"]["output"].as_str().unwrap();
        assert!(output.contains("socket-absent"), "{output}");
        assert!(output.contains("dir-absent"), "{output}");
        assert!(output.contains("unix=7"), "curl could not connect to the socket: {output}");
        assert!(output.contains("tcp=7"), "curl could not connect to the port: {output}");
        assert!(output.contains("devtcp=1"), "{output}");
        assert!(!output.contains("\"sessions\""), "{output}");
        server.stop().await;
    });
}
