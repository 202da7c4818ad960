//! The catalogue: every action name this build defines, in one table.
//!
//! A rule is only useful if some act is ever decided by its name, and a rule that matches nothing looks
//! exactly like a rule that allows. So a pattern that can match no entry here is refused at load, by
//! name. Each entry is a template: literal labels, plus placeholders in angle brackets:
//!
//! | placeholder | stands for |
//! |---|---|
//! | `<host>` | a reversed host: one or more labels of lower-case letters, digits, `-`, `_` |
//! | `<port>` | one label, a decimal port 0–65535 without leading zeros |
//! | `<program>`, `<tool>`, `<name>` | one or more labels (a program `python3.12` is two labels) |
//! | `<server>`, `<plugin>` | exactly one label |

use std::sync::OnceLock;

use crate::action::{Action, is_label_char};
use crate::pattern::Pattern;

/// One row of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The template, e.g. `net.connect.<host>.<port>`.
    pub template: &'static str,
    /// Why the act has its own name: what it does and what it can reach.
    pub why: &'static str,
}

/// Every action name this build defines.
pub const CATALOGUE: &[Entry] = &[
    // Running programs. The class says where the program was found; the exec tool classifies the path.
    e(
        "exec.system.<program>",
        "a program from the system's own directories, bound read-only into the sandbox",
    ),
    e(
        "exec.workspace.<program>",
        "a program inside the session's own workspace copy",
    ),
    e(
        "exec.extra.<program>",
        "a program under a path the project declared in [sandbox]",
    ),
    e(
        "exec.devshell.<program>",
        "a program from the dev shell closure the session started with",
    ),
    e(
        "exec.nix.store.<program>",
        "a nix store path the session did not start with",
    ),
    // Nix on the host, outside the sandbox (docs/nix.md).
    e(
        "nix.devshell",
        "evaluating and building the project's flake dev shell with nix on the host, at the session's first call",
    ),
    e(
        "nix.build",
        "building or fetching one more program the agent asked for with nix on the host (provision_program)",
    ),
    e(
        "exec.unparsed",
        "a program path that cannot be resolved lexically (`..`, a shell expansion), so no class fits",
    ),
    // Files, inside the sandbox's view.
    e("fs.read", "reading a file the sandbox can see"),
    e(
        "fs.write",
        "writing a file in the session's workspace or a declared write path",
    ),
    // The network, always through the host's broker.
    e(
        "net.fetch.<host>",
        "reading a URL on this host through the broker (host reversed: com.github.api)",
    ),
    e(
        "net.connect.<host>.<port>",
        "a raw connection to this host and port through the broker",
    ),
    // git, as classified by the git shim inside the sandbox.
    e("git.status", "reads the workspace repository"),
    e("git.log", "reads the workspace repository"),
    e("git.diff", "reads the workspace repository"),
    e("git.show", "reads the workspace repository"),
    e("git.blame", "reads the workspace repository"),
    e("git.grep", "reads the workspace repository"),
    e("git.add", "stages in the workspace repository"),
    e("git.rm", "removes files in the workspace repository"),
    e("git.mv", "moves files in the workspace repository"),
    e("git.restore", "restores files in the workspace repository"),
    e("git.commit", "records a commit in the workspace repository"),
    e(
        "git.checkout",
        "switches or restores in the workspace repository",
    ),
    e(
        "git.switch",
        "switches branches in the workspace repository",
    ),
    e("git.branch.list", "lists branches"),
    e(
        "git.branch.create",
        "creates a branch in the workspace repository",
    ),
    e(
        "git.branch.delete",
        "deletes a branch in the workspace repository",
    ),
    e(
        "git.tag",
        "creates or deletes a tag in the workspace repository",
    ),
    e("git.merge", "merges in the workspace repository"),
    e("git.rebase", "rewrites commits in the workspace repository"),
    e(
        "git.cherry_pick",
        "copies commits in the workspace repository",
    ),
    e(
        "git.revert",
        "records a reverting commit in the workspace repository",
    ),
    e(
        "git.reset",
        "moves a branch head in the workspace repository",
    ),
    e("git.stash", "stashes changes in the workspace repository"),
    e(
        "git.clean",
        "deletes untracked files in the workspace repository",
    ),
    e(
        "git.config",
        "changes the workspace repository's configuration (hooks, commands run later)",
    ),
    e(
        "git.remote",
        "changes which remotes the workspace repository names",
    ),
    e("git.fetch", "reaches another host to read from a remote"),
    e(
        "git.pull",
        "reaches another host to read from a remote, then merges",
    ),
    e("git.clone", "reaches another host to copy a repository"),
    e("git.push", "reaches another host and writes to a remote"),
    e("git.other", "a git subcommand this build does not classify"),
    // Acts that carry work out of the sandbox, or change what the session may do.
    e(
        "workspace.apply",
        "writes the session's reviewed changes into the real project",
    ),
    e(
        "workspace.adopt",
        "makes the session's workspace the real project",
    ),
    e(
        "policy.widen",
        "the harness asks to allow, for this session, an act the table refuses",
    ),
    e(
        "ratchet.widen_action",
        "the agent asks to undo a restriction it placed on itself",
    ),
    e(
        "web.search",
        "a search query leaves the host to a search engine",
    ),
    e(
        "subagent.spawn",
        "starts a child agent session, bounded by [subagents]",
    ),
    e(
        "subagent.take",
        "writes a finished child session's changes into this session's workspace",
    ),
    e(
        "secret.password.<name>",
        "hands a stored password to a call",
    ),
    // The agent's notes kept between sessions of a project (docs/memory.md).
    e(
        "memory.read",
        "reads the notes the agent kept in earlier sessions of this project",
    ),
    e(
        "memory.write",
        "writes a note that outlives the session, shown to later sessions of this project",
    ),
    // Tools served by others.
    e(
        "mcp.<server>.tool.<tool>",
        "one call of an MCP server's tool",
    ),
    e("mcp.<server>.network", "an MCP server reaching the network"),
    e(
        "mcp.<server>.sampling",
        "an MCP server asking Chock to call the model (charged to the session)",
    ),
    e(
        "plugin.<plugin>.tool.<tool>",
        "one call of a WebAssembly plugin's tool",
    ),
    e(
        "plugin.<plugin>.network",
        "a plugin importing Chock's fetch at all (each fetch is then its own net.fetch.<host>)",
    ),
];

const fn e(template: &'static str, why: &'static str) -> Entry {
    Entry { template, why }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(&'static str),
    /// Exactly one label of any allowed characters.
    One,
    /// One or more labels of any allowed characters.
    Many,
    /// One or more reversed host labels.
    Host,
    /// One decimal port label.
    Port,
}

impl Piece {
    /// Does this one label fit the piece?
    fn accepts(&self, label: &str) -> bool {
        match self {
            Piece::Literal(lit) => *lit == label,
            Piece::One | Piece::Many => !label.is_empty() && label.chars().all(is_label_char),
            Piece::Host => {
                !label.is_empty()
                    && label.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
            }
            Piece::Port => {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_digit())
                    && (label == "0" || !label.starts_with('0'))
                    && label.parse::<u16>().is_ok()
            }
        }
    }

    fn repeats(&self) -> bool {
        matches!(self, Piece::Many | Piece::Host)
    }
}

fn parse_template(template: &'static str) -> Vec<Piece> {
    template
        .split('.')
        .map(|label| match label {
            "<host>" => Piece::Host,
            "<port>" => Piece::Port,
            "<program>" | "<tool>" | "<name>" => Piece::Many,
            "<server>" | "<plugin>" => Piece::One,
            other => Piece::Literal(other),
        })
        .collect()
}

fn compiled() -> &'static [(Entry, Vec<Piece>)] {
    static COMPILED: OnceLock<Vec<(Entry, Vec<Piece>)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        CATALOGUE
            .iter()
            .map(|entry| (*entry, parse_template(entry.template)))
            .collect()
    })
}

/// Can a pattern made of `labels` (then a final `*` if `wildcard`) match some name of `pieces`?
fn fits(labels: &[&str], wildcard: bool, pieces: &[Piece]) -> bool {
    match (labels.split_first(), pieces.split_first()) {
        // The literals are used up: a wildcard needs at least one more label, which any piece can give.
        (None, _) => {
            if wildcard {
                !pieces.is_empty()
            } else {
                pieces.is_empty()
            }
        }
        (Some(_), None) => false,
        (Some((label, rest)), Some((piece, more))) => {
            piece.accepts(label)
                && (fits(rest, wildcard, more) || (piece.repeats() && fits(rest, wildcard, pieces)))
        }
    }
}

/// The catalogue entries `pattern` can match (empty: the pattern matches nothing this build defines).
pub fn entries_matched_by(pattern: &Pattern) -> Vec<&'static Entry> {
    let labels: Vec<&str> = pattern.literals().iter().map(String::as_str).collect();
    CATALOGUE
        .iter()
        .zip(compiled())
        .filter(|(_, (_, pieces))| fits(&labels, pattern.is_wildcard(), pieces))
        .map(|(entry, _)| entry)
        .collect()
}

/// True when `pattern` can match at least one action this build defines.
pub fn pattern_is_defined(pattern: &Pattern) -> bool {
    !entries_matched_by(pattern).is_empty()
}

/// The catalogue entry that defines `action`, if any.
pub fn entry_for(action: &Action) -> Option<&'static Entry> {
    let labels: Vec<&str> = action.labels().collect();
    CATALOGUE
        .iter()
        .zip(compiled())
        .find(|(_, (_, pieces))| fits(&labels, false, pieces))
        .map(|(entry, _)| entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ExecClass;

    fn defined(p: &str) -> bool {
        pattern_is_defined(&Pattern::parse(p).unwrap())
    }

    #[test]
    fn every_template_parses_into_known_pieces() {
        for entry in CATALOGUE {
            for label in entry.template.split('.') {
                let known = [
                    "<host>",
                    "<port>",
                    "<program>",
                    "<tool>",
                    "<name>",
                    "<server>",
                    "<plugin>",
                ];
                assert!(
                    !label.starts_with('<') || known.contains(&label),
                    "{}: unknown placeholder {label}",
                    entry.template
                );
                assert!(
                    label.starts_with('<') || crate::action::check_label(label).is_ok(),
                    "{label}"
                );
            }
            assert!(!entry.why.is_empty());
        }
    }

    #[test]
    fn the_issue_names_are_all_defined() {
        for p in [
            "exec.*",
            "exec.system.ls",
            "exec.workspace.*",
            "exec.extra.tool",
            "exec.devshell.*",
            "exec.nix.store.*",
            "exec.unparsed",
            "fs.read",
            "fs.write",
            "net.fetch.*",
            "net.fetch.com.example.*",
            "net.connect.com.github.443",
            "net.connect.*",
            "git.push",
            "git.commit",
            "git.branch.delete",
            "git.*",
            "workspace.apply",
            "workspace.adopt",
            "policy.widen",
            "ratchet.widen_action",
            "web.search",
            "subagent.spawn",
            "subagent.take",
            "secret.password.*",
            "secret.password.github",
            "memory.read",
            "memory.write",
            "memory.*",
            "mcp.time.tool.*",
            "mcp.time.tool.now",
            "mcp.time.network",
            "mcp.*",
            "plugin.fmt.tool.run",
            "plugin.fmt.network",
            "plugin.*",
            "*",
        ] {
            assert!(defined(p), "{p} should be defined");
        }
    }

    #[test]
    fn names_this_build_does_not_define_are_found() {
        for p in [
            "exec",
            "exec.unparsed.x",
            "exec.system",
            "fs.delete",
            "fs.read.*",
            "net.fetch",
            "net.fetch.com.GitHub",
            "net.connect.com.github",
            "net.connect.com.github.99999",
            "net.connect.com.github.0443",
            "git.pussh",
            "git.branch",
            "workspace.*.x",
            "mcp.time.tools.x",
            "mcp.a.b.tool.x",
            "mcp.time",
            "nix.shell",
            "file.write",
            "secret.password",
        ] {
            let Ok(pattern) = Pattern::parse(p) else {
                continue;
            };
            assert!(!pattern_is_defined(&pattern), "{p} should not be defined");
        }
    }

    #[test]
    fn constructed_actions_have_an_entry() {
        let actions = [
            Action::net_fetch("api.github.com").unwrap(),
            Action::net_connect("github.com", 22).unwrap(),
            Action::exec(ExecClass::Extra, "cargo").unwrap(),
            Action::exec(ExecClass::NixStore, "python3.12").unwrap(),
            Action::exec_unparsed(),
            Action::mcp_tool("time", "now").unwrap(),
            Action::mcp_network("time").unwrap(),
            Action::plugin_tool("fmt", "run").unwrap(),
            Action::git("branch.delete").unwrap(),
        ];
        for action in actions {
            assert!(entry_for(&action).is_some(), "{action}");
        }
        assert_eq!(
            entry_for(&Action::parse("net.connect.com.github.443").unwrap())
                .unwrap()
                .template,
            "net.connect.<host>.<port>"
        );
    }
}
