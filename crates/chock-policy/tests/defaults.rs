//! Table-driven: every shipped default, and the acts deliberately left without one.

mod common;

use chock_policy::{DecidedBy, Decision, catalogue};
use common::{action, load};

/// (an action, the decision the shipped defaults give it, the row that decides it; None = no row).
const EXPECTED: &[(&str, Decision, Option<&str>)] = &[
    ("fs.read", Decision::Allow, Some("fs.read")),
    ("fs.write", Decision::Allow, Some("fs.write")),
    ("exec.system.ls", Decision::Allow, Some("exec.system.*")),
    (
        "exec.system.python3.12",
        Decision::Allow,
        Some("exec.system.*"),
    ),
    (
        "exec.workspace.build-sh",
        Decision::Allow,
        Some("exec.workspace.*"),
    ),
    ("exec.extra.cargo", Decision::Allow, Some("exec.extra.*")),
    (
        "exec.devshell.gcc",
        Decision::Allow,
        Some("exec.devshell.*"),
    ),
    (
        "exec.nix.store.gcc",
        Decision::Ask,
        Some("exec.nix.store.*"),
    ),
    ("nix.devshell", Decision::Allow, Some("nix.devshell")),
    ("nix.build", Decision::Ask, Some("nix.build")),
    ("exec.unparsed", Decision::Ask, None),
    ("net.fetch.com.github.api", Decision::Ask, None),
    ("net.connect.com.github.443", Decision::Ask, None),
    ("git.status", Decision::Allow, Some("git.status")),
    ("git.log", Decision::Allow, Some("git.log")),
    ("git.diff", Decision::Allow, Some("git.diff")),
    ("git.show", Decision::Allow, Some("git.show")),
    ("git.blame", Decision::Allow, Some("git.blame")),
    ("git.grep", Decision::Allow, Some("git.grep")),
    ("git.add", Decision::Allow, Some("git.add")),
    ("git.rm", Decision::Allow, Some("git.rm")),
    ("git.mv", Decision::Allow, Some("git.mv")),
    ("git.restore", Decision::Allow, Some("git.restore")),
    ("git.commit", Decision::Allow, Some("git.commit")),
    ("git.checkout", Decision::Allow, Some("git.checkout")),
    ("git.switch", Decision::Allow, Some("git.switch")),
    ("git.branch.list", Decision::Allow, Some("git.branch.list")),
    (
        "git.branch.create",
        Decision::Allow,
        Some("git.branch.create"),
    ),
    (
        "git.branch.delete",
        Decision::Allow,
        Some("git.branch.delete"),
    ),
    ("git.tag", Decision::Allow, Some("git.tag")),
    ("git.merge", Decision::Allow, Some("git.merge")),
    ("git.rebase", Decision::Allow, Some("git.rebase")),
    ("git.cherry_pick", Decision::Allow, Some("git.cherry_pick")),
    ("git.revert", Decision::Allow, Some("git.revert")),
    ("git.reset", Decision::Allow, Some("git.reset")),
    ("git.stash", Decision::Allow, Some("git.stash")),
    ("git.clean", Decision::Allow, Some("git.clean")),
    ("git.maintenance", Decision::Allow, Some("git.maintenance")),
    ("git.inspect", Decision::Allow, Some("git.inspect")),
    ("git.apply", Decision::Allow, Some("git.apply")),
    ("git.am", Decision::Allow, Some("git.am")),
    (
        "git.format_patch",
        Decision::Allow,
        Some("git.format_patch"),
    ),
    ("git.help", Decision::Allow, Some("git.help")),
    ("git.init", Decision::Allow, Some("git.init")),
    (
        "git.branch.rename",
        Decision::Allow,
        Some("git.branch.rename"),
    ),
    ("git.config.read", Decision::Allow, Some("git.config.read")),
    ("git.remote.list", Decision::Allow, Some("git.remote.list")),
    ("git.remote.add", Decision::Allow, Some("git.remote.add")),
    (
        "git.remote.set_url",
        Decision::Allow,
        Some("git.remote.set_url"),
    ),
    (
        "git.remote.rename",
        Decision::Allow,
        Some("git.remote.rename"),
    ),
    (
        "git.remote.remove",
        Decision::Allow,
        Some("git.remote.remove"),
    ),
    ("git.ls_remote", Decision::Ask, Some("git.ls_remote")),
    ("git.submodule", Decision::Ask, Some("git.submodule")),
    ("git.config", Decision::Ask, Some("git.config")),
    ("git.fetch", Decision::Ask, Some("git.fetch")),
    ("git.pull", Decision::Ask, Some("git.pull")),
    ("git.clone", Decision::Ask, Some("git.clone")),
    ("git.push", Decision::Ask, Some("git.push")),
    // No shipped row: a push to a host no remote of the host's configuration names needs a project or org
    // rule naming the host exactly (the host-side push resolution reads it).
    ("git.push.com.example", Decision::Ask, None),
    // Nor for a fetch or pull that would get a credential from such a host.
    ("git.fetch.com.example", Decision::Ask, None),
    ("git.unknown", Decision::Ask, Some("git.unknown")),
    ("workspace.apply", Decision::Ask, Some("workspace.apply")),
    ("workspace.adopt", Decision::Ask, Some("workspace.adopt")),
    (
        "ratchet.widen_action",
        Decision::Ask,
        Some("ratchet.widen_action"),
    ),
    ("web.search", Decision::Ask, Some("web.search")),
    ("subagent.spawn", Decision::Allow, Some("subagent.spawn")),
    ("subagent.take", Decision::Allow, Some("subagent.take")),
    (
        "secret.password.com.github",
        Decision::Ask,
        Some("secret.password.*"),
    ),
    ("memory.read", Decision::Allow, Some("memory.read")),
    ("memory.write", Decision::Ask, Some("memory.write")),
    ("mcp.time.tool.now", Decision::Ask, Some("mcp.*")),
    ("mcp.time.network", Decision::Ask, Some("mcp.*")),
    ("mcp.time.sampling", Decision::Ask, Some("mcp.*")),
    ("plugin.fmt.tool.run", Decision::Ask, Some("plugin.*")),
    ("plugin.fmt.network", Decision::Ask, Some("plugin.*")),
];

#[test]
fn every_shipped_default_decides_as_reviewed() {
    let policy = load(None, None).expect("no files at all loads");
    for (name, decision, row) in EXPECTED {
        let verdict = policy.decide(&action(name));
        assert_eq!(verdict.decision, *decision, "{name}");
        match row {
            Some(pattern) => match &verdict.decided_by {
                DecidedBy::ShippedDefault { pattern: p, why } => {
                    assert_eq!(p, pattern, "{name}");
                    assert!(
                        why.as_deref().is_some_and(|w| !w.is_empty()),
                        "{name}: every row says why"
                    );
                }
                other => panic!("{name}: decided by {other}"),
            },
            None => assert_eq!(verdict.decided_by, DecidedBy::NoRule, "{name}"),
        }
    }
}

#[test]
fn every_shipped_row_is_exercised_above() {
    let defaults = chock_policy::shipped_defaults().expect("the shipped defaults parse");
    for rule in defaults.rules() {
        assert!(
            EXPECTED
                .iter()
                .any(|(_, _, row)| *row == Some(rule.pattern.as_str())),
            "shipped row `{}` has no line in EXPECTED",
            rule.pattern
        );
    }
}

#[test]
fn every_catalogue_entry_is_exercised_above() {
    for entry in catalogue::CATALOGUE {
        let covered = EXPECTED
            .iter()
            .any(|(name, _, _)| catalogue::entry_for(&action(name)) == Some(entry));
        assert!(
            covered,
            "catalogue entry `{}` has no line in EXPECTED",
            entry.template
        );
    }
}

#[test]
fn the_three_acts_without_a_default_have_no_row_at_all() {
    let defaults = chock_policy::shipped_defaults().unwrap();
    for name in [
        "net.fetch.com.example",
        "net.connect.com.example.80",
        "exec.unparsed",
    ] {
        assert!(
            defaults.most_specific(&action(name)).is_none(),
            "{name} must fall through to ask"
        );
    }
}

#[test]
fn docs_policy_md_lists_exactly_the_shipped_defaults() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policy.md"))
        .expect("docs/policy.md");
    let section = doc
        .split("## Shipped defaults")
        .nth(1)
        .expect("a Shipped defaults section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let documented: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    let defaults = chock_policy::shipped_defaults().unwrap();
    assert_eq!(
        documented.len(),
        defaults.rules().len(),
        "one documented row per shipped row"
    );
    for (line, rule) in documented.iter().zip(defaults.rules()) {
        let expected = format!(
            "| `{}` | {} | {} |",
            rule.pattern,
            rule.decision,
            rule.why.as_deref().unwrap_or("")
        );
        assert_eq!(*line, expected);
    }
}
