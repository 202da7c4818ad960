//! Benchmark: a call in a microVM guest beside the same call on the host, in one run.
//!
//! Prints the median wall time of `true`, from the confiner's start to the call's end: in the
//! in-process sandbox (`LocalConfiner`), in a warm guest (booted, kept between calls), the cold
//! boot to the first call's end (a new guest each time), and a fork's guest started from a
//! snapshot of a warm one to its first call's end (its own workspace; the snapshot's own time
//! printed beside it), with each as a ratio of the host call. The accelerator (kvm or tcg) is
//! printed with it: under TCG the guest's kernel is emulated, which is most of a warm call's
//! cost.
//!
//! `cargo bench -p chock-vm --bench guest` (runs: `CHOCK_BENCH_RUNS`, default 20; cold boots:
//! `CHOCK_BENCH_BOOTS`, default 3). Needs what the `microvm` tests need (the kernel in
//! `CHOCK_VM_DIR` or the target directory, `CHOCK_GUEST_INIT` or the musl build). Not a test.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chock_sandbox::{
    CallHandle, Confiner, LocalConfiner, Plan, SocketIndex, StdioMode, WorkspaceMount,
};
use chock_vm::{GuestConfig, GuestConfiner};

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("exe");
    exe.ancestors().nth(3).expect("target dir").to_path_buf()
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn call(c: &dyn Confiner, plan: &Plan) {
    let prepared = c.prepare(plan.clone()).await.expect("prepare");
    let mut h: Box<dyn CallHandle> = c
        .start(prepared, StdioMode::Piped, None)
        .await
        .expect("start");
    let out = h.take_stdout();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut f) = out {
            let _ = f.read_to_end(&mut s);
        }
    });
    let outcome = h.wait().await.expect("wait");
    assert_eq!(outcome.status, chock_sandbox::ExitStatus::Exited(0));
    let _ = reader.join();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs = env_or("CHOCK_BENCH_RUNS", 20);
    let boots = env_or("CHOCK_BENCH_BOOTS", 3);
    let config = GuestConfig {
        kernel_dir: std::env::var_os("CHOCK_VM_DIR")
            .map_or_else(|| target_dir().join("chock-vm-kernel"), PathBuf::from),
        guest_init: std::env::var_os("CHOCK_GUEST_INIT").map_or_else(
            || target_dir().join("x86_64-unknown-linux-musl/debug/chock-guest"),
            PathBuf::from,
        ),
        memory_mib: 512,
        snapshots: false,
    };
    let snapshots = GuestConfig {
        snapshots: true,
        ..config.clone()
    };
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let project = tempfile::Builder::new()
        .prefix(".chock-vm-bench-")
        .tempdir_in(home)
        .expect("project dir");
    let fork_project = tempfile::Builder::new()
        .prefix(".chock-vm-bench-fork-")
        .tempdir_in(project.path().parent().expect("the home"))
        .expect("fork's project dir");
    let plan_in = |dir: &std::path::Path| {
        Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Bind {
                source: dir.to_path_buf(),
            },
            dir.to_path_buf(),
        )
        .build()
    };
    let plan = plan_in(project.path());
    let fork_plan = plan_in(fork_project.path());
    let state = tempfile::Builder::new()
        .prefix("chock-vm-bench-state-")
        .tempdir()
        .expect("a private directory for the snapshot");
    let snapshot = state.path().join("guest");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let local = LocalConfiner::new(None, Arc::new(SocketIndex::new()));
        call(&local, &plan).await;
        let mut host = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            call(&local, &plan).await;
            host.push(t.elapsed());
        }
        let mut cold = Vec::new();
        let mut accel = String::new();
        for _ in 0..boots {
            let t = Instant::now();
            let guest = GuestConfiner::new(&config).expect("a guest confiner");
            call(&guest, &plan).await;
            cold.push(t.elapsed());
            accel = format!("{} ({})", guest.accel().accel.name(), guest.accel().why);
        }
        let guest = GuestConfiner::new(&config).expect("a guest confiner");
        call(&guest, &plan).await;
        let mut warm = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            call(&guest, &plan).await;
            warm.push(t.elapsed());
        }
        let parent = GuestConfiner::new(&snapshots).expect("a guest confiner (9p)");
        call(&parent, &plan).await;
        let t = Instant::now();
        parent.snapshot(&snapshot).expect("a snapshot");
        let snapshot_took = t.elapsed();
        let snapshot_size = std::fs::metadata(snapshot.join("state")).map_or(0, |m| m.len());
        let mut warm_9p = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            call(&parent, &plan).await;
            warm_9p.push(t.elapsed());
        }
        let mut forks = Vec::new();
        for _ in 0..boots {
            let t = Instant::now();
            let fork = GuestConfiner::new(&snapshots).expect("a guest confiner (9p)");
            fork.warm_up_from(&snapshot, &fork_plan)
                .expect("a guest from the snapshot");
            call(&fork, &fork_plan).await;
            forks.push(t.elapsed());
        }
        let host = median(host);
        let ratio = |d: Duration| d.as_secs_f64() / host.as_secs_f64();
        println!(
            "a call of `true`, medians ({runs} calls, {boots} cold boots); guest under {accel}"
        );
        let line = |label: &str, d: Duration| {
            println!("  {label:<40} {d:>10.2?}   {:.1}x", ratio(d));
        };
        line("host call (in-process sandbox)", host);
        line("warm guest call (virtiofs)", median(warm));
        line("warm guest call (9p, can be snapshotted)", median(warm_9p));
        let c = median(cold);
        line("cold boot to first call's end", c);
        let f = median(forks);
        line("fork from a snapshot to first call's end", f);
        println!(
            "  a fork from a snapshot is {:.2}x a cold boot",
            f.as_secs_f64() / c.as_secs_f64()
        );
        println!(
            "  (the snapshot: {:.2?}, {} MiB of state)",
            snapshot_took,
            snapshot_size >> 20
        );
    });
}
