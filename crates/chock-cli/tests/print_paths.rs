//! No file of the command line prints but `src/say.rs`, the one place every byte on stdout and
//! stderr goes through the one escaper (`chock_protocol::text`). A `println!` added anywhere else
//! would put a model's, a command's, a plugin's or a server's text on the person's terminal raw:
//! this test fails on it, naming the file and line.

use std::path::{Path, PathBuf};

/// What prints, or takes a handle to print on, outside `say.rs`.
const PRINTING: &[&str] = &[
    "println!",
    "print!",
    "eprintln!",
    "eprint!",
    "writeln!",
    "write!",
    "dbg!",
    "io::stdout",
    "io::stderr",
    "stdout,",
    "stdout}",
    "stderr,",
    "stderr}",
];

/// Uses of a pattern that do not print: each names its file, what it is, and why it is not a
/// way around the escaper.
const NOT_PRINTING: &[(&str, &str)] = &[
    // Asking whether a stream is a terminal writes nothing.
    ("", "io::stdout().is_terminal()"),
    ("", "io::stderr().is_terminal()"),
    // The ACP wire to the editor: JSON-RPC frames serde_json writes, not a terminal.
    ("src/commands/acp.rs", "tokio::io::stdout()"),
    // clap's own usage error or help (`err.print()`), quoting only the words the person typed.
    ("src/exit.rs", "err.use_stderr()"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every place in `src/` (but `say.rs`) where a pattern of [`PRINTING`] occurs that
/// [`NOT_PRINTING`] does not excuse, as `file:line: text`.
fn bypasses(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .expect("below the crate")
            .to_string_lossy()
            .into_owned();
        if rel == "src/say.rs" {
            continue;
        }
        let source = std::fs::read_to_string(&file).expect("read a source file");
        for (n, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code.to_owned();
            for (only, excused) in NOT_PRINTING {
                if only.is_empty() || *only == rel {
                    rest = rest.replace(excused, "");
                }
            }
            if PRINTING.iter().any(|p| rest.contains(p)) {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn nothing_prints_around_the_escaper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = bypasses(root);
    assert!(
        found.is_empty(),
        "these print without the one escaper; use say!/say_err! or a function of src/say.rs:\n{}",
        found.join("\n")
    );
}

/// The check itself sees a print that bypasses the escaper (so an empty result above means
/// something).
#[test]
fn the_check_finds_a_raw_print() {
    let dir = std::env::temp_dir().join(format!("chock-print-paths-{}", std::process::id()));
    let src = dir.join("src/commands");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        src.join("x.rs"),
        "fn f(t: &str) {\n    println!(\"title {t}\");\n    let _ = std::io::stdout().is_terminal();\n}\n",
    )
    .expect("write");
    std::fs::write(dir.join("src/say.rs"), "fn g() { println!(); }\n").expect("write");
    let found = bypasses(&dir);
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(
        found,
        vec!["src/commands/x.rs:2: println!(\"title {t}\");".to_owned()]
    );
}
