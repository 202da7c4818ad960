//! Every kind of bad input is refused with file:line:column, what is wrong, and the offending text.

mod common;

use std::path::PathBuf;

use chock_policy::{ErrorKind, Policy, Presence, Sources};
use common::{load, source};

fn project_error(text: &str) -> String {
    load(Some(text), None)
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn malformed_toml() {
    let err = project_error("[[rule]]\naction = \"git.push\ndecision = \"ask\"\n");
    assert_eq!(
        err,
        "chock.toml:2:19: invalid basic string, expected `\"`: `action = \"git.push`"
    );
    let err = project_error("[[rule]\n");
    assert_eq!(
        err,
        "chock.toml:1:8: unclosed array table, expected `]`: `[[rule]`"
    );
}

#[test]
fn unknown_field_in_a_rule_names_the_field() {
    let err = project_error("[[rule]]\naction = \"git.push\"\ndecison = \"ask\"\n");
    assert!(
        err.starts_with("chock.toml:3:1: unknown field `decison`"),
        "{err}"
    );
    assert!(err.ends_with("`decison`"), "{err}");
}

#[test]
fn unknown_top_level_table() {
    let err = project_error("[rules]\n");
    assert!(
        err.starts_with("chock.toml:1:2: unknown field `rules`"),
        "{err}"
    );
}

#[test]
fn unknown_field_in_sandbox_and_limits() {
    let err = project_error("[sandbox]\nreads = [\"/opt\"]\n");
    assert!(
        err.starts_with("chock.toml:2:1: unknown field `reads`"),
        "{err}"
    );
    let err = project_error("[limits]\ntimeout = 5\n");
    assert!(
        err.starts_with("chock.toml:2:1: unknown field `timeout`"),
        "{err}"
    );
    let err = project_error("[subagents]\ndepth = 5\n");
    assert!(
        err.starts_with("chock.toml:2:1: unknown field `depth`"),
        "{err}"
    );
}

#[test]
fn unknown_decision() {
    let err = project_error("\n[[rule]]\naction = \"git.push\"\ndecision = \"alow\"\n");
    assert_eq!(
        err,
        "chock.toml:4:12: unknown decision (expected allow, deny, ask, agent_review or agent_then_human): `alow`"
    );
}

#[test]
fn missing_decision() {
    let err = project_error("[[rule]]\naction = \"git.push\"\n");
    assert!(err.contains("missing field `decision`"), "{err}");
    assert!(err.starts_with("chock.toml:1:"), "{err}");
}

#[test]
fn malformed_action_name() {
    let err = project_error("[[rule]]\naction = \"mcp.*.network\"\ndecision = \"ask\"\n");
    assert_eq!(
        err,
        "chock.toml:2:10: malformed action name: a `*` may only stand alone as the last label: `mcp.*.network`"
    );
    let err = project_error("[[rule]]\naction = \"net..fetch\"\ndecision = \"ask\"\n");
    assert!(
        err.starts_with(
            "chock.toml:2:10: malformed action name: an action name cannot hold an empty label"
        ),
        "{err}"
    );
    let err = project_error("[[rule]]\naction = \"exec.system.a b\"\ndecision = \"ask\"\n");
    assert!(err.contains("label `a b` holds ` `"), "{err}");
}

#[test]
fn an_action_this_build_does_not_define() {
    let err = project_error("[[rule]]\naction = \"git.pussh\"\ndecision = \"deny\"\n");
    assert!(
        err.starts_with("chock.toml:2:10: this pattern matches no action this build defines"),
        "{err}"
    );
    assert!(err.ends_with(": `git.pussh`"), "{err}");
}

#[test]
fn ambiguous_pair_names_both_rules() {
    let text = "[[rule]]\naction = \"net.fetch.*\"\ndecision = \"allow\"\n\n[[rule]]\naction = \"net.fetch.*\"\ndecision = \"deny\"\n";
    let err = project_error(text);
    assert_eq!(
        err,
        "chock.toml:6:10: ambiguous: the rule at chock.toml:2 (`net.fetch.*`) says `allow` for the same actions, and \
         this rule says `deny`: `net.fetch.*`"
    );
}

#[test]
fn the_same_rule_twice_with_the_same_decision_is_not_ambiguous() {
    let text = "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n";
    load(Some(text), None).unwrap();
}

#[test]
fn org_conflict_names_both_rules() {
    let org = "[[rule]]\naction = \"net.fetch.*\"\ndecision = \"deny\"\n";
    let project = "\n[[rule]]\naction = \"net.fetch.com.github\"\ndecision = \"allow\"\n";
    let err = load(Some(project), Some(org)).unwrap_err().to_string();
    assert_eq!(
        err,
        "chock.toml:3:10: org conflict: the org bundle's rule at org.toml:2 (`net.fetch.*`) decides `deny` for these \
         actions, and a project rule cannot loosen it to `allow`: `net.fetch.com.github`"
    );
}

#[test]
fn errors_in_the_org_bundle_name_the_org_file() {
    let err = load(
        None,
        Some("[[rule]]\naction = \"git.push\"\ndecision = \"nope\"\n"),
    )
    .unwrap_err();
    assert_eq!(err.file, PathBuf::from("org.toml"));
    assert_eq!((err.line, err.column), (3, 12));
}

#[test]
fn bad_sandbox_paths_and_env_names() {
    let cases = [
        (
            "[sandbox]\nread = [\"/\"]\n",
            "chock.toml:2:9: sandbox path refused: is the whole filesystem: `/`",
        ),
        (
            "[sandbox]\nwrite = [\"/opt/ok\", \"~/\"]\n",
            "chock.toml:2:21: sandbox path refused: is or contains the home directory /nonexistent/home: `~/`",
        ),
        (
            "[sandbox]\nread = [\"/proc/1\"]\n",
            "chock.toml:2:9: sandbox path refused: is under /proc, which the sandbox builds itself: `/proc/1`",
        ),
        (
            "[sandbox]\nread = [\"rel\"]\n",
            "chock.toml:2:9: sandbox path refused: must be absolute or start with `~/`: `rel`",
        ),
        (
            "[sandbox]\nwrite = [\"/nonexistent/proj/target\"]\n",
            "chock.toml:2:10: sandbox path refused: overlaps the real project /nonexistent/proj, which is changed only \
             through a reviewed apply: `/nonexistent/proj/target`",
        ),
        (
            "[sandbox]\nenv = [\"CARGO_HOME\", \"LD_PRELOAD\"]\n",
            "chock.toml:2:22: sandbox env name refused: `LD_PRELOAD` makes the loader or a shell run code the call did \
             not name: `LD_PRELOAD`",
        ),
        (
            "[sandbox]\nread = [\"~/.local/share\"]\n",
            "chock.toml:2:9: sandbox path refused: overlaps Chock's own directory /nonexistent/home/.local/share/chock \
             (stored keys, the seal key, session logs, provider configuration, the daemon's socket), which nothing \
             inside the sandbox may see: `~/.local/share`",
        ),
        (
            "[sandbox]\nwrite = [\"/nonexistent/xdg-state/chock/sessions\"]\n",
            "chock.toml:2:10: sandbox path refused: overlaps Chock's own directory /nonexistent/xdg-state/chock \
             (stored keys, the seal key, session logs, provider configuration, the daemon's socket), which nothing \
             inside the sandbox may see: `/nonexistent/xdg-state/chock/sessions`",
        ),
        (
            "[sandbox]\nread = [\"/opt/cache/bin\"]\nwrite = [\"/opt/cache\"]\n",
            "chock.toml:2:9: sandbox path refused: lies under the write path /opt/cache (sandbox.write), where a \
             confined process could replace it with a link to anywhere on the host; declare only the outer path: `/opt/cache/bin`",
        ),
        (
            "[sandbox]\nwrite = [\"/opt/cache\", \"/opt/cache/inner\"]\n",
            "chock.toml:2:24: sandbox path refused: lies under the write path /opt/cache (sandbox.write), where a \
             confined process could replace it with a link to anywhere on the host; declare only the outer path: `/opt/cache/inner`",
        ),
        (
            "[sandbox]\nforbid = [\"/srv\"]\n",
            "chock.toml:2:10: sandbox path refused: `forbid` belongs in the org bundle: `[\"/srv\"]`",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(project_error(text), expected);
    }
}

#[test]
fn the_policy_file_itself_cannot_be_a_sandbox_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chock.toml");
    let text = format!("[sandbox]\nread = [\"{}\"]\n", file.display());
    std::fs::write(&file, &text).unwrap();
    let err = Policy::from_sources(Sources {
        project: Some(source(file.to_str().unwrap(), &text)),
        project_dir: Some(dir.path().to_path_buf()),
        ..Sources::default()
    })
    .unwrap_err();
    assert!(
        matches!(*err.kind, ErrorKind::SandboxPath(ref why) if why.contains("policy file")),
        "{err}"
    );
    assert_eq!((err.line, err.column), (2, 9));
}

#[test]
fn org_forbidden_paths_bind_the_project() {
    let org = "[sandbox]\nforbid = [\"/srv/secrets\"]\n";
    let err = load(Some("[sandbox]\nread = [\"/srv\"]\n"), Some(org))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "chock.toml:2:9: sandbox path refused: overlaps /srv/secrets, which the org bundle forbids at org.toml:2: `/srv`"
    );
    let err = load(None, Some("[sandbox]\nread = [\"/srv\"]\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "org.toml:2:8: sandbox path refused: the org bundle may only `forbid` paths"
        ),
        "{err}"
    );
}

#[test]
fn limits_out_of_range_or_above_the_org_ceiling() {
    let err = project_error("[limits]\npids = 0\n");
    assert_eq!(
        err,
        "chock.toml:2:8: limit refused: must be at least 1: `0`"
    );
    let err = project_error("[limits]\npids = -3\n");
    assert!(err.starts_with("chock.toml:2:8: "), "{err}");
    let err = load(
        Some("[limits]\nmemory_mb = 9000\n"),
        Some("[limits]\nmemory_mb = 2048\n"),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "chock.toml:2:13: limit refused: `memory_mb` = 9000 is above the org bundle's ceiling 2048 at org.toml:2: `9000`"
    );
}

#[test]
fn an_unreadable_named_org_bundle_fails_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("org.toml");
    let err = chock_policy::read_source(&missing, Presence::Required).unwrap_err();
    assert!(matches!(*err.kind, ErrorKind::Io(_)));
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot read the file", missing.display()))
    );
    assert!(
        chock_policy::read_source(&missing, Presence::Optional)
            .unwrap()
            .is_none()
    );
    // An optional file that is a dangling symlink is an error, not an absent file.
    std::os::unix::fs::symlink(dir.path().join("gone.toml"), &missing).unwrap();
    let err = chock_policy::read_source(&missing, Presence::Optional).unwrap_err();
    assert!(matches!(*err.kind, ErrorKind::Io(_)), "{err}");
}

#[test]
fn a_project_table_linked_from_outside_the_project_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "[[rule]]\naction = \"hunter2\"\n").unwrap();
    let link = project.join("chock.toml");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let err = Policy::load(&project).unwrap_err();
    assert_eq!(err.file, link);
    assert!(
        matches!(*err.kind, ErrorKind::Io(ref why) if why.contains("outside the project")),
        "{err}"
    );
    assert!(!err.to_string().contains("hunter2"), "{err}");

    // A dangling link is refused too, rather than read as "no chock.toml".
    std::fs::remove_file(&secret).unwrap();
    let err = Policy::load(&project).unwrap_err();
    assert!(err.to_string().contains("leads nowhere"), "{err}");

    // A link to a file inside the project is the project's own table.
    std::fs::create_dir(project.join("config")).unwrap();
    std::fs::write(
        project.join("config/chock.toml"),
        "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("config/chock.toml", &link).unwrap();
    let policy = Policy::load(&project).unwrap();
    assert_eq!(policy.project_rules().rules().len(), 1);
}

#[test]
fn a_budget_that_is_not_positive_is_refused_where_it_is_written() {
    let err = project_error("[budget]\nusd = -1.0\n");
    assert_eq!(
        err,
        "chock.toml:2:7: limit refused: usd must be a positive number of dollars: `-1.0`"
    );
    let err = project_error("[budget]\ntokens = 0\n");
    assert!(
        err.starts_with("chock.toml:2:10: limit refused: tokens must be at least 1"),
        "{err}"
    );
    let err = project_error("[budget]\ndollars = 1\n");
    assert!(err.contains("unknown field `dollars`"), "{err}");
}

#[test]
fn sandbox_isolation_is_process_or_microvm_and_a_bad_value_names_the_field() {
    let policy = load(Some("[sandbox]\nisolation = \"microvm\"\n"), None).unwrap();
    assert_eq!(policy.sandbox().isolation, chock_policy::Isolation::Microvm);
    let policy = load(Some("[sandbox]\nread = []\n"), None).unwrap();
    assert_eq!(policy.sandbox().isolation, chock_policy::Isolation::Process);
    let err = project_error("[sandbox]\nisolation = \"vm\"\n");
    assert!(
        err.starts_with("chock.toml:2:13: unknown `[sandbox] isolation` (expected \"process\""),
        "{err}"
    );
    assert!(err.ends_with(": `vm`"), "{err}");
}

#[test]
fn sandbox_snapshots_need_a_microvm_and_a_bad_one_names_the_field() {
    let policy = load(
        Some("[sandbox]\nisolation = \"microvm\"\nsnapshots = true\n"),
        None,
    )
    .unwrap();
    assert!(policy.sandbox().snapshots);
    let policy = load(Some("[sandbox]\nisolation = \"microvm\"\n"), None).unwrap();
    assert!(!policy.sandbox().snapshots);
    let err = project_error("[sandbox]\nsnapshots = true\n");
    assert!(
        err.starts_with("chock.toml:2:13: `[sandbox] snapshots = true` needs `isolation"),
        "{err}"
    );
    let err = project_error("[sandbox]\nisolation = \"microvm\"\nsnapshots = \"yes\"\n");
    assert!(
        err.starts_with("chock.toml:3:13: invalid type: string \"yes\", expected a boolean"),
        "{err}"
    );
}
