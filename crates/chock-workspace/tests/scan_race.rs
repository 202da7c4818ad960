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

/// How many files the swapped directory holds: the host's scan of it takes long enough that the
/// swap lands while the scan is inside it on nearly every pass.
const FILES: usize = 1500;

/// The attack: `d` holds `FILES` files of the session's own; in a loop it stays a directory for a
/// moment, then is renamed away (into `.git`, which the scan leaves out, so nothing else vanishes
/// under the scan) and replaced by a symlink to the host directory (which has the same names), then
/// put back. Python (the sandbox binds `/usr`); the test needs it.
fn swapper(secret_dir: &std::path::Path, seconds: u64) -> String {
    let target = secret_dir.display();
    format!(
        r#"python3 - <<'EOF'
import os, random, time
os.mkdir("d")
for i in range({FILES}):
    with open("d/f%04d" % i, "w") as f:
        f.write("mine\n")
open("started", "w").close()
end = time.time() + {seconds}
while time.time() < end:
    time.sleep(random.uniform(0, 0.004))
    os.rename("d", ".git/race-hold")
    os.symlink("{target}", "d")
    time.sleep(random.uniform(0, 0.004))
    os.unlink("d")
    os.rename(".git/race-hold", "d")
open("finished", "w").close()
EOF"#
    )
}

#[test]
fn a_directory_swapped_for_a_host_symlink_mid_scan_never_reaches_the_repository() {
    let env = Env::git(&[("a.txt", "one\n")]);
    // A host directory outside the project: the sandbox does not see it, but a symlink in the
    // upper directory can name it.
    let secret_dir = env.tmp.path().join("host-only");
    std::fs::create_dir(&secret_dir).unwrap();
    for i in 0..FILES {
        std::fs::write(secret_dir.join(format!("f{i:04}")), SECRET).unwrap();
    }

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
        assert!(
            begin.elapsed() < Duration::from_secs(30),
            "the swapper never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Diffs and checkpoints both scan; every checkpoint hashes what its own scan read.
    let (mut ok, mut failed) = (0, Vec::new());
    let mut leaked_in_diff = 0;
    while !upper.join("finished").exists() && begin.elapsed() < Duration::from_secs(40) {
        for _ in 0..4 {
            match ws.diff() {
                Ok(diff) => {
                    ok += 1;
                    leaked_in_diff += usize::from(diff.files.iter().any(|f| {
                        f.new
                            .as_ref()
                            .and_then(|e| e.data())
                            .is_some_and(|d| d == SECRET.as_bytes())
                    }));
                }
                Err(e) => failed.push(e.to_string()),
            }
        }
        match ws.checkpoint("call") {
            Ok(_) => ok += 1,
            Err(e) => failed.push(e.to_string()),
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
    assert_eq!(
        leaked_in_diff, 0,
        "a host file outside the sandbox was shown in {leaked_in_diff} diffs"
    );
    // The scan also stands up to entries vanishing under it (a swapped name is read as what it
    // is now, or skipped), rather than failing most scans.
    assert!(
        ok > failed.len(),
        "scans mostly failed under the swap ({ok} ok): {:?}",
        &failed[..failed.len().min(5)]
    );
    // Once the swapping stops the session's own file is there, read from the upper directory.
    let diff = ws.diff().unwrap();
    assert!(
        diff.files
            .iter()
            .filter(|f| f.path.starts_with("d/f")
                && f.new.as_ref().and_then(|e| e.data()) == Some(b"mine\n"))
            .count()
            == FILES,
        "{:?}",
        diff.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
}
