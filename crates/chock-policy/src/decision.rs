//! The five answers a rule can give, and their strictness order.
//!
//! The order is what keeps the layers honest: an organisation's answer can only be made stricter by a
//! project, and the session ratchet can only make any answer stricter. "Stricter" is one total order so
//! that "the stricter of two answers" is always defined.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What the table says about one act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The act runs with no question.
    Allow,
    /// The act never runs.
    Deny,
    /// A person is asked; nobody answering is a refusal.
    Ask,
    /// A reviewer model answers instead of a person.
    AgentReview,
    /// A reviewer model answers first, and then a person must also say yes.
    AgentThenHuman,
}

impl Decision {
    /// Every decision, loosest first.
    pub const ALL: [Decision; 5] = [
        Decision::Allow,
        Decision::Ask,
        Decision::AgentReview,
        Decision::AgentThenHuman,
        Decision::Deny,
    ];

    /// The rank in the strictness order `Deny > AgentThenHuman > AgentReview > Ask > Allow`.
    /// Kept private so the order is only ever compared through the methods below.
    fn rank(self) -> u8 {
        match self {
            Decision::Allow => 0,
            Decision::Ask => 1,
            Decision::AgentReview => 2,
            Decision::AgentThenHuman => 3,
            Decision::Deny => 4,
        }
    }

    /// True when `self` refuses more than `other` (moving toward allow is loosening).
    pub fn is_stricter_than(self, other: Decision) -> bool {
        self.rank() > other.rank()
    }

    /// The stricter of two decisions (either one when they are equal).
    pub fn stricter(self, other: Decision) -> Decision {
        if other.is_stricter_than(self) {
            other
        } else {
            self
        }
    }

    /// The name used in chock.toml (`allow`, `deny`, `ask`, `agent_review`, `agent_then_human`).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Ask => "ask",
            Decision::AgentReview => "agent_review",
            Decision::AgentThenHuman => "agent_then_human",
        }
    }

    /// Reads a decision as written in chock.toml; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == name)
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_deny_then_agent_then_human_then_agent_review_then_ask_then_allow() {
        use Decision::*;
        let chain = [Deny, AgentThenHuman, AgentReview, Ask, Allow];
        for (i, a) in chain.iter().enumerate() {
            for (j, b) in chain.iter().enumerate() {
                assert_eq!(a.is_stricter_than(*b), i < j, "{a} vs {b}");
            }
        }
        assert_eq!(Allow.stricter(Deny), Deny);
        assert_eq!(Ask.stricter(Allow), Ask);
    }

    #[test]
    fn names_round_trip() {
        for d in Decision::ALL {
            assert_eq!(Decision::from_name(d.as_str()), Some(d));
            let json = serde_json_like(d);
            assert_eq!(json, d.as_str());
        }
        assert_eq!(Decision::from_name("Allow"), None);
    }

    fn serde_json_like(d: Decision) -> String {
        // serde's snake_case renaming must agree with as_str; toml serialises a bare value in a table.
        #[derive(Serialize)]
        struct W {
            d: Decision,
        }
        let text = toml::to_string(&W { d }).expect("serialise");
        text.trim()
            .trim_start_matches("d = ")
            .trim_matches('"')
            .to_owned()
    }
}
