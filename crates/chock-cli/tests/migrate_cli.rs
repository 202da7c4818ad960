//! `chock migrate` for each harness, with its files at their documented places in a hermetic
//! world (the fixtures are chock-migrate's): what it prints, what it writes, that the file loads
//! through `chock policy lint`, and that a second run never overwrites it.

mod run_support;

use std::path::Path;

use run_support::{World, text};

fn fixture(harness: &str, file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../chock-migrate/tests/fixtures")
        .join(harness)
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

fn place(w: &World, to: &Path, body: &str) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::write(to, body).unwrap();
    let _ = w;
}

fn run(w: &World, args: &[&str]) -> String {
    let out = w.chock(args);
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        text(&out.stdout),
        text(&out.stderr)
    )
}

fn settings(w: &World) -> insta::Settings {
    let mut s = w.settings();
    s.add_filter(r"\d{4}-\d{2}-\d{2}", "[DATE]");
    s.add_filter(r"Chock \d+\.\d+\.\d+", "Chock [VERSION]");
    s
}

/// Migrates `harness` twice: the first writes chock.toml, which lints; the second leaves it.
fn migrate(harness: &str, files: &[(&str, &str)], extra: &[&str]) {
    let w = World::new();
    for (fixture_name, to) in files {
        let to = match to.strip_prefix("~/") {
            Some(rest) => w.home.join(rest),
            None => w.project.join(to),
        };
        place(&w, &to, &fixture(harness, fixture_name));
    }
    let mut args = vec!["migrate", "--from", harness];
    args.extend_from_slice(extra);
    let first = run(&w, &args);
    assert!(first.starts_with("status: 0"), "{first}");
    let written = w.read("chock.toml");
    let lint = run(&w, &["policy", "lint"]);
    assert!(lint.starts_with("status: 0"), "{lint}");
    let second = run(&w, &args);
    assert!(second.starts_with("status: 1"), "{second}");
    assert_eq!(
        w.read("chock.toml"),
        written,
        "the second run changed chock.toml"
    );
    settings(&w).bind(|| {
        insta::assert_snapshot!(format!("{harness}_first"), first);
        insta::assert_snapshot!(
            format!("{harness}_second_stderr"),
            second.split("--- stderr\n").nth(1).unwrap()
        );
    });
}

#[test]
fn claude_code() {
    migrate(
        "claude-code",
        &[
            ("settings.json", ".claude/settings.json"),
            (".mcp.json", ".mcp.json"),
        ],
        &["--permission", "net.fetch"],
    );
}

#[test]
fn codex() {
    migrate("codex", &[("config.toml", "~/.codex/config.toml")], &[]);
}

#[test]
fn opencode() {
    migrate("opencode", &[("opencode.json", "opencode.json")], &[]);
}

#[test]
fn zed() {
    migrate(
        "zed",
        &[("settings.json", "~/.config/zed/settings.json")],
        &[],
    );
}

#[test]
fn oh_my_pi() {
    migrate("oh-my-pi", &[("mcp.json", "~/.omp/agent/mcp.json")], &[]);
}

#[test]
fn bad_input_is_refused_naming_what() {
    let w = World::new();
    let unknown = run(&w, &["migrate", "--from", "cursor"]);
    let permission = run(
        &w,
        &[
            "migrate",
            "--from",
            "codex",
            "--permission",
            "exec.system.git",
        ],
    );
    let nothing = run(&w, &["migrate", "--from", "codex"]);
    settings(&w).bind(|| {
        insta::assert_snapshot!(
            "migrate_bad_input",
            format!("{unknown}{permission}{nothing}")
        );
    });
    assert!(!w.project.join("chock.toml").exists());
}

#[test]
fn memory_brings_notes_in_as_data_and_never_replaces_one() {
    let w = World::new();
    w.write("CLAUDE.md", &fixture("claude-code", "CLAUDE.md"));
    let first = run(&w, &["migrate", "--from", "claude-code", "--memory"]);
    assert!(first.starts_with("status: 0"), "{first}");
    assert!(
        !w.project.join("chock.toml").exists(),
        "--memory wrote chock.toml"
    );
    let shown = run(&w, &["memory", "show", "claude-code-1-claude"]);
    let second = run(&w, &["migrate", "--from", "claude-code", "--memory"]);
    assert!(second.starts_with("status: 1"), "{second}");
    settings(&w).bind(|| {
        insta::assert_snapshot!("memory_first", first);
        insta::assert_snapshot!("memory_shown", shown);
        insta::assert_snapshot!("memory_second", second);
    });
}

#[test]
fn sessions_import_a_transcript_as_a_copy_never_as_events() {
    let w = World::new();
    let project = w.project.canonicalize().unwrap();
    let encoded: String = project
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let body = fixture("claude-code", "transcript.jsonl");
    place(
        &w,
        &w.home
            .join(".claude/projects")
            .join(&encoded)
            .join("5f1c.jsonl"),
        &body,
    );
    let out = run(&w, &["migrate", "--from", "claude-code", "--sessions"]);
    assert!(out.starts_with("status: 0"), "{out}");
    let kinds: Vec<String> = w.events().into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(kinds, ["session.start", "session.imported"]);
    let (_, _, data) = w.events().pop().unwrap();
    let sha = data["sha256"].as_str().unwrap().to_owned();
    assert_eq!(data["events"], 3);
    assert_eq!(data["transcript"], format!("{sha}.jsonl"));
    let copy = std::fs::read_to_string(w.session().join(format!("{sha}.jsonl"))).unwrap();
    assert_eq!(copy, body);
    w.assert_log_verifies();
    assert!(!w.project.join("chock.toml").exists());
    settings(&w).bind(|| {
        let mut s = insta::Settings::clone_current();
        s.add_filter(r"session [0-9A-Za-z-]+:", "session [ID]:");
        s.add_filter(&run_support::regex_escape(&encoded), "[PROJECT]");
        s.bind(|| insta::assert_snapshot!("sessions_first", out));
    });
    // Another harness's transcripts are refused by name.
    let other = run(&w, &["migrate", "--from", "codex", "--sessions"]);
    assert!(other.contains("only claude-code transcripts"), "{other}");
}
