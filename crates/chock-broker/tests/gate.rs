//! The table-backed gate: allow with its reach, and every other decision a refusal.

use std::path::PathBuf;
use std::sync::Arc;

use chock_broker::{AllowScope, GateAnswer, TableGate, commands_may_connect};
use chock_policy::{Action, Policy, Source, Sources};

fn policy(text: &str) -> Arc<Policy> {
    let project = Source {
        path: PathBuf::from("/nonexistent/chock.toml"),
        text: text.to_owned(),
    };
    Arc::new(
        Policy::from_sources(Sources {
            project: Some(project),
            ..Sources::default()
        })
        .expect("policy"),
    )
}

#[test]
fn exact_rules_reach_further_than_wildcards_and_ask_or_deny_refuse() {
    let gate = TableGate::new(policy(
        r#"
[[rule]]
action = "net.fetch.test.site"
decision = "allow"

[[rule]]
action = "net.fetch.test.*"
decision = "allow"

[[rule]]
action = "net.fetch.test.bad"
decision = "deny"
"#,
    ));
    let scope = |host: &str| match gate.answer(&Action::net_fetch(host).expect("action")) {
        GateAnswer::Allow { scope, .. } => Ok(scope),
        GateAnswer::Refuse { reason } => Err(reason),
    };
    assert_eq!(scope("site.test"), Ok(AllowScope::ExactHost));
    assert_eq!(scope("other.test"), Ok(AllowScope::Pattern));
    let denied = scope("bad.test").expect_err("deny");
    assert!(
        denied.starts_with("denied by /nonexistent/chock.toml:11"),
        "{denied}"
    );
    let asked = scope("example.com").expect_err("no rule: ask, and nobody to ask");
    assert!(
        asked.contains("`ask` and nobody can be asked here"),
        "{asked}"
    );
}

#[test]
fn commands_get_the_proxy_only_when_some_rule_allows_a_connection() {
    let allow = |action: &str, decision: &str| {
        format!("[[rule]]\naction = \"{action}\"\ndecision = \"{decision}\"\n")
    };
    assert!(!commands_may_connect(&policy("")));
    assert!(!commands_may_connect(&policy(&allow(
        "net.fetch.*",
        "allow"
    ))));
    assert!(!commands_may_connect(&policy(&allow(
        "net.connect.com.example.443",
        "ask"
    ))));
    assert!(commands_may_connect(&policy(&allow(
        "net.connect.com.example.443",
        "allow"
    ))));
    assert!(commands_may_connect(&policy(&allow("net.*", "allow"))));
}

#[test]
fn a_live_gate_sees_the_ratchet_narrow() {
    let rule = "[[rule]]\naction = \"net.connect.org.example.443\"\ndecision = \"allow\"\n";
    let live = Arc::new(std::sync::RwLock::new((*policy(rule)).clone()));
    let gate = TableGate::live(live.clone());
    let action = Action::net_connect("example.org", 443).expect("action");
    assert!(matches!(gate.answer(&action), GateAnswer::Allow { .. }));
    live.write()
        .expect("lock")
        .restrict("net.connect.*", chock_policy::Decision::Deny)
        .expect("narrow");
    assert!(matches!(gate.answer(&action), GateAnswer::Refuse { .. }));
}
