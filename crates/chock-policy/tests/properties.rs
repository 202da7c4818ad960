//! Property tests: a more specific rule always wins; no project rule ever loosens an org decision;
//! the ratchet never widens.

mod common;

use chock_policy::{Action, Decision, Pattern, Policy};
use common::{load, rules};
use proptest::prelude::*;

/// Patterns under `net.fetch.` drawn from a tiny alphabet so that overlaps are frequent.
fn pattern() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(vec!["com", "org", "a", "b"]), 0..4),
        any::<bool>(),
    )
        .prop_map(|(labels, wildcard)| {
            let mut name = String::from("net.fetch");
            for l in &labels {
                name.push('.');
                name.push_str(l);
            }
            if wildcard || labels.is_empty() {
                name.push_str(".*");
            }
            name
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop::collection::vec(prop::sample::select(vec!["com", "org", "a", "b"]), 1..5)
        .prop_map(|labels| Action::parse(&format!("net.fetch.{}", labels.join("."))).unwrap())
}

fn decision() -> impl Strategy<Value = Decision> {
    prop::sample::select(Decision::ALL.to_vec())
}

fn table() -> impl Strategy<Value = Vec<(String, Decision)>> {
    prop::collection::vec((pattern(), decision()), 0..8)
}

fn text(rows: &[(String, Decision)]) -> String {
    let pairs: Vec<(&str, &str)> = rows.iter().map(|(p, d)| (p.as_str(), d.as_str())).collect();
    rules(&pairs)
}

fn most_specific(rows: &[(String, Decision)], action: &Action) -> Option<Decision> {
    rows.iter()
        .map(|(p, d)| (Pattern::parse(p).unwrap(), *d))
        .filter(|(p, _)| p.matches(action))
        .max_by_key(|(p, _)| p.specificity())
        .map(|(_, d)| d)
}

fn sample_actions() -> Vec<Action> {
    let mut out = Vec::new();
    let alphabet = ["com", "org", "a", "b"];
    for a in alphabet {
        out.push(Action::parse(&format!("net.fetch.{a}")).unwrap());
        for b in alphabet {
            out.push(Action::parse(&format!("net.fetch.{a}.{b}")).unwrap());
            for c in alphabet {
                out.push(Action::parse(&format!("net.fetch.{a}.{b}.{c}")).unwrap());
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever rules a table holds, a loaded table answers with its most specific matching rule,
    /// and every less specific matching rule is overridden.
    #[test]
    fn the_most_specific_rule_wins(rows in table(), action in action()) {
        let Ok(policy) = load(Some(&text(&rows)), None) else {
            // Refused tables must really be ambiguous: the same pattern with two decisions.
            let ambiguous = rows.iter().enumerate().any(|(i, (p, d))| rows[..i].iter().any(|(q, e)| p == q && d != e));
            prop_assert!(ambiguous);
            return Ok(());
        };
        let verdict = policy.decide(&action);
        match most_specific(&rows, &action) {
            Some(expected) => prop_assert_eq!(verdict.decision, expected),
            None => prop_assert_eq!(verdict.decision, Decision::Ask), // net.fetch has no shipped default
        }
    }

    /// No project table, whatever it says, ever gets a looser answer than the org bundle's.
    #[test]
    fn no_project_rule_loosens_an_org_decision(org in table(), project in table()) {
        let Ok(policy) = load(Some(&text(&project)), Some(&text(&org))) else { return Ok(()) };
        for action in sample_actions() {
            if let Some(org_decision) = most_specific(&org, &action) {
                let got = policy.decide(&action).decision;
                prop_assert!(!org_decision.is_stricter_than(got), "{action}: org {org_decision}, got {got}");
            }
        }
    }

    /// A project rule the load accepts never stands below the org rule covering it.
    #[test]
    fn accepted_project_rules_never_undercut_their_covering_org_rule(org in table(), project in table()) {
        let Ok(policy) = load(Some(&text(&project)), Some(&text(&org))) else { return Ok(()) };
        for rule in policy.project_rules().rules() {
            if let Some(cover) = policy.org_rules().covering(&rule.pattern) {
                prop_assert!(!cover.decision.is_stricter_than(rule.decision));
            }
        }
    }

    /// Whatever the agent asks of the ratchet, no answer ever becomes looser.
    #[test]
    fn the_ratchet_never_widens(rows in table(), steps in prop::collection::vec((pattern(), decision()), 0..10)) {
        let Ok(mut policy) = load(Some(&text(&rows)), None) else { return Ok(()) };
        let actions = sample_actions();
        let mut before: Vec<Decision> = actions.iter().map(|a| policy.decide(a).decision).collect();
        for (pattern, decision) in steps {
            let accepted = policy.restrict(&pattern, decision).is_ok();
            let after: Vec<Decision> = actions.iter().map(|a| policy.decide(a).decision).collect();
            for ((a, b), action) in before.iter().zip(&after).zip(&actions) {
                prop_assert!(!a.is_stricter_than(*b), "{action}: {a} became {b} after restrict({pattern}, {decision}) accepted={accepted}");
            }
            before = after;
        }
    }
}

#[test]
fn restrict_with_allow_is_refused_whatever_the_table() {
    let mut policy: Policy = load(None, None).unwrap();
    assert!(policy.restrict("fs.read", Decision::Allow).is_err());
}
