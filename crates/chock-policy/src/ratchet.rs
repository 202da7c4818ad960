//! The ratchet: a session layer the agent adds to (`restrict_self`) and that only narrows.
//!
//! Each entry is a pattern and a decision. Every entry matching an action applies, and the strictest
//! wins, so adding an entry can never make any answer looser: the ratchet narrows by construction.
//! A call that *asks* to loosen (an `allow`, or a decision looser than an entry that already covers the
//! pattern) is refused with an error that names `ratchet.widen_action`, the act that must be asked.
//! [`Ratchet::widen`] removes entries; the caller may use it only after the table (or a person) allowed
//! `ratchet.widen_action`. This crate cannot see that answer, so the rule is the caller's to keep.

use crate::action::{Action, ActionError};
use crate::catalogue;
use crate::decision::Decision;
use crate::pattern::Pattern;

/// Why the ratchet refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RatchetError {
    /// The pattern is not well formed.
    #[error("malformed action pattern `{pattern}`: {reason}")]
    Malformed {
        /// The pattern given.
        pattern: String,
        /// What is wrong with it.
        reason: ActionError,
    },
    /// The pattern matches no action this build defines.
    #[error("`{0}` matches no action this build defines")]
    Undefined(String),
    /// The change would loosen what the ratchet already decides.
    #[error(
        "restricting `{pattern}` to `{decision}` would widen {existing}; the ratchet only narrows: ask \
         `ratchet.widen_action` to widen it"
    )]
    Widening {
        /// The pattern given.
        pattern: String,
        /// The decision asked for.
        decision: Decision,
        /// The stricter restriction it would loosen.
        existing: String,
    },
    /// The widening would remove a restriction this session inherited from the session that
    /// spawned it: a child can only narrow further.
    #[error(
        "`{inherited}` was inherited from the parent session, and a child session cannot widen it"
    )]
    Inherited {
        /// The inherited restriction's pattern.
        inherited: String,
    },
}

/// The session layer of restrictions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ratchet {
    entries: Vec<(Pattern, Decision)>,
    /// Restrictions inherited from a parent session: they bind like the others, and no widening
    /// removes them.
    floor: Vec<(Pattern, Decision)>,
}

fn parse(pattern: &str) -> Result<Pattern, RatchetError> {
    let parsed = Pattern::parse(pattern).map_err(|reason| RatchetError::Malformed {
        pattern: pattern.to_owned(),
        reason,
    })?;
    if !catalogue::pattern_is_defined(&parsed) {
        return Err(RatchetError::Undefined(pattern.to_owned()));
    }
    Ok(parsed)
}

impl Ratchet {
    /// Adds a restriction. Refuses `allow` (it cannot narrow anything) and a decision looser than an
    /// entry that already covers every action of `pattern`.
    pub fn restrict(&mut self, pattern: &str, decision: Decision) -> Result<(), RatchetError> {
        let parsed = parse(pattern)?;
        if decision == Decision::Allow {
            return Err(RatchetError::Widening {
                pattern: pattern.to_owned(),
                decision,
                existing: "the table's answer (`allow` narrows nothing)".to_owned(),
            });
        }
        if let Some((p, d)) = self
            .entries
            .iter()
            .find(|(p, d)| p.contains(&parsed) && d.is_stricter_than(decision))
        {
            return Err(RatchetError::Widening {
                pattern: pattern.to_owned(),
                decision,
                existing: format!("the ratchet's `{d}` for `{p}`"),
            });
        }
        self.entries.push((parsed, decision));
        Ok(())
    }

    /// Adds a restriction inherited from the session that spawned this one (its ratchet at the
    /// spawn): it binds like any entry, and [`Ratchet::widen`] never removes it. `allow` is
    /// refused (it narrows nothing).
    pub fn inherit(&mut self, pattern: &str, decision: Decision) -> Result<(), RatchetError> {
        let parsed = parse(pattern)?;
        if decision == Decision::Allow {
            return Err(RatchetError::Widening {
                pattern: pattern.to_owned(),
                decision,
                existing: "the table's answer (`allow` narrows nothing)".to_owned(),
            });
        }
        if !self.floor.contains(&(parsed.clone(), decision)) {
            self.floor.push((parsed, decision));
        }
        Ok(())
    }

    /// Removes every entry whose pattern lies inside `pattern`, returning them. Only after
    /// `ratchet.widen_action` was allowed. Refused when an inherited restriction lies inside it.
    pub fn widen(&mut self, pattern: &str) -> Result<Vec<(Pattern, Decision)>, RatchetError> {
        let parsed = parse(pattern)?;
        if let Some((p, _)) = self
            .floor
            .iter()
            .find(|(p, _)| parsed.contains(p) || p.contains(&parsed))
        {
            return Err(RatchetError::Inherited {
                inherited: p.to_string(),
            });
        }
        let (removed, kept) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|(p, _)| parsed.contains(p));
        self.entries = kept;
        Ok(removed)
    }

    /// The strictest entry matching `action`.
    pub fn strictest(&self, action: &Action) -> Option<(&Pattern, Decision)> {
        let mut best: Option<(&Pattern, Decision)> = None;
        for (p, d) in self
            .floor
            .iter()
            .chain(&self.entries)
            .filter(|(p, _)| p.matches(action))
        {
            if best.is_none_or(|(_, b)| d.is_stricter_than(b)) {
                best = Some((p, *d));
            }
        }
        best
    }

    /// The entries in the order they were added (the inherited ones are [`Ratchet::inherited`]).
    pub fn entries(&self) -> &[(Pattern, Decision)] {
        &self.entries
    }

    /// The restrictions inherited from a parent session, in order.
    pub fn inherited(&self) -> &[(Pattern, Decision)] {
        &self.floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restrict_narrows_and_refuses_to_widen() {
        let mut r = Ratchet::default();
        r.restrict("net.*", Decision::Deny).unwrap();
        let err = r.restrict("net.fetch.*", Decision::Ask).unwrap_err();
        assert!(
            err.to_string().contains("ask `ratchet.widen_action`"),
            "{err}"
        );
        let err = r.restrict("git.push", Decision::Allow).unwrap_err();
        assert!(matches!(err, RatchetError::Widening { .. }));
        r.restrict("exec.*", Decision::Ask).unwrap();
        r.restrict("exec.system.rm", Decision::Deny).unwrap();
        let rm = Action::parse("exec.system.rm").unwrap();
        assert_eq!(r.strictest(&rm).map(|(_, d)| d), Some(Decision::Deny));
        assert!(matches!(
            r.restrict("nix.shell", Decision::Deny),
            Err(RatchetError::Undefined(_))
        ));
        assert!(matches!(
            r.restrict("a.*.b", Decision::Deny),
            Err(RatchetError::Malformed { .. })
        ));
    }

    #[test]
    fn an_inherited_restriction_binds_and_cannot_be_widened() {
        let mut r = Ratchet::default();
        r.inherit("exec.*", Decision::Deny).unwrap();
        let rm = Action::parse("exec.system.rm").unwrap();
        assert_eq!(r.strictest(&rm).map(|(_, d)| d), Some(Decision::Deny));
        assert!(matches!(
            r.widen("exec.*"),
            Err(RatchetError::Inherited { .. })
        ));
        assert!(matches!(
            r.widen("exec.system.rm"),
            Err(RatchetError::Inherited { .. })
        ));
        assert!(matches!(r.widen("*"), Err(RatchetError::Inherited { .. })));
        assert_eq!(r.strictest(&rm).map(|(_, d)| d), Some(Decision::Deny));
        r.restrict("net.*", Decision::Deny).unwrap();
        assert_eq!(r.widen("net.*").unwrap().len(), 1);
    }

    #[test]
    fn widen_removes_only_entries_inside_the_pattern() {
        let mut r = Ratchet::default();
        r.restrict("exec.system.*", Decision::Deny).unwrap();
        r.restrict("net.*", Decision::Deny).unwrap();
        let removed = r.widen("exec.*").unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(r.entries().len(), 1);
        assert!(
            r.widen("net.fetch.*").unwrap().is_empty(),
            "net.* is not inside net.fetch.*"
        );
    }
}
