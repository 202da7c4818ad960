//! Rule patterns: an action name whose last label may be `*`.
//!
//! A final `*` matches one or more further labels, so `net.fetch.com.example.*` matches
//! `net.fetch.com.example.www` and `net.fetch.com.example.a.b` but not `net.fetch.com.example` itself.
//! Every other label is literal. Because a wildcard can only stand last, the set of actions a pattern
//! matches is "this exact name" or "every name under this prefix", and two patterns either do not
//! overlap at all or one's set lies inside the other's. That is what makes ambiguity and org conflicts
//! decidable at load time, exactly, with no search.

use std::cmp::Ordering;
use std::fmt;

use crate::action::{Action, ActionError, check_label};

/// A validated rule pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: String,
    /// The literal labels (everything before a final `*`).
    literals: Vec<String>,
    wildcard: bool,
}

/// How specific a pattern is: first the number of literal labels, then an exact name beats a
/// wildcard with the same number of literal labels. Larger is more specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Specificity {
    /// Labels that are not `*`.
    pub literal_labels: usize,
    /// True when the pattern has no `*`.
    pub exact: bool,
}

impl fmt::Display for Specificity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.exact { "exact" } else { "wildcard" };
        write!(f, "{} literal labels, {kind}", self.literal_labels)
    }
}

impl Pattern {
    /// Parses a pattern. `*` alone matches every action.
    pub fn parse(text: &str) -> Result<Pattern, ActionError> {
        if text.is_empty() {
            return Err(ActionError::Empty);
        }
        let labels: Vec<&str> = text.split('.').collect();
        let (body, wildcard) = match labels.split_last() {
            Some((&"*", rest)) => (rest, true),
            _ => (&labels[..], false),
        };
        for label in body {
            check_label(label)?;
        }
        Ok(Pattern {
            text: text.to_owned(),
            literals: body.iter().map(|s| (*s).to_owned()).collect(),
            wildcard,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The literal labels before any final `*`.
    pub fn literals(&self) -> &[String] {
        &self.literals
    }

    /// True when the last label is `*`.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// See [`Specificity`].
    pub fn specificity(&self) -> Specificity {
        Specificity {
            literal_labels: self.literals.len(),
            exact: !self.wildcard,
        }
    }

    /// True when `action` is in this pattern's set.
    pub fn matches(&self, action: &Action) -> bool {
        let labels: Vec<&str> = action.labels().collect();
        self.matches_labels(&labels)
    }

    pub(crate) fn matches_labels(&self, labels: &[&str]) -> bool {
        let n = self.literals.len();
        let prefix_ok = labels.len() >= n && self.literals.iter().zip(labels).all(|(a, b)| a == b);
        if self.wildcard {
            prefix_ok && labels.len() > n
        } else {
            prefix_ok && labels.len() == n
        }
    }

    /// True when every action `other` matches is also matched by `self`.
    pub fn contains(&self, other: &Pattern) -> bool {
        let (n, m) = (self.literals.len(), other.literals.len());
        if !self.wildcard {
            return !other.wildcard && self.literals == other.literals;
        }
        // self = L.*: other's names all start with L and are longer than L.
        let longer = m > n || (m == n && other.wildcard);
        longer && self.literals[..] == other.literals[..n]
    }

    /// True when at least one action matches both patterns. Because wildcards only stand last, two
    /// overlapping patterns are always nested: one contains the other.
    pub fn overlaps(&self, other: &Pattern) -> bool {
        self.contains(other) || other.contains(self)
    }

    /// Orders patterns by specificity only (see [`Specificity`]).
    pub fn cmp_specificity(&self, other: &Pattern) -> Ordering {
        self.specificity().cmp(&other.specificity())
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }
    fn a(s: &str) -> Action {
        Action::parse(s).unwrap()
    }

    #[test]
    fn final_star_matches_one_or_more_labels_and_nothing_else() {
        assert!(p("net.fetch.*").matches(&a("net.fetch.com")));
        assert!(p("net.fetch.*").matches(&a("net.fetch.com.example.www")));
        assert!(!p("net.fetch.*").matches(&a("net.fetch")));
        assert!(!p("net.fetch.*").matches(&a("net.fetchx.com")));
        assert!(p("*").matches(&a("git")));
        assert!(p("git.push").matches(&a("git.push")));
        assert!(!p("git.push").matches(&a("git.push.x")));
    }

    #[test]
    fn a_star_anywhere_but_last_is_malformed() {
        assert_eq!(
            Pattern::parse("mcp.*.network"),
            Err(ActionError::MisplacedWildcard)
        );
        assert_eq!(
            Pattern::parse("net.fetch.com.ex*"),
            Err(ActionError::MisplacedWildcard)
        );
        assert_eq!(Pattern::parse("*.*"), Err(ActionError::MisplacedWildcard));
        assert_eq!(Pattern::parse("a..*"), Err(ActionError::EmptyLabel));
    }

    #[test]
    fn containment_and_overlap_are_nesting() {
        assert!(p("a.*").contains(&p("a.b")));
        assert!(p("a.*").contains(&p("a.b.*")));
        assert!(p("a.*").contains(&p("a.*")));
        assert!(!p("a.*").contains(&p("a")));
        assert!(!p("a.b").contains(&p("a.*")));
        assert!(p("*").contains(&p("a")));
        assert!(!p("a.b.*").overlaps(&p("a.c.*")));
        assert!(!p("a.b").overlaps(&p("a.b.*")));
        assert!(p("a.b.*").overlaps(&p("a.*")));
    }

    #[test]
    fn specificity_counts_literals_then_prefers_exact() {
        assert!(p("a.b").specificity() > p("a.*").specificity());
        assert!(p("a.b").specificity() > p("a.b.*").specificity());
        assert!(p("a.b.c.*").specificity() > p("a.b").specificity());
        assert!(p("a.*").specificity() > p("*").specificity());
        assert_eq!(p("a.b").cmp_specificity(&p("c.d")), Ordering::Equal);
        assert_eq!(p("a.*").cmp_specificity(&p("c.*")), Ordering::Equal);
    }
}
