//! Idle cost: one daemon holding 100 idle sessions and 10 working ones, with one client
//! subscribed to every session (as a browser or `chock attach` would be), over the real unix
//! socket, on the offline player.
//!
//! Prints the daemon's resident memory per idle session, its threads, and the CPU time this
//! process (the daemon and its one client) uses over 5 s while the 10 working sessions wait on a
//! command and the 100 others are idle, then over 5 s while all 110 are idle: an owned session
//! is followed through its handle, so nothing is polled and the last should be about zero. Never
//! fails. `cargo bench -p chock-daemon --bench idle`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_daemon::{DaemonOptions, ServeOptions, serve};
use chock_protocol::rpc::{Call, Notice, SessionState, StartParams, Started, SubscribeParams};

const IDLE: usize = 100;
const WORKING: usize = 10;
const WINDOW: Duration = Duration::from_secs(5);

const QUICK: &str = "[[turn]]\ntext = \"Nothing to do.\"\n";

const SLOW: &str = r#"
[[turn]]
text = "Waiting on a slow command."
[[turn.call]]
tool = "run_command"
input = { command = "sleep 9", timeout_secs = 60 }

[[turn]]
text = "Done waiting."
"#;

/// A field of /proc/self/status, in its unit (kB for memory).
fn status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This process's threads by name, most common first.
fn thread_names() -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        *counts.entry(name.trim().to_string()).or_default() += 1;
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
        .iter()
        .take(4)
        .map(|(name, n)| format!("{n} {name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// User and system CPU time this process has used.
fn cpu() -> Duration {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

/// The client subscribed to every session: subscribes to each id it is sent and reads every
/// frame as it comes, counting them.
async fn watch(
    mut client: DaemonClient,
    mut ids: tokio::sync::mpsc::UnboundedReceiver<String>,
    frames: Arc<AtomicU64>,
) {
    loop {
        tokio::select! {
            Some(id) = ids.recv() => {
                let subscribe = Call::SessionsSubscribe(SubscribeParams { session: id, from_seq: None });
                if client.send(&subscribe).await.is_err() {
                    return;
                }
            }
            frame = client.frame() => {
                if frame.is_err() {
                    return;
                }
                frames.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Reads `client`'s notifications until every session of `ids` has been seen `state`.
async fn until_all(client: &mut DaemonClient, ids: &HashSet<String>, state: SessionState) {
    let mut seen = HashSet::new();
    while !ids.is_subset(&seen) {
        let n = tokio::time::timeout(Duration::from_secs(300), client.next_notice())
            .await
            .expect("the sessions reach their state within 5 minutes")
            .unwrap();
        if let Ok(Notice::SessionState(s)) = n.notice()
            && s.state == state
        {
            seen.insert(s.session);
        }
    }
}

fn git(project: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .current_dir(project)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-qm", "init"]);
    let quick = base.join("quick.toml");
    std::fs::write(&quick, QUICK).unwrap();
    let slow = base.join("slow.toml");
    std::fs::write(&slow, SLOW).unwrap();
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
        let mut control = DaemonClient::unix(server.socket()).await.unwrap();
        let frames = Arc::new(AtomicU64::new(0));
        let (subscribe, ids) = tokio::sync::mpsc::unbounded_channel();
        let watcher = DaemonClient::unix(server.socket()).await.unwrap();
        tokio::spawn(watch(watcher, ids, Arc::clone(&frames)));
        let count = || frames.load(Ordering::Relaxed);
        let start = |script: &std::path::Path, i: usize| {
            Call::SessionsStart(StartParams {
                task: format!("task {i}"),
                project: project.display().to_string(),
                provider: Some(format!("script:{}", script.display())),
                model: None,
                subscribe: false,
            })
        };
        let rss_empty = status("VmRSS:");
        let threads_empty = status("Threads:");
        let began = Instant::now();
        let mut idle = HashSet::new();
        for i in 0..IDLE {
            let started: Started = control.call(&start(&quick, i)).await.unwrap();
            subscribe.send(started.session.clone()).unwrap();
            idle.insert(started.session);
        }
        until_all(&mut control, &idle, SessionState::Idle).await;
        let startup = began.elapsed();
        // Let the log's grouped lines be synced and the allocator settle.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss_idle = status("VmRSS:");
        let threads_idle = status("Threads:");
        let names_idle = thread_names();
        let mut working = HashSet::new();
        for i in 0..WORKING {
            let started: Started = control.call(&start(&slow, i)).await.unwrap();
            subscribe.send(started.session.clone()).unwrap();
            working.insert(started.session);
        }
        // Their commands start; then they wait on them.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let threads_working = status("Threads:");
        let (cpu_before, frames_before) = (cpu(), count());
        tokio::time::sleep(WINDOW).await;
        let cpu_waiting = cpu() - cpu_before;
        let frames_waiting = count() - frames_before;
        until_all(&mut control, &working, SessionState::Idle).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (cpu_before, frames_before) = (cpu(), count());
        tokio::time::sleep(WINDOW).await;
        let cpu_idle = cpu() - cpu_before;
        let frames_idle = count() - frames_before;
        let rss_all = status("VmRSS:");
        let per = |kib: u64, n: usize| kib as f64 / n as f64;
        let share = |d: Duration| d.as_secs_f64() / WINDOW.as_secs_f64() * 100.0;
        println!(
            "idle: one daemon, {IDLE} idle sessions and {WORKING} working ones, one client subscribed to all"
        );
        println!(
            "  starting {IDLE} sessions       {:.2} s ({:.0} ms each, to idle)",
            startup.as_secs_f64(),
            startup.as_secs_f64() * 1000.0 / IDLE as f64
        );
        println!(
            "  memory                     {} MiB with none, {} MiB with {IDLE} idle: {:.0} KiB per idle session; {} MiB with all {}",
            rss_empty / 1024,
            rss_idle / 1024,
            per(rss_idle.saturating_sub(rss_empty), IDLE),
            rss_all / 1024,
            IDLE + WORKING
        );
        println!(
            "  threads                    {threads_empty} with none, {threads_idle} with {IDLE} idle ({names_idle}), {threads_working} with {WORKING} more working"
        );
        println!(
            "  CPU, {WORKING} waiting on a command  {} ms over {} s ({:.2}% of a core), {frames_waiting} frames to the client",
            cpu_waiting.as_millis(),
            WINDOW.as_secs(),
            share(cpu_waiting)
        );
        println!(
            "  CPU, all {} idle          {} ms over {} s ({:.2}% of a core), {frames_idle} frames to the client",
            IDLE + WORKING,
            cpu_idle.as_millis(),
            WINDOW.as_secs(),
            share(cpu_idle)
        );
        println!("  (this process: the daemon and its two clients; commands run in their own processes)");
        server.stop().await;
    });
}
