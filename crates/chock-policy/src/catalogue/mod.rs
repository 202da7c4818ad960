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

mod names;

pub use names::{CATALOGUE, Entry, PASSWORD_ALLOW, State};

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

/// The names `pattern` can match that some code asks today. Empty while [`entries_matched_by`] is not:
/// the rule loads but cannot take effect yet (every name it matches is [`State::Pending`]).
pub fn asked_entries_matched_by(pattern: &Pattern) -> Vec<&'static Entry> {
    entries_matched_by(pattern)
        .into_iter()
        .filter(|entry| entry.state == State::Asked)
        .collect()
}

/// What a rule's `allow` does for `entry` when it is not "the act goes ahead unasked": for
/// `secret.password.<host>` the grant is a password only a person has, so `allow` still puts the
/// prompt to a person ([`PASSWORD_ALLOW`]). `None`: `allow` means what it says.
pub fn allow_means(entry: &Entry) -> Option<&'static str> {
    (entry.template == "secret.password.<host>").then_some(PASSWORD_ALLOW)
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
            "ratchet.widen_action",
            "web.search",
            "subagent.spawn",
            "subagent.take",
            "secret.password.*",
            "secret.password.com.github",
            "secret.password.1.0.0.127",
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
            "policy.widen",
            "git.other",
            "git.remote",
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
