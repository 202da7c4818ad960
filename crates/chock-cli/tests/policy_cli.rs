//! `chock policy check` and `chock policy lint`, run as the built binary in a temporary project.
//! Every run names its own org bundle through CHOCK_ORG_POLICY, so the host's /etc is never read, and
//! uses paths relative to the project so snapshots hold no temporary directory names.

use std::path::Path;
use std::process::Command;

fn chock(dir: &Path, org: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_chock"))
        .args(args)
        .current_dir(dir)
        .env("CHOCK_ORG_POLICY", org)
        .env("HOME", "/nonexistent-home")
        .output()
        .expect("run chock");
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        out.status
            .code()
            .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A project directory holding `chock.toml` (if given) and an org bundle `org.toml`.
fn project(table: Option<&str>, org: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(table) = table {
        std::fs::write(dir.path().join("chock.toml"), table).expect("write chock.toml");
    }
    std::fs::write(dir.path().join("org.toml"), org).expect("write org.toml");
    dir
}

const TABLE: &str = r#"# A project table.
[[rule]]
action = "net.fetch.com.github.*"
decision = "allow"

[[rule]]
action = "git.push"
decision = "deny"
why = "pushes are done by people"

[[rule]]
action = "mcp.time.tool.*"
decision = "allow"
"#;

const ORG: &str = r#"[[rule]]
action = "net.fetch.com.github.gist"
decision = "deny"
"#;

#[test]
fn check_names_the_project_rule() {
    let dir = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "git.push"]
    ));
}

#[test]
fn check_names_the_org_bundle_when_it_is_stricter() {
    let dir = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "net.fetch.com.github.gist"]
    ));
}

#[test]
fn check_names_the_shipped_default() {
    let dir = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "workspace.apply"]
    ));
}

#[test]
fn check_with_no_rule_and_no_default_asks() {
    let dir = project(None, "");
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "net.connect.com.example.22"]
    ));
}

#[test]
fn check_reads_another_project_directory() {
    let dir = project(None, "");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("chock.toml"),
        "[[rule]]\naction = \"exec.*\"\ndecision = \"agent_review\"\n",
    )
    .unwrap();
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "exec.system.ls", "--project", "sub"]
    ));
}

#[test]
fn check_refuses_an_undefined_or_malformed_action() {
    let dir = project(None, "");
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "nix.build"]
    ));
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "net.fetch.*"]
    ));
}

#[test]
fn check_refuses_a_table_that_does_not_load() {
    let dir = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"alow\"\n"),
        "",
    );
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "check", "git.push"]
    ));
}

#[test]
fn check_refuses_a_named_org_bundle_that_is_missing() {
    let dir = project(None, "");
    let out = chock(
        dir.path(),
        "missing-org.toml",
        &["policy", "check", "git.push"],
    );
    assert!(out.starts_with("status: 2\n"), "{out}");
    assert!(
        out.contains("missing-org.toml: cannot read the file"),
        "{out}"
    );
}

#[test]
fn lint_accepts_a_good_table() {
    let dir = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(dir.path(), "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_accepts_a_good_org_bundle() {
    let dir = project(None, ORG);
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "lint", "--org", "org.toml"]
    ));
}

#[test]
fn lint_reports_an_ambiguous_pair() {
    let dir = project(None, "");
    let table = "[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n\n[[rule]]\naction = \"exec.*\"\ndecision = \"ask\"\n";
    std::fs::write(dir.path().join("other.toml"), table).unwrap();
    insta::assert_snapshot!(chock(
        dir.path(),
        "org.toml",
        &["policy", "lint", "other.toml"]
    ));
}

#[test]
fn lint_reports_an_org_conflict() {
    let dir = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"allow\"\n"),
        "[[rule]]\naction = \"git.*\"\ndecision = \"ask\"\n",
    );
    insta::assert_snapshot!(chock(dir.path(), "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_reports_an_unknown_field_and_an_undefined_action() {
    let dir = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"ask\"\nreason = \"x\"\n"),
        "",
    );
    insta::assert_snapshot!(chock(dir.path(), "org.toml", &["policy", "lint"]));
    std::fs::write(
        dir.path().join("chock.toml"),
        "[[rule]]\naction = \"fs.delete\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    insta::assert_snapshot!(chock(dir.path(), "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_without_a_table_is_bad_input() {
    let dir = project(None, "");
    insta::assert_snapshot!(chock(dir.path(), "org.toml", &["policy", "lint"]));
}
