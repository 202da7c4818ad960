//! Building the repository's example and hostile plugins (hostile, alias) (`plugins/`) for `wasm32-wasip2`, for the
//! tests of this crate and of the CLI. Without the target the build is an error in CI (`CI=true`)
//! and a skip elsewhere, so a missing target can never pass CI silently.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built components.
#[derive(Debug, Clone)]
pub struct Built {
    /// `chock_plugin_example.wasm`.
    pub example: PathBuf,
    /// `chock_plugin_hostile.wasm`.
    pub hostile: PathBuf,
    /// `chock_plugin_alias.wasm`: a tool list whose descriptions all share one MiB.
    pub alias: PathBuf,
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn target_installed() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(repo_root())
        .output()
        .is_ok_and(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == "wasm32-wasip2")
        })
}

/// Builds `plugins/` into `target_dir` and returns the components; `None` (after saying why on
/// stderr) when the `wasm32-wasip2` target is missing outside CI. Panics in CI without it, and
/// whenever the build fails.
pub fn build_plugins(target_dir: &Path) -> Option<Built> {
    if !target_installed() {
        let why = "the wasm32-wasip2 target is not installed (`rustup target add wasm32-wasip2`)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{why}: CI must install it (.ci/run)"
        );
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let root = repo_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .arg("build")
        .arg("--manifest-path")
        .arg(root.join("plugins/Cargo.toml"))
        .args([
            "--target",
            "wasm32-wasip2",
            "--release",
            "--locked",
            "--quiet",
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building plugins/ for wasm32-wasip2 failed"
    );
    let out = target_dir.join("wasm32-wasip2/release");
    Some(Built {
        example: out.join("chock_plugin_example.wasm"),
        hostile: out.join("chock_plugin_hostile.wasm"),
        alias: out.join("chock_plugin_alias.wasm"),
    })
}
