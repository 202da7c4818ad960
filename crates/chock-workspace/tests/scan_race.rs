//! A hostile background command against the host's scan of the upper directory.
//!
//! The command runs confined by the real sandbox driver and swaps a directory of the session for a
//! symlink to a host directory it cannot see, in a loop, while the host checkpoints the session
//! over and over. A scan that walked by path string would follow the link in the window between
//! its look at `d` and its read inside it, hash the host file into the user's repository under
//! `refs/chock/<session>`, and show it in the diff. Stopped by: the scan walks by descriptor
//! (`chock_beneath::Dir`, `O_NOFOLLOW | O_DIRECTORY` per component, reads relative to the open
//! directory).

mod common;

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use chock_sandbox::{Plan, StdioMode, spawn};
use common::Env;

const SECRET: &str = "host-secret-7f3a9c";

/// The swap loop, in Python when the sandbox has it (a tight loop hits the window far more often
/// than `mv` and `ln` processes do), else in sh.
fn swapper(secret_dir: &std::path::Path, seconds: u64) -> String {
    let target = secret_dir.display();
    format!(
        r#"mkdir -p d && echo mine > d/own && touch started
if command -v python3 >/dev/null; then
python3 - <<'EOF'
import os, time
end = time.time() + {seconds}
while time.time() < end:
    os.rename("d", "d.real")
    os.symlink("{target}", "d")
    os.unlink("d")
    os.rename("d.real", "d")
EOF
else
end=$(( $(date +%s) + {seconds} ))
while [ "$(date +%s)" -lt "$end" ]; do mv d d.real; ln -s {target} d; rm d; mv d.real d; done
fi
touch finished"#
    )
}

#[test]
fn a_directory_swapped_for_a_host_symlink_mid_scan_never_reaches_the_repository() {
    let env = Env::git(&[("a.txt", "one\n")]);
    // A host directory outside the project: the sandbox does not see it, but a symlink in the
    // upper directory can name it.
    let secret_dir = env.tmp.path().join("host-only");
    std::fs::create_dir(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key"), SECRET).unwrap();
    std::fs::write(secret_dir.join("own"), SECRET).unwrap();

    let ws = env.workspace("race1");
    let plan = Plan::builder(
        vec!["/bin/sh".into(), "-c".into(), swapper(&secret_dir, 6)],
        ws.mount(),
        env.project.clone(),
    )
    .timeout(Some(Duration::from_secs(60)))
    .build();
    let mut child = spawn(&plan, StdioMode::Piped).expect("every sandbox layer applies");
    let mut err = child.take_stderr().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    drop(child.take_stdout());

    let upper = ws.upper();
    let begin = Instant::now();
    while !upper.join("started").exists() {
        assert!(begin.elapsed() < Duration::from_secs(30), "the swapper never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (mut ok, mut failed) = (0, Vec::new());
    let mut leaked_in_diff = false;
    while !upper.join("finished").exists() && begin.elapsed() < Duration::from_secs(40) {
        match ws.checkpoint("call") {
            Ok(_) => ok += 1,
            Err(e) => failed.push(e.to_string()),
        }
        if let Ok(diff) = ws.diff() {
            leaked_in_diff |= diff.files.iter().any(|f| {
                f.new
                    .as_ref()
                    .and_then(|e| e.data())
                    .is_some_and(|d| d == SECRET.as_bytes())
            });
        }
    }
    let outcome = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(
        outcome.status,
        chock_sandbox::ExitStatus::Exited(0),
        "{stderr}"
    );

    let objects = Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .current_dir(&env.project)
        .output()
        .unwrap();
    assert!(objects.status.success());
    let all = String::from_utf8_lossy(&objects.stdout);
    assert!(
        !all.contains(SECRET),
        "a host file outside the sandbox was hashed into the user's repository \
         ({ok} checkpoints, {} failed)",
        failed.len()
    );
    assert!(!leaked_in_diff, "a host file outside the sandbox was shown in the diff");
    assert!(
        ok > failed.len(),
        "checkpoints mostly failed under the swap: {failed:?}"
    );
    // Once the swapping stops the session's own file is there, read from the upper directory.
    let diff = ws.diff().unwrap();
    assert!(
        diff.files
            .iter()
            .any(|f| f.path == "d/own" && f.new.as_ref().and_then(|e| e.data()) == Some(b"mine\n")),
        "{:?}",
        diff.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
}
