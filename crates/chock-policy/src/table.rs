//! One layer of rules (the shipped defaults, the org bundle or the project) and its resolution.

use std::path::PathBuf;

use crate::action::Action;
use crate::decision::Decision;
use crate::pattern::Pattern;

/// One `[[rule]]`, validated, remembering where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What the rule matches.
    pub pattern: Pattern,
    /// What it decides.
    pub decision: Decision,
    /// The optional `why = "…"` written beside it.
    pub why: Option<String>,
    /// The file it was read from.
    pub file: PathBuf,
    /// The 1-based line of its `action = …`.
    pub line: usize,
}

impl Rule {
    /// `file:line`, for naming the rule in messages.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// The rules of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleTable {
    rules: Vec<Rule>,
}

impl RuleTable {
    pub(crate) fn new(rules: Vec<Rule>) -> RuleTable {
        RuleTable { rules }
    }

    /// The rules in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The most specific rule matching `action`. Load refuses two equally specific rules with
    /// different decisions, so any tie left here is a repeat of the same decision; the first wins.
    pub fn most_specific(&self, action: &Action) -> Option<&Rule> {
        let labels: Vec<&str> = action.labels().collect();
        let mut best: Option<&Rule> = None;
        for rule in self
            .rules
            .iter()
            .filter(|r| r.pattern.matches_labels(&labels))
        {
            if best.is_none_or(|b| rule.pattern.specificity() > b.pattern.specificity()) {
                best = Some(rule);
            }
        }
        best
    }

    /// The most specific rule whose set contains every action `pattern` matches: the rule that
    /// decides the whole of `pattern` wherever no more specific rule inside it speaks.
    pub fn covering(&self, pattern: &Pattern) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for rule in self.rules.iter().filter(|r| r.pattern.contains(pattern)) {
            if best.is_none_or(|b| rule.pattern.specificity() > b.pattern.specificity()) {
                best = Some(rule);
            }
        }
        best
    }

    /// The first pair of rules that match the same actions with equal specificity and different
    /// decisions. Overlapping patterns are nested (see [`Pattern::overlaps`]), so equal specificity
    /// plus overlap means the same pattern written twice.
    pub fn first_ambiguous_pair(&self) -> Option<(&Rule, &Rule)> {
        for (i, later) in self.rules.iter().enumerate() {
            for earlier in &self.rules[..i] {
                if earlier.pattern.overlaps(&later.pattern)
                    && earlier.pattern.specificity() == later.pattern.specificity()
                    && earlier.decision != later.decision
                {
                    return Some((earlier, later));
                }
            }
        }
        None
    }
}
