//! `chock policy check` and `chock policy lint`, run as the built binary in the hermetic test world.
//! Every run names its own org bundle through CHOCK_ORG_POLICY, so the host's /etc is never read, and
//! uses paths relative to the project so snapshots hold no temporary directory names.

mod run_support;

use run_support::World;

fn chock(w: &World, org: &str, args: &[&str]) -> String {
    let out = w.chock_with_env(args, &[("CHOCK_ORG_POLICY", org)]);
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
fn project(table: Option<&str>, org: &str) -> World {
    let w = World::new();
    if let Some(table) = table {
        w.write("chock.toml", table);
    }
    w.write("org.toml", org);
    w
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
    let w = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "check", "git.push"]));
}

#[test]
fn check_names_the_org_bundle_when_it_is_stricter() {
    let w = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "check", "net.fetch.com.github.gist"]
    ));
}

#[test]
fn check_names_the_shipped_default() {
    let w = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "check", "workspace.apply"]
    ));
}

#[test]
fn check_with_no_rule_and_no_default_asks() {
    let w = project(None, "");
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "check", "net.connect.com.example.22"]
    ));
}

#[test]
fn check_reads_another_project_directory() {
    let w = project(None, "");
    w.write(
        "sub/chock.toml",
        "[[rule]]\naction = \"exec.*\"\ndecision = \"agent_review\"\n",
    );
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "check", "exec.system.ls", "--project", "sub"]
    ));
}

#[test]
fn check_refuses_an_undefined_or_malformed_action() {
    let w = project(None, "");
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "check", "nix.shell"]));
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "check", "net.fetch.*"]));
}

#[test]
fn check_refuses_a_table_that_does_not_load() {
    let w = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"alow\"\n"),
        "",
    );
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "check", "git.push"]));
}

#[test]
fn check_refuses_a_named_org_bundle_that_is_missing() {
    let w = project(None, "");
    let out = chock(&w, "missing-org.toml", &["policy", "check", "git.push"]);
    assert!(out.starts_with("status: 2\n"), "{out}");
    assert!(
        out.contains("missing-org.toml: cannot read the file"),
        "{out}"
    );
}

#[test]
fn lint_accepts_a_good_table() {
    let w = project(Some(TABLE), ORG);
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_accepts_a_good_org_bundle() {
    let w = project(None, ORG);
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "lint", "--org", "org.toml"]
    ));
}

#[test]
fn lint_reports_an_ambiguous_pair() {
    let w = project(None, "");
    let table = "[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n\n[[rule]]\naction = \"exec.*\"\ndecision = \"ask\"\n";
    w.write("other.toml", table);
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint", "other.toml"]));
}

#[test]
fn lint_reports_an_org_conflict() {
    let w = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"allow\"\n"),
        "[[rule]]\naction = \"git.*\"\ndecision = \"ask\"\n",
    );
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_reports_an_unknown_field_and_an_undefined_action() {
    let w = project(
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"ask\"\nreason = \"x\"\n"),
        "",
    );
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"fs.delete\"\ndecision = \"deny\"\n",
    );
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_without_a_table_is_bad_input() {
    let w = project(None, "");
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_says_what_allow_means_for_a_password() {
    // Only the `allow` row gets the note: a password is still typed by a person at the prompt.
    let w = project(
        Some(
            "[[rule]]\naction = \"git.commit\"\ndecision = \"deny\"\n\n\
             [[rule]]\naction = \"secret.password.com.github\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"secret.password.*\"\ndecision = \"deny\"\n\n\
             [[rule]]\naction = \"fs.write\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"*\"\ndecision = \"ask\"\n",
        ),
        "",
    );
    insta::assert_snapshot!(chock(&w, "org.toml", &["policy", "lint"]));
}

#[test]
fn lint_says_what_allow_means_for_a_password_in_an_org_bundle() {
    let w = project(
        None,
        "[[rule]]\naction = \"secret.password.*\"\ndecision = \"allow\"\n",
    );
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "lint", "--org", "org.toml"]
    ));
}

#[test]
fn check_says_how_a_password_is_asked() {
    let w = project(None, "");
    insta::assert_snapshot!(chock(
        &w,
        "org.toml",
        &["policy", "check", "secret.password.com.github"]
    ));
}
