//! [`Ended`]: how a session's last task, and so the session, ended, as its summary says it.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::log::EndReason;

/// How a session ended, as its summary (`session_ended`, `session.end`'s summary) says it. On the
/// wire it is one string: `done`, `max_tokens`, `refusal`, `max_turns`, `interrupted`,
/// `out_of_budget`, `closed`, `error: WHY`, or empty in a summary taken before the end. Every
/// front end reads it through this type, never by comparing the string; the CLI's exit status is
/// mapped from it in one place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Ended {
    /// Not yet: a summary taken while the session still runs.
    #[default]
    Open,
    /// The model answered without calling a tool.
    Done,
    /// The model's reply hit its token limit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// The turn limit was reached.
    MaxTurns,
    /// A client interrupted it.
    Interrupted,
    /// The next model call would have exceeded the session's budget.
    OutOfBudget,
    /// A session with no agent loop (`chock exec`) was closed by its command.
    Closed,
    /// An error ended it.
    Error(String),
    /// A word this reader does not know (a newer writer's), kept as written.
    Other(String),
}

impl Ended {
    /// The wire form.
    pub fn as_str(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            Ended::Open => "",
            Ended::Done => "done",
            Ended::MaxTokens => "max_tokens",
            Ended::Refusal => "refusal",
            Ended::MaxTurns => "max_turns",
            Ended::Interrupted => "interrupted",
            Ended::OutOfBudget => "out_of_budget",
            Ended::Closed => "closed",
            Ended::Error(why) => return Cow::Owned(format!("error: {why}")),
            Ended::Other(word) => word,
        })
    }

    /// Reads the wire form (an unknown word is [`Ended::Other`], not an error: readers tolerate
    /// newer writers).
    pub fn parse(text: &str) -> Ended {
        match text {
            "" => Ended::Open,
            "done" => Ended::Done,
            "max_tokens" => Ended::MaxTokens,
            "refusal" => Ended::Refusal,
            "max_turns" => Ended::MaxTurns,
            "interrupted" => Ended::Interrupted,
            "out_of_budget" => Ended::OutOfBudget,
            "closed" => Ended::Closed,
            other => match other.strip_prefix("error: ") {
                Some(why) => Ended::Error(why.to_string()),
                None => Ended::Other(other.to_string()),
            },
        }
    }

    /// Whether the session did what it was asked: the model finished its answer (`done`), or a
    /// session with no agent loop was closed by its command.
    pub fn is_success(&self) -> bool {
        matches!(self, Ended::Done | Ended::Closed)
    }

    /// The `session.end` reason this ending is logged under: a reply cut by its token limit or a
    /// refusal still ends the task (`done`); the others name themselves.
    pub fn reason(&self) -> Option<EndReason> {
        Some(match self {
            Ended::Open | Ended::Other(_) => return None,
            Ended::Done | Ended::MaxTokens | Ended::Refusal => EndReason::Done,
            Ended::MaxTurns => EndReason::MaxTurns,
            Ended::Interrupted => EndReason::Interrupted,
            Ended::OutOfBudget => EndReason::OutOfBudget,
            Ended::Closed => EndReason::Closed,
            Ended::Error(_) => EndReason::Error,
        })
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl Serialize for Ended {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for Ended {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Ended::parse(&text))
    }
}

impl schemars::JsonSchema for Ended {
    fn schema_name() -> Cow<'static, str> {
        "Ended".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "How the session ended: `done`, `max_tokens`, `refusal`, `max_turns`, \
                `interrupted`, `out_of_budget`, `closed`, `error: WHY`; empty before the end."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_keeps_its_wire_form() {
        for (ended, wire) in [
            (Ended::Open, ""),
            (Ended::Done, "done"),
            (Ended::MaxTokens, "max_tokens"),
            (Ended::Refusal, "refusal"),
            (Ended::MaxTurns, "max_turns"),
            (Ended::Interrupted, "interrupted"),
            (Ended::OutOfBudget, "out_of_budget"),
            (Ended::Closed, "closed"),
            (
                Ended::Error("the model is gone".into()),
                "error: the model is gone",
            ),
            (Ended::Other("later".into()), "later"),
        ] {
            let json = serde_json::to_value(&ended).unwrap();
            assert_eq!(json, serde_json::json!(wire));
            assert_eq!(serde_json::from_value::<Ended>(json).unwrap(), ended);
        }
    }

    #[test]
    fn only_done_and_closed_are_success_and_a_budget_stop_is_logged_as_one() {
        assert!(Ended::Done.is_success() && Ended::Closed.is_success());
        assert!(!Ended::OutOfBudget.is_success() && !Ended::MaxTokens.is_success());
        assert_eq!(Ended::OutOfBudget.reason(), Some(EndReason::OutOfBudget));
        assert_eq!(Ended::Refusal.reason(), Some(EndReason::Done));
    }
}
