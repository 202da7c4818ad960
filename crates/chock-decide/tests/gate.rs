//! The table-backed gate: allow with its reach, and every other decision a refusal.

use std::path::PathBuf;
use std::sync::Arc;

use chock_decide::{AllowScope, GateAnswer, TableGate, commands_may_connect};
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

/// Only a row the project or the organisation wrote may reach an exactly-named host on loopback or a
/// private address. Under a wildcard `ask`, the agent may legally narrow its own host to an exact
/// `agent_review` (a ratchet row); approving that act must still reach public addresses only.
#[test]
fn only_a_project_or_org_row_naming_the_host_gives_exact_host_reach() {
    use chock_decide::scope_of;
    use chock_policy::Decision;
    let action = Action::net_connect("site.test", 443).expect("action");
    let mut wildcard =
        (*policy("[[rule]]\naction = \"net.connect.*\"\ndecision = \"ask\"\n")).clone();
    assert_eq!(
        scope_of(&wildcard.decide(&action), &action),
        AllowScope::Pattern
    );
    wildcard
        .restrict("net.connect.test.site.443", Decision::AgentReview)
        .expect("a legal narrowing");
    let narrowed = wildcard.decide(&action);
    assert!(
        matches!(narrowed.decided_by, chock_policy::DecidedBy::Ratchet { .. }),
        "{narrowed:?}"
    );
    assert_eq!(narrowed.decision, Decision::AgentReview);
    assert_eq!(scope_of(&narrowed, &action), AllowScope::Pattern);

    let exact = policy("[[rule]]\naction = \"net.connect.test.site.443\"\ndecision = \"ask\"\n");
    assert_eq!(
        scope_of(&exact.decide(&action), &action),
        AllowScope::ExactHost
    );
    // A shipped default naming its act exactly is nobody's word about this network either.
    let search = Action::parse("web.search").expect("action");
    let shipped = policy("").decide(&search);
    assert!(
        matches!(
            shipped.decided_by,
            chock_policy::DecidedBy::ShippedDefault { .. }
        ),
        "{shipped:?}"
    );
    assert_eq!(scope_of(&shipped, &search), AllowScope::Pattern);
}
