//! The rule of the execution seam (docs/architecture.md): a library makes no async runtime and
//! never blocks a thread on one; its async work is awaited on its caller's runtime. Clippy
//! enforces it from the workspace's clippy.toml (`disallowed-methods`), for the code of every
//! library whose root turns the lint on. This test fails when a library's root does not (a new
//! crate, or the line deleted), when clippy.toml stops naming what is forbidden, and when an
//! `#[allow]` of the lint appears in a library file that is not one of the binaries' edges
//! listed below.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// What every library's root carries.
const TURNED_ON: &str = "#![cfg_attr(not(test), deny(clippy::disallowed_methods))]";

/// What clippy.toml must forbid.
const FORBIDDEN: &[&str] = &[
    "tokio::runtime::Runtime::block_on",
    "tokio::runtime::Handle::block_on",
    "tokio::runtime::Runtime::new",
    "tokio::runtime::Builder::new_current_thread",
    "tokio::runtime::Builder::new_multi_thread",
];

/// The library files that may make and drive a runtime, one a line with why: each is a binary's
/// edge (its command or entry), never code a session or a front end calls into.
const EDGES: &[(&str, &str)] = &[
    (
        "crates/chock-cli/src/commands/mod.rs",
        "`block_on`: the runtime of a sync command's async step (mcp test/trust, mcp login, the workspace's questions)",
    ),
    (
        "crates/chock-cli/src/commands/exec.rs",
        "`chock exec`'s one runtime for its one confined call",
    ),
    (
        "crates/chock-cli/src/commands/run.rs",
        "`chock run`'s runtime, which drives the session",
    ),
    (
        "crates/chock-cli/src/commands/serve.rs",
        "the daemon's runtime",
    ),
    (
        "crates/chock-cli/src/commands/acp.rs",
        "the ACP agent's runtime",
    ),
    (
        "crates/chock-cli/src/commands/attach.rs",
        "`chock attach` and `chock run --daemon`, and a sync command's question to the daemon",
    ),
    (
        "crates/chock-tui/src/term.rs",
        "the terminal interface's entry",
    ),
];

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .unwrap_or_else(|e| panic!("running {cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON")
}

/// Every workspace library's root file.
fn library_roots(meta: &Value) -> Vec<(String, PathBuf)> {
    let mut roots = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let is_lib = target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "lib"));
            if is_lib {
                roots.push((
                    package["name"].as_str().unwrap_or_default().to_string(),
                    PathBuf::from(target["src_path"].as_str().expect("src_path")),
                ));
            }
        }
    }
    roots
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_library_forbids_making_or_blocking_on_a_runtime() {
    let meta = metadata();
    let root = PathBuf::from(meta["workspace_root"].as_str().expect("workspace_root"));
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).expect("clippy.toml");
    for path in FORBIDDEN {
        assert!(
            clippy.contains(&format!("path = \"{path}\"")),
            "clippy.toml no longer forbids {path}"
        );
    }
    let roots = library_roots(&meta);
    assert!(roots.len() > 10, "the workspace's libraries: {roots:?}");
    let missing: Vec<String> = roots
        .iter()
        .filter(|(_, src)| {
            !std::fs::read_to_string(src)
                .unwrap_or_default()
                .lines()
                .any(|l| l.trim() == TURNED_ON)
        })
        .map(|(name, src)| format!("{name} ({})", src.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "these libraries do not turn the lint on; add `{TURNED_ON}` to their root: {missing:?}"
    );

    // An allow of the lint only at a listed edge. A library's `src/main.rs` and `src/bin/` are
    // binaries' mains, which the lint does not cover.
    let mut unlisted = Vec::new();
    for (_, src) in &roots {
        let Some(dir) = src.parent() else { continue };
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        for file in files {
            let relative = file.strip_prefix(&root).unwrap_or(&file);
            if relative.ends_with("main.rs")
                || relative.components().any(|c| c.as_os_str() == "bin")
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.contains("allow(clippy::disallowed_methods")
                && !EDGES.iter().any(|(edge, _)| relative == Path::new(edge))
            {
                unlisted.push(relative.display().to_string());
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "a runtime made or blocked on in a library file that is no binary's edge: {unlisted:?} \
         (await on the caller's runtime instead, or, for a true edge, list it here with why)"
    );
}
