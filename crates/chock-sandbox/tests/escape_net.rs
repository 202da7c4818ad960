//! Escape suite, network and sockets: the host's loopback, its unix sockets (abstract and by
//! path), its interfaces. Each test names the layer that must stop the act; see docs/sandbox.md.

mod escape_support;

use std::os::unix::net::UnixListener;

use chock_sandbox::{SocketIndex, StdioMode};
use escape_support::{Backing, Fixture, hostile, run, token};

/// Attack: connect to a TCP listener on the host's 127.0.0.1. Layer: Landlock's TCP connect rule
/// (ABI 4+) answers first with EACCES; behind it the empty network namespace would answer
/// ECONNREFUSED (see `only_the_loopback_interface_is_visible` for that layer).
#[test]
fn a_host_loopback_listener_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let r = hostile(Backing::Overlay, &["connect-tcp", &addr]);
    assert!(
        listener.accept().is_err(),
        "the host listener accepted a connection from the sandbox"
    );
    if escape_support::landlock_has_tcp() {
        r.assert_refused("EACCES", "Landlock TCP connect");
    } else {
        r.assert_refused_any("network namespace");
    }
}

/// Attack: connect to an abstract unix socket the host listens on (abstract sockets belong to the
/// network namespace, not to the filesystem). Layer: the network namespace (the name is looked up
/// in the call's own namespace first: ECONNREFUSED). Landlock's abstract-socket scope (ABI 6+)
/// stands behind it and answers EPERM when the namespace is missing.
#[test]
fn a_host_abstract_unix_socket_is_unreachable() {
    use std::os::linux::net::SocketAddrExt;
    let name = token("abstract");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = hostile(Backing::Overlay, &["connect-abstract", &name]);
    assert!(
        listener.accept().is_err(),
        "the host abstract socket accepted a connection from the sandbox"
    );
    r.assert_refused(
        "ECONNREFUSED",
        "network namespace: the name does not exist in the call's namespace",
    );
}

/// Attack: connect to a host unix socket by its path (an agent socket in the home directory).
/// Layer: the fresh root (the path does not exist inside).
#[test]
fn a_host_unix_socket_path_is_unreachable() {
    let fx = Fixture::new(Backing::Overlay);
    let path = fx.base.join("agent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = run(&fx.hostile_plan(&["connect-unix", &path.to_string_lossy()]));
    assert!(
        listener.accept().is_err(),
        "the host unix socket accepted a connection from the sandbox"
    );
    r.assert_refused("ENOENT", "fresh root without the host's home");
}

/// Attack: a live socket inside the project itself (a dev server's control socket). Through the
/// workspace it is a different inode, never the host's listener. Layer: the workspace mount
/// (overlay or copy).
#[test]
fn a_live_socket_inside_the_project_is_not_the_hosts() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        let path = fx.project.join("dev.sock");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let r = run(&fx.hostile_plan(&["connect-unix", &path.to_string_lossy()]));
        assert!(
            listener.accept().is_err(),
            "the project's live socket reached the host listener ({backing:?})"
        );
        r.assert_refused_any("the workspace is not the real directory");
    }
}

/// Attack: list the network interfaces. Layer: the network namespace (only `lo`; the host has
/// eth0 and more).
#[test]
fn only_the_loopback_interface_is_visible() {
    let r = hostile(Backing::Overlay, &["ifaces"]);
    assert_eq!(
        r.assert_reported().trim(),
        "lo",
        "interfaces visible inside the sandbox"
    );
}

/// Attack: a live host socket inside a directory the project declares as an extra read path (a
/// toolchain or cache directory where some daemon keeps its socket). A read-only bind does not
/// stop connect(2) on a socket, and Landlock (up to ABI 7) does not govern connecting to a named
/// socket, so this is refused only if the sandbox keeps such sockets out. Layer: the filesystem
/// plan: a read directory is shown through an overlay of its own (`read_overlay.rs`), a write
/// path's sockets are masked by an empty file (`socket_mask.rs`).
#[test]
fn a_host_socket_inside_a_declared_read_path_is_unreachable() {
    for write in [false, true] {
        let fx = Fixture::new(Backing::Overlay);
        let shared = fx.base.join("toolchain");
        let nested = shared.join("cache").join("deeper");
        std::fs::create_dir_all(&nested).unwrap();
        let mut listeners = Vec::new();
        for path in [shared.join("daemon.sock"), nested.join("server.sock")] {
            let listener = UnixListener::bind(&path).unwrap();
            listener.set_nonblocking(true).unwrap();
            let mut plan = fx.hostile_plan(&["connect-unix", &path.to_string_lossy()]);
            if write {
                plan.extra_write = vec![shared.clone()];
            } else {
                plan.extra_read = vec![shared.clone()];
            }
            let r = run(&plan);
            let reached = listener.accept().is_ok();
            assert!(
                !reached && !r.stdout.starts_with("succeeded"),
                "the sandbox reached a host socket through a declared path (write {write}): {r:?}"
            );
            // An overlay inode no socket is bound to, or an empty file over the socket: either
            // way nothing listens there.
            r.assert_refused(
                "ECONNREFUSED",
                "the read overlay, or the socket mask over a write path's socket",
            );
            listeners.push(listener);
        }
        // The empty file the masks are bound from is gone from the sandbox's root.
        let mut plan = fx.hostile_plan(&["read", "/.chock-socket-mask"]);
        plan.extra_read = vec![shared.clone()];
        run(&plan).assert_refused("ENOENT", "the mask source is removed");
    }
}

/// Attack: a host daemon binds its socket under a declared read directory *while a call runs*,
/// after the call's tree was built and its command started (the command lists the directory until
/// the socket is there, then connects): in a call of its own, and in a call of a session sandbox
/// built before. Layer: the read directory's overlay (`read_overlay.rs`): what the call sees
/// there are the overlay's own inodes, to which no socket is bound, so `connect` answers
/// ECONNREFUSED. Through a read-only bind (the layer removed) the command reaches the listener.
#[test]
fn a_host_socket_bound_under_a_read_path_while_the_call_runs_is_unreachable() {
    let fx = Fixture::new(Backing::BindCopy);
    let shared = fx.base.join("toolchain");
    let dir = shared.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let index = SocketIndex::new();
    for (i, in_session) in [false, true, true].into_iter().enumerate() {
        let name = format!("daemon-{i}.sock");
        let marker = format!("started-{i}");
        let mut plan = fx.hostile_plan(&[
            "connect-unix-when-listed",
            &fx.project.join(&marker).to_string_lossy(),
            &dir.to_string_lossy(),
            &name,
        ]);
        plan.extra_read = vec![shared.clone()];
        let started = fx.landed(&marker);
        let socket = dir.join(&name);
        let daemon = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !started.exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the call never started"
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let listener = UnixListener::bind(&socket).unwrap();
            listener.set_nonblocking(true).unwrap();
            listener
        });
        let r = if in_session {
            run_in_session(&plan, &index)
        } else {
            run(&plan)
        };
        let listener = daemon.join().expect("the daemon thread");
        assert!(
            listener.accept().is_err() && !r.stdout.starts_with("succeeded"),
            "a socket bound while the call ran was reached (session {in_session}): {r:?}"
        );
        r.assert_refused("ECONNREFUSED", "the read directory's overlay");
    }
    assert!(
        escape_support::in_guest() || index.session_init_pid().is_some(),
        "the last call ran in a session sandbox"
    );
}

/// Attack: list the interfaces, reach a host abstract socket and a host UDP socket, from calls of
/// a session: the first made the per-call way, the next ones by the session sandbox, whose
/// session init stays in the host's network namespace. Layer: each call's own network namespace,
/// made by its setup process beside its init and joined by the init before it gives up its
/// capabilities (`namespaces::NetHandoff`). Without the join a session call sees the host's
/// interfaces and reaches both sockets.
#[test]
fn every_call_of_a_session_has_a_network_namespace_of_its_own() {
    use std::os::linux::net::SocketAddrExt;
    let fx = Fixture::new(Backing::BindCopy);
    let index = SocketIndex::new();
    let name = token("abstract-session");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let udp_addr = udp.local_addr().unwrap().to_string();
    for call in 0..3 {
        let r = run_in_session(&fx.hostile_plan(&["ifaces"]), &index);
        assert_eq!(
            r.assert_reported().trim(),
            "lo",
            "interfaces visible in call {call} of the session"
        );
        let r = run_in_session(&fx.hostile_plan(&["connect-abstract", &name]), &index);
        assert!(
            listener.accept().is_err(),
            "call {call} of the session reached the host's abstract socket"
        );
        r.assert_refused("ECONNREFUSED", "the call's own network namespace");
        run_in_session(&fx.hostile_plan(&["send-udp", &udp_addr]), &index);
        let mut buf = [0u8; 64];
        let got = udp.recv_from(&mut buf);
        assert!(
            got.is_err(),
            "a datagram from call {call} of the session reached the host: {got:?}"
        );
    }
    assert!(
        escape_support::in_guest() || index.session_init_pid().is_some(),
        "the last calls ran in a session sandbox"
    );
}

/// Runs `plan` as one call of a session that keeps `index`, as `run` does for a call without one.
/// In a guest, as every call of the guest is built: the per-call way, by the guest's init (the
/// session sandbox is the host driver's; the attacks stand against the guest's calls as well).
fn run_in_session(plan: &chock_sandbox::Plan, index: &SocketIndex) -> escape_support::Run {
    use std::io::Read;
    if escape_support::in_guest() {
        return escape_support::run(plan);
    }
    let mut child = chock_sandbox::spawn_in_session(plan, StdioMode::Piped, None, index)
        .unwrap_or_else(|e| panic!("the sandbox refused to start the call: {e}"));
    let read = |f: Option<std::fs::File>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut f) = f {
                let _ = f.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let (out, err) = (read(child.take_stdout()), read(child.take_stderr()));
    let outcome = child.wait().expect("waiting for the call");
    escape_support::Run {
        status: outcome.status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        forbidden_call: outcome.forbidden_call.clone(),
        filter_note: outcome.filter_note(),
    }
}

/// Attack: a host daemon binds its socket under a declared read (or write) path *after* the
/// session's socket index was built (between two calls of the session): in the declared
/// directory, and in a directory made after the index was. Layer: for a write path, the session's
/// socket index (inotify watches on every directory of the declared path): the next call masks
/// it; for a read directory, its overlay. Either way `connect` there answers ECONNREFUSED.
/// Without the index's updates the call reaches the host listener through a write path
/// (`succeeded`).
#[test]
fn a_host_socket_made_between_calls_is_unreachable_in_the_next_call() {
    for write in [false, true] {
        let fx = Fixture::new(Backing::Overlay);
        let shared = fx.base.join("toolchain");
        std::fs::create_dir_all(shared.join("cache")).unwrap();
        let index = SocketIndex::new();
        assert!(index.watching(), "no inotify here: {:?}", index.degraded());
        let call = |socket: &std::path::Path| {
            let mut plan = fx.hostile_plan(&["connect-unix", &socket.to_string_lossy()]);
            if write {
                plan.extra_write = vec![shared.clone()];
            } else {
                plan.extra_read = vec![shared.clone()];
            }
            run_in_session(&plan, &index)
        };
        // The first call builds the index; the daemon's socket does not exist yet.
        let daemon = shared.join("cache").join("daemon.sock");
        call(&daemon).assert_refused("ENOENT", "nothing is there yet");
        let made_later = shared.join("new").join("deeper");
        for path in [daemon, made_later.join("server.sock")] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let listener = UnixListener::bind(&path).unwrap();
            listener.set_nonblocking(true).unwrap();
            let r = call(&path);
            assert!(
                listener.accept().is_err() && !r.stdout.starts_with("succeeded"),
                "{} bound after the index was built was reached (write {write}): {r:?}",
                path.display()
            );
            r.assert_refused("ECONNREFUSED", "the index's mask over the new socket");
        }
    }
}

/// Attack: UDP to a socket on the host's loopback (Landlock's network rules cover TCP only).
/// Layer: the network namespace (the datagram leaves into the call's own loopback and is lost).
#[test]
fn a_host_udp_socket_receives_nothing() {
    let host = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = host.local_addr().unwrap().to_string();
    let r = hostile(Backing::Overlay, &["send-udp", &addr]);
    host.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 64];
    let got = host.recv_from(&mut buf);
    assert!(
        got.is_err(),
        "a datagram from the sandbox reached the host: {got:?} ({r:?})"
    );
}

/// Attack: with the broker's proxy plan, reach anything but the proxy: another loopback port, the
/// host's listener, or listen on a port of one's own. Layer: Landlock (TCP connect allowed to the
/// proxy port only, TCP bind refused).
#[test]
fn with_a_proxy_only_the_proxy_port_is_reachable() {
    if !escape_support::landlock_has_tcp() {
        println!("skipped: the proxy plan's port rule needs Landlock ABI 4");
        return;
    }
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_addr = host.local_addr().unwrap().to_string();
    let fx = Fixture::new(Backing::Overlay);
    let mut port = 20000 + u16::try_from(std::process::id() % 20000).unwrap_or(0);
    if host_addr.ends_with(&format!(":{port}")) || host_addr.ends_with(&format!(":{}", port + 1)) {
        port += 2;
    }
    let with_proxy = |args: &[&str]| {
        let mut plan = fx.hostile_plan(args);
        plan.network = chock_sandbox::NetworkPlan::Proxy { port };
        run(&plan)
    };
    let proxy = with_proxy(&["connect-tcp", &format!("127.0.0.1:{port}")]);
    assert!(
        proxy.stdout.starts_with("succeeded"),
        "the proxy port must be reachable: {proxy:?}"
    );
    with_proxy(&["connect-tcp", &format!("127.0.0.1:{}", port + 1)])
        .assert_refused("EACCES", "Landlock TCP connect");
    with_proxy(&["connect-tcp", &host_addr]).assert_refused("EACCES", "Landlock TCP connect");
    with_proxy(&["bind-tcp", "127.0.0.1:0"]).assert_refused("EACCES", "Landlock TCP bind");
    assert!(
        host.accept().is_err(),
        "the host listener accepted a connection from the sandbox"
    );
}
