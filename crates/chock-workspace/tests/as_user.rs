//! The workspace suites again, as an unprivileged user: that is how people run Chock (the overlay is
//! mounted in a user namespace the user owns, and the upper directory is theirs). When this test
//! runs as root it creates the user `chockws` if needed and runs the sibling test binaries
//! (`git_backing`, `overlay_backing`, `through_sandbox`) as that user; run as anyone else, those suites already ran
//! unprivileged and this test has nothing to add.

use std::path::{Path, PathBuf};
use std::process::Command;

const USER: &str = "chockws";

/// The newest built test binary named `<name>-<hash>` beside this one.
fn sibling(name: &str) -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let dir = me.parent().unwrap();
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            file.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|hash| {
                    !hash.contains('.') && hash.chars().all(|c| c.is_ascii_hexdigit())
                })
        })
        .map(|p| (std::fs::metadata(&p).unwrap().modified().unwrap(), p))
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no {name} test binary in {}", dir.display()))
        .1
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

fn ensure_user() {
    let exists = Command::new("id")
        .arg("-u")
        .arg(USER)
        .output()
        .unwrap()
        .status
        .success();
    if !exists {
        let status = Command::new("useradd")
            .args(["--create-home", USER])
            .status()
            .expect("useradd");
        assert!(status.success(), "useradd {USER} failed");
    }
}

fn run_as_user(exe: &Path) {
    let out = Command::new("runuser")
        .args([
            "-u",
            USER,
            "--",
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "LANG=C.UTF-8",
        ])
        .arg(format!("HOME=/home/{USER}"))
        .arg("TMPDIR=/tmp")
        .arg(exe)
        .current_dir("/tmp")
        .output()
        .expect("runuser");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} as {USER} failed:\n{text}",
        exe.display()
    );
    assert!(text.contains("test result: ok"), "{text}");
}

#[test]
fn the_workspace_suites_pass_as_an_unprivileged_user() {
    if !is_root() {
        return; // the other binaries of this package already ran as this unprivileged user
    }
    ensure_user();
    for name in [
        "git_backing",
        "overlay_backing",
        "through_sandbox",
        "apply_trust",
        "setid_apply",
    ] {
        run_as_user(&sibling(name));
    }
}
