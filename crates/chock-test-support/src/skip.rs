//! Requirements a test states, and the record of the tests skipped for want of them.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory, under the target directory, holding one file per skipped test.
pub const SKIPPED_DIR: &str = "chock-skipped";

/// Whether this run is CI's: every requirement must then hold.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The name of the running test (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string()
}

/// The target directory the running test binary was built in (`target/<profile>/deps/<bin>`).
pub fn skipped_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let profile = deps.parent()?;
    Some(profile.parent()?.join(SKIPPED_DIR))
}

/// `present` says whether what the test needs is there; `why` names it. Returns `present`.
///
/// Missing in CI: the test fails here, naming what is missing. Missing elsewhere: the caller
/// returns early (the test passes without running), and the skip is written to the terminal at
/// once and recorded for the end-of-run report.
pub fn requires(present: bool, why: impl Display) -> bool {
    if present {
        return true;
    }
    let test = test_name();
    assert!(
        !in_ci(),
        "{test}: {why} — required in CI (`.ci/run` installs or sets it up)"
    );
    // Straight to the terminal: the harness captures only what the print macros write.
    let _ = writeln!(std::io::stderr().lock(), "skipped {test}: {why}");
    if let Some(dir) = skipped_dir()
        && std::fs::create_dir_all(&dir).is_ok()
    {
        let binary = std::env::current_exe()
            .ok()
            .and_then(|e| e.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let file = format!("{binary}--{}", test.replace(['/', ':'], "_"));
        let _ = std::fs::write(dir.join(file), format!("{test}\t{why}\n"));
    }
    false
}

/// Requires the program or file at `path`, which `.ci/run` installs.
pub fn installed(path: impl AsRef<Path>) -> bool {
    let path = path.as_ref();
    requires(
        path.exists(),
        format_args!("{} is not installed (see .ci/run)", path.display()),
    )
}
