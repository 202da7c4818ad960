//! The crate's split by where code runs, checked over its source: a module under `src/child/`
//! (code run after fork, and by a future guest-side driver) names nothing of `crate::host`, and a
//! module under `src/wire/` names neither side. Read from the files, so a new `use` (or a path
//! written in place) that crosses the line fails here, before it can grow back an import cycle.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Every line of the `.rs` files under `src/<side>` that names one of `forbidden`, comments
/// excluded, as "file:line: text".
fn crossings(side: &str, forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(side);
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // A grouped `use crate::{host::x, ...}` names the side after the brace.
            let flat: String = code.split_whitespace().collect();
            if forbidden.iter().any(|side| {
                flat.contains(&format!("crate::{side}"))
                    || (flat.contains("crate::{") && flat.contains(&format!("{side}::")))
                    || flat.contains(&format!("super::super::{side}"))
            }) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_child_side_uses_nothing_of_the_host_side() {
    let found = crossings("child", &["host"]);
    assert!(
        found.is_empty(),
        "child code uses the host side:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_wire_uses_neither_side() {
    let found = crossings("wire", &["host", "child"]);
    assert!(
        found.is_empty(),
        "wire code uses a side:\n{}",
        found.join("\n")
    );
}
