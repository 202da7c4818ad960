//! Resolution across the project, the org bundle, the shipped defaults and the ratchet.

mod common;

use std::path::PathBuf;

use chock_policy::{
    BudgetConfig, DecidedBy, Decision, LimitsConfig, Policy, RatchetError, SubagentsConfig,
};
use common::{action, load, rules};

fn decide(policy: &Policy, name: &str) -> (Decision, String) {
    let v = policy.decide(&action(name));
    (v.decision, v.decided_by.to_string())
}

#[test]
fn the_most_specific_project_rule_wins_and_is_named() {
    let text = rules(&[
        ("net.fetch.*", "deny"),
        ("net.fetch.com.github.*", "ask"),
        ("net.fetch.com.github.api", "allow"),
        ("mcp.time.tool.*", "allow"),
    ]);
    let policy = load(Some(&text), None).unwrap();
    assert_eq!(
        decide(&policy, "net.fetch.com.github.api"),
        (
            Decision::Allow,
            "chock.toml:10 (rule `net.fetch.com.github.api`)".into()
        )
    );
    assert_eq!(
        decide(&policy, "net.fetch.com.github.raw"),
        (
            Decision::Ask,
            "chock.toml:6 (rule `net.fetch.com.github.*`)".into()
        )
    );
    assert_eq!(
        decide(&policy, "net.fetch.com.github"),
        (Decision::Deny, "chock.toml:2 (rule `net.fetch.*`)".into())
    );
    assert_eq!(decide(&policy, "mcp.time.tool.now").0, Decision::Allow);
    // mcp.time.network is not under mcp.time.tool.*: the shipped default asks.
    assert_eq!(
        decide(&policy, "mcp.time.network"),
        (Decision::Ask, "shipped default `mcp.*`".into())
    );
}

#[test]
fn a_project_rule_replaces_the_shipped_default_even_when_less_specific() {
    let policy = load(Some(&rules(&[("exec.*", "ask")])), None).unwrap();
    assert_eq!(
        decide(&policy, "exec.system.ls"),
        (Decision::Ask, "chock.toml:2 (rule `exec.*`)".into())
    );
    let policy = load(Some(&rules(&[("git.push", "allow")])), None).unwrap();
    assert_eq!(decide(&policy, "git.push").0, Decision::Allow);
}

#[test]
fn no_rule_and_no_default_is_ask() {
    let policy = load(Some(""), None).unwrap();
    assert_eq!(
        decide(&policy, "net.connect.com.example.22"),
        (Decision::Ask, "no rule and no shipped default".into())
    );
}

#[test]
fn the_org_decides_when_the_project_is_silent_and_wins_when_stricter() {
    let org = rules(&[
        ("net.fetch.com.evil.*", "deny"),
        ("net.fetch.org.rust-lang.*", "allow"),
        ("git.push", "deny"),
    ]);
    let project = rules(&[("net.fetch.*", "allow")]);
    let policy = load(Some(&project), Some(&org)).unwrap();
    assert_eq!(
        decide(&policy, "net.fetch.com.evil.www"),
        (
            Decision::Deny,
            "org bundle org.toml:2 (rule `net.fetch.com.evil.*`)".into()
        )
    );
    assert_eq!(decide(&policy, "net.fetch.com.example").0, Decision::Allow);
    assert_eq!(
        decide(&policy, "git.push"),
        (
            Decision::Deny,
            "org bundle org.toml:10 (rule `git.push`)".into()
        )
    );
    // The org may loosen a shipped default; the project then may not tighten-and-loosen around it.
    let policy = load(None, Some(&org)).unwrap();
    assert_eq!(
        decide(&policy, "net.fetch.org.rust-lang.static").0,
        Decision::Allow
    );
}

#[test]
fn a_project_may_tighten_an_org_rule() {
    let org = rules(&[("net.fetch.*", "ask")]);
    let project = rules(&[
        ("net.fetch.com.github", "deny"),
        ("net.fetch.*", "agent_then_human"),
    ]);
    let policy = load(Some(&project), Some(&org)).unwrap();
    assert_eq!(
        decide(&policy, "net.fetch.com.github"),
        (
            Decision::Deny,
            "chock.toml:2 (rule `net.fetch.com.github`)".into()
        )
    );
    assert_eq!(
        decide(&policy, "net.fetch.com.x").0,
        Decision::AgentThenHuman
    );
}

#[test]
fn org_conflict_uses_the_org_rule_covering_the_project_rule() {
    // The org carves allow out of a broad deny; a project rule inside the carve-out may say ask.
    let org = rules(&[("exec.*", "deny"), ("exec.system.*", "allow")]);
    let policy = load(Some(&rules(&[("exec.system.rm", "ask")])), Some(&org)).unwrap();
    assert_eq!(decide(&policy, "exec.system.rm").0, Decision::Ask);
    assert_eq!(decide(&policy, "exec.workspace.x").0, Decision::Deny);
    // But a project rule covered by the broad deny may not loosen it.
    let err = load(Some(&rules(&[("exec.workspace.*", "allow")])), Some(&org)).unwrap_err();
    assert!(err.to_string().contains("org conflict"), "{err}");
}

#[test]
fn ratchet_narrows_and_names_itself_and_widening_needs_the_act() {
    let mut policy = load(Some(&rules(&[("git.*", "allow")])), None).unwrap();
    assert_eq!(decide(&policy, "git.push").0, Decision::Allow);
    policy.restrict("git.push", Decision::Deny).unwrap();
    assert_eq!(
        decide(&policy, "git.push"),
        (Decision::Deny, "ratchet (restriction `git.push`)".into())
    );
    assert_eq!(decide(&policy, "git.commit").0, Decision::Allow);
    let err = policy.restrict("git.push", Decision::Ask).unwrap_err();
    assert!(matches!(err, RatchetError::Widening { .. }));
    assert!(err.to_string().contains("ratchet.widen_action"));
    // The act the caller must ask before widening is itself decided by the table (default ask).
    assert_eq!(decide(&policy, "ratchet.widen_action").0, Decision::Ask);
    policy.widen("git.*").unwrap();
    assert_eq!(decide(&policy, "git.push").0, Decision::Allow);
}

#[test]
fn a_ratchet_entry_looser_than_the_table_changes_nothing() {
    let mut policy = load(Some(&rules(&[("exec.*", "deny")])), None).unwrap();
    policy.restrict("exec.*", Decision::Ask).unwrap();
    assert_eq!(
        decide(&policy, "exec.system.ls"),
        (Decision::Deny, "chock.toml:2 (rule `exec.*`)".into())
    );
}

#[test]
fn sandbox_limits_and_subagents_are_read() {
    let text = "[sandbox]\nread = [\"/opt/toolchain\", \"~/.cargo/registry\"]\nwrite = [\"/tmp/cache\"]\nenv = [\"CARGO_HOME\"]\n\
                [limits]\ntimeout_secs = 30\n[subagents]\nmax_depth = 0\n";
    let policy = load(
        Some(text),
        Some("[limits]\nmemory_mb = 1024\n[subagents]\nmax_width = 2\n"),
    )
    .unwrap();
    let sandbox = policy.sandbox();
    assert_eq!(
        sandbox.read,
        vec![
            PathBuf::from("/opt/toolchain"),
            PathBuf::from("/nonexistent/home/.cargo/registry")
        ]
    );
    assert_eq!(sandbox.write, vec![PathBuf::from("/tmp/cache")]);
    assert_eq!(sandbox.env, vec!["CARGO_HOME".to_owned()]);
    assert_eq!(policy.limits().timeout_secs, 30);
    assert_eq!(
        policy.limits().memory_mb,
        1024,
        "the default is lowered to the org's ceiling"
    );
    assert_eq!(policy.limits().pids, 512);
    assert_eq!(policy.subagents().max_depth, 0);
    assert_eq!(policy.subagents().max_width, 2);
    assert_eq!(
        policy.project_file(),
        Some(std::path::Path::new("chock.toml"))
    );
}

#[test]
fn every_limit_and_subagent_field_is_read() {
    // One distinct value per field, compared as whole objects: a field the parser forgot to read would
    // keep its default and fail here (the TOML layer alone would still accept it).
    let text = "[limits]\ntimeout_secs = 11\nmemory_mb = 12\npids = 13\ncpu_percent = 14\n\
                file_size_mb = 15\nopen_files = 16\ntmp_size_mb = 17\n\
                [subagents]\nmax_depth = 1\nmax_width = 3\n";
    let limits = LimitsConfig {
        timeout_secs: 11,
        memory_mb: 12,
        pids: 13,
        cpu_percent: 14,
        file_size_mb: 15,
        open_files: 16,
        tmp_size_mb: 17,
    };
    let policy = load(Some(text), None).unwrap();
    assert_eq!(*policy.limits(), limits);
    assert_eq!(
        *policy.subagents(),
        SubagentsConfig {
            max_depth: 1,
            max_width: 3,
        }
    );
    // The same fields in the org bundle are ceilings, each below its default: every one is lowered.
    let policy = load(None, Some(text)).unwrap();
    assert_eq!(*policy.limits(), limits);
    assert_eq!(
        *policy.subagents(),
        SubagentsConfig {
            max_depth: 1,
            max_width: 3,
        }
    );
}

#[test]
fn decided_by_display_matches_the_contract() {
    let shown = DecidedBy::Project {
        file: "chock.toml".into(),
        line: 12,
        pattern: "exec.*".into(),
    }
    .to_string();
    assert_eq!(shown, "chock.toml:12 (rule `exec.*`)");
    let shown = DecidedBy::Org {
        file: "/etc/chock/org.toml".into(),
        line: 3,
        pattern: "net.*".into(),
    }
    .to_string();
    assert_eq!(shown, "org bundle /etc/chock/org.toml:3 (rule `net.*`)");
    assert_eq!(
        DecidedBy::ShippedDefault {
            pattern: "exec.*".into(),
            why: None
        }
        .to_string(),
        "shipped default `exec.*`"
    );
    assert_eq!(
        DecidedBy::NoRule.to_string(),
        "no rule and no shipped default"
    );
}

#[test]
fn a_policy_can_be_shared_between_threads() {
    fn shared<T: Send + Sync + Clone>() {}
    shared::<Policy>();
    shared::<chock_policy::Verdict>();
}

#[test]
fn a_budget_is_read_and_the_org_budget_is_a_ceiling() {
    let policy = load(Some("[budget]\nusd = 2.5\ntokens = 400000\n"), None).unwrap();
    assert_eq!(
        *policy.budget(),
        BudgetConfig {
            usd: Some(2.5),
            tokens: Some(400_000),
        }
    );
    // Whole dollars are dollars too.
    assert_eq!(
        load(Some("[budget]\nusd = 3\n"), None)
            .unwrap()
            .budget()
            .usd,
        Some(3.0)
    );
    // The stricter of the two files, field by field; a project without one gets the org's.
    let policy = load(
        Some("[budget]\nusd = 2.5\ntokens = 1000\n"),
        Some("[budget]\nusd = 1.0\n"),
    )
    .unwrap();
    assert_eq!(
        *policy.budget(),
        BudgetConfig {
            usd: Some(1.0),
            tokens: Some(1000),
        }
    );
    let policy = load(None, Some("[budget]\ntokens = 50\n")).unwrap();
    assert_eq!(policy.budget().tokens, Some(50));
    assert!(!load(None, None).unwrap().budget().is_set());
}
