//! The escape suite's calls in a microVM guest (`CHOCK_ESCAPE_CONFINER=microvm`): each plan is
//! started through chock-vm's `GuestConfiner`, the execution seam's second implementation, so
//! the same attacks meet the same driver building the same layers under the guest's kernel.
//!
//! Needs what chock-vm's own guest tests need (`.ci/run` installs and builds it): QEMU, the guest
//! kernel (`CHOCK_VM_DIR`, else `chock-vm-kernel` in the target directory) and chock-guest built
//! for musl (`CHOCK_GUEST_INIT`, else its musl build in the target directory). Asked for by name,
//! a guest that cannot be had fails every test rather than run them on the host.

use std::io::Read;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use chock_sandbox::{CallHandle, Confiner, Plan, SandboxError, StdioMode};
use chock_vm::{GuestConfig, GuestConfiner};

use super::Run;

/// The target directory this test binary was built in.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.ancestors()
        .nth(3)
        .expect("the target directory")
        .to_path_buf()
}

/// One confiner per test thread (libtest runs each test on a thread of its own): the test's
/// guest is kept warm between its calls (a fixture's calls share their shares) and stopped when
/// the test ends, and no test's guest is dropped for another's.
fn confiner() -> GuestConfiner {
    thread_local! {
        static CONFINER: GuestConfiner = {
            let from_env = |var: &str, fallback: &str| {
                std::env::var_os(var)
                    .filter(|v| !v.is_empty())
                    .map_or_else(|| target_dir().join(fallback), PathBuf::from)
            };
            let config = GuestConfig {
                kernel_dir: from_env("CHOCK_VM_DIR", "chock-vm-kernel"),
                guest_init: from_env(
                    "CHOCK_GUEST_INIT",
                    "x86_64-unknown-linux-musl/debug/chock-guest",
                ),
                memory_mib: 384,
                snapshots: false,
            };
            GuestConfiner::new(&config).unwrap_or_else(|e| {
                panic!("CHOCK_ESCAPE_CONFINER=microvm, but no guest can be had: {e}")
            })
        };
    }
    CONFINER.with(GuestConfiner::clone)
}

/// Held while a call runs in a guest: one guest works at a time, so that emulated boots do not
/// compete for a loaded machine's cores past the confiner's boot timeout.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the guest's confiner")
    })
}

/// Prepares and starts `plan` in a guest.
pub fn start(plan: &Plan) -> Result<Box<dyn CallHandle>, SandboxError> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let c = confiner();
    runtime().block_on(async {
        let call = c.prepare(plan.clone()).await?;
        c.start(call, StdioMode::Piped, None).await
    })
}

/// Runs `plan` in a guest to its end, as the host's runner does.
pub fn run(plan: &Plan) -> Run {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let c = confiner();
    let started = runtime().block_on(async {
        let call = c.prepare(plan.clone()).await?;
        c.start(call, StdioMode::Piped, None).await
    });
    let mut h = started.unwrap_or_else(|e| {
        panic!(
            "the microVM guest refused to start `{}`: {e}",
            plan.argv.join(" ")
        )
    });
    let read = |f: Option<std::fs::File>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut f) = f {
                let _ = f.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let (out, err) = (read(h.take_stdout()), read(h.take_stderr()));
    let outcome = runtime()
        .block_on(h.wait())
        .unwrap_or_else(|e| panic!("waiting for `{}` in the guest: {e}", plan.argv.join(" ")));
    Run {
        status: outcome.status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        forbidden_call: outcome.forbidden_call.clone(),
        filter_note: outcome.filter_note(),
    }
}

/// The guest kernel's Landlock ABI, asked inside the guest (its driver applies that one, not
/// the host's): `python3` from the shared /usr calls landlock_create_ruleset's version query.
pub fn landlock_abi() -> i64 {
    static ABI: OnceLock<i64> = OnceLock::new();
    *ABI.get_or_init(|| {
        let fx = super::Fixture::new(super::Backing::BindCopy);
        let probe = "import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))";
        let r = run(&fx.plan(vec!["python3".into(), "-c".into(), probe.into()]));
        let abi: i64 = r.stdout.trim().parse().unwrap_or_else(|_| {
            panic!("the guest's Landlock ABI: {r:?}");
        });
        abi.max(0)
    })
}
