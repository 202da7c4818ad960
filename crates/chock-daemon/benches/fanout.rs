//! Load: 50 sessions at once on the offline player, 10 clients subscribed to every one of them over
//! the real unix socket, and one client that subscribes to all and reads nothing.
//!
//! Prints the log events written per second, the frames delivered per second, the fan-out latency
//! of live log events (from the line's own `ts` to the client reading it: median and p99), whether
//! the slow client was told and dropped, and the daemon's peak resident memory. Never fails.
//! `cargo bench -p chock-daemon --bench fanout`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use chock_client::{ClientError, DaemonClient};
use chock_daemon::{DaemonOptions, ServeOptions, serve};
use chock_protocol::rpc::{
    Call, Notice, ServerFrame, SessionState, StartParams, Started, SubscribeParams,
};

const SESSIONS: usize = 50;
const CLIENTS: usize = 10;

const SCRIPT: &str = r#"
[[turn]]
text = "Writing the first note."
[[turn.call]]
tool = "write_file"
input = { path = "a.md", content = "one\ntwo\nthree\n" }

[[turn]]
text = "Reading it back."
[[turn.call]]
tool = "read_file"
input = { path = "a.md" }

[[turn]]
text = "Writing the second note."
[[turn.call]]
tool = "write_file"
input = { path = "b.md", content = "four\nfive\n" }

[[turn]]
text = "Done: two notes written and one read back."
"#;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn now_ns() -> i128 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos()
}

fn ts_ns(ts: &str) -> Option<i128> {
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

#[derive(Default)]
struct Seen {
    frames: u64,
    events: u64,
    latencies_us: Vec<u64>,
    idle: HashSet<String>,
}

/// One fast client: subscribes to each session it is told of, reads everything, and notes the
/// latency of each log event written after its subscription joined the live stream.
async fn fast(
    mut client: DaemonClient,
    mut ids: tokio::sync::mpsc::UnboundedReceiver<String>,
    done: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    let mut seen = Seen::default();
    let mut heads: HashMap<String, u64> = HashMap::new();
    let mut pending: HashMap<chock_protocol::rpc::RequestId, String> = HashMap::new();
    loop {
        if *done.borrow() && seen.idle.len() == SESSIONS {
            return seen;
        }
        tokio::select! {
            Some(id) = ids.recv() => {
                let req = client
                    .send(&Call::SessionsSubscribe(SubscribeParams { session: id.clone(), from_seq: None }))
                    .await
                    .unwrap();
                pending.insert(req, id);
            }
            frame = client.frame() => {
                let Ok(frame) = frame else { return seen };
                seen.frames += 1;
                match frame {
                    ServerFrame::Response(r) => {
                        if let Some(id) = r.id.as_ref().and_then(|i| pending.remove(i))
                            && let Ok(s) = r.into_result::<chock_protocol::rpc::Subscribed>()
                        {
                            heads.insert(id, s.head_seq);
                        }
                    }
                    ServerFrame::Notification(n) => match n.notice() {
                        Ok(Notice::SessionEvent(e)) => {
                            seen.events += 1;
                            let live = heads.get(&e.session).is_some_and(|h| e.event.seq > *h);
                            if live && let Some(at) = ts_ns(&e.event.ts) {
                                let us = (now_ns() - at).max(0) / 1000;
                                seen.latencies_us.push(u64::try_from(us).unwrap_or(0));
                            }
                        }
                        Ok(Notice::SessionState(s)) if s.state == SessionState::Idle => {
                            seen.idle.insert(s.session);
                        }
                        _ => {}
                    },
                }
            }
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// The value at `per_mille`/1000 of the sorted list (nearest rank).
fn percentile(sorted: &[u64], per_mille: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (per_mille * (sorted.len() - 1) + 500) / 1000;
    sorted[rank.min(sorted.len() - 1)]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    for args in [
        vec!["init", "-q", "-b", "main"],
        vec!["add", "-A"],
        vec!["commit", "-qm", "init"],
    ] {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=b", "-c", "user.email=b@b"])
            .args(&args)
            .current_dir(&project)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    let script = base.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let config = base.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let opts = ServeOptions {
        daemon: DaemonOptions {
            sessions_root: base.join("state/chock/sessions"),
            state_dir: base.join("state/chock"),
            config: Some(config),
            queue: chock_daemon::DEFAULT_QUEUE,
            max_turns: 20,
        },
        runtime_dir: base.join("runtime/chock"),
        group: None,
        host: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = serve(opts).await.unwrap();
        let socket = server.socket().to_path_buf();
        let rss_before = rss_kib();
        let (stop_sampling, sampling) = tokio::sync::watch::channel(false);
        let sampler = tokio::spawn(async move {
            let mut peak = 0;
            while !*sampling.borrow() {
                peak = peak.max(rss_kib());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        });
        let (all_started, done) = tokio::sync::watch::channel(false);
        let mut feeds = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            feeds.push(tx);
            let client = DaemonClient::unix(&socket).await.unwrap();
            clients.push(tokio::spawn(fast(client, rx, done.clone())));
        }
        let mut slow = DaemonClient::unix(&socket).await.unwrap();
        let mut control = DaemonClient::unix(&socket).await.unwrap();
        let began = Instant::now();
        let mut ids = Vec::new();
        for i in 0..SESSIONS {
            let started: Started = control
                .call(&Call::SessionsStart(StartParams {
                    task: format!("task {i}"),
                    project: project.display().to_string(),
                    provider: Some(format!("script:{}", script.display())),
                    model: None,
                    subscribe: false,
                }))
                .await
                .unwrap();
            for feed in &feeds {
                let _ = feed.send(started.session.clone());
            }
            slow.send(&Call::SessionsSubscribe(SubscribeParams {
                session: started.session.clone(),
                from_seq: None,
            }))
            .await
            .unwrap();
            ids.push(started.session);
        }
        let _ = all_started.send(true);
        let mut seen = Vec::new();
        for client in clients {
            seen.push(client.await.unwrap());
        }
        let elapsed = began.elapsed();
        // The slow client reads now: what it was sent before it was dropped, then the notice.
        let mut slow_frames = 0u64;
        let dropped = loop {
            match tokio::time::timeout(Duration::from_secs(20), slow.next_notice()).await {
                Ok(Ok(_)) => slow_frames += 1,
                Ok(Err(ClientError::Dropped(reason))) => break Some(reason),
                Ok(Err(_)) | Err(_) => break None,
            }
        };
        let _ = stop_sampling.send(true);
        let peak = sampler.await.unwrap();
        let lines: usize = ids
            .iter()
            .map(|id| {
                std::fs::read_to_string(base.join("state/chock/sessions").join(id).join("log.jsonl"))
                    .map(|t| t.lines().count())
                    .unwrap_or(0)
            })
            .sum();
        let mut latencies: Vec<u64> = seen.iter().flat_map(|s| s.latencies_us.clone()).collect();
        latencies.sort_unstable();
        let frames: u64 = seen.iter().map(|s| s.frames).sum();
        let events: u64 = seen.iter().map(|s| s.events).sum();
        let secs = elapsed.as_secs_f64();
        println!("fanout: {SESSIONS} sessions on the offline player, {CLIENTS} clients subscribed to all, 1 client reading nothing");
        println!("  wall time                {secs:.2} s (first start to every session idle, seen by every client)");
        println!("  log events written       {lines} ({:.0}/s)", lines as f64 / secs);
        println!(
            "  log events delivered     {events} to {CLIENTS} clients ({:.0}/s); every client got every event: {}",
            events as f64 / secs,
            events == (lines * CLIENTS) as u64
        );
        println!("  frames delivered         {frames} ({:.0}/s), live items and notices included", frames as f64 / secs);
        println!(
            "  fan-out latency (live)   median {} µs, p99 {} µs, max {} µs over {} events (line written to client read)",
            percentile(&latencies, 500),
            percentile(&latencies, 990),
            latencies.last().copied().unwrap_or(0),
            latencies.len()
        );
        println!(
            "  slow client              {} after {slow_frames} frames (queue bound {} frames)",
            match dropped {
                Some(reason) => format!("told and dropped ({reason:?})"),
                None => "not dropped".to_string(),
            },
            chock_daemon::DEFAULT_QUEUE
        );
        println!(
            "  daemon memory            {} MiB before, peak {} MiB (this process: daemon, sessions and clients)",
            rss_before / 1024,
            peak / 1024
        );
        server.stop().await;
    });
}
