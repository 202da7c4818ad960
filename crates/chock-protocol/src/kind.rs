//! The kinds of event a session log records. Each has one payload type in [`crate::log`]; the
//! table of their fields in docs/log.md is generated from those types.

use std::fmt;
use std::str::FromStr;

macro_rules! event_kinds {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// What an event records. Serialised as its dotted name (`tool.call`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum EventKind {
            $( $(#[$doc])* $variant, )*
        }

        impl EventKind {
            /// Every kind, in the order of docs/log.md's table.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The dotted name written in `kind`.
            pub const fn as_str(self) -> &'static str {
                match self { $(EventKind::$variant => $name,)* }
            }
        }

        impl FromStr for EventKind {
            type Err = UnknownKind;
            fn from_str(s: &str) -> Result<Self, UnknownKind> {
                match s {
                    $($name => Ok(EventKind::$variant),)*
                    other => Err(UnknownKind(other.to_owned())),
                }
            }
        }
    };
}

event_kinds! {
    /// Line 0 of every log: who, where, which version.
    SessionStart => "session.start",
    /// The agent loop begins a turn.
    TurnStart => "turn.start",
    /// A turn ended (with why).
    TurnEnd => "turn.end",
    /// A request is about to go to the model.
    ModelRequest => "model.request",
    /// The model answered (tokens and cost).
    ModelResponse => "model.response",
    /// A request to the model is being retried.
    ModelRetry => "model.retry",
    /// The model asked for a tool call.
    ToolCall => "tool.call",
    /// The policy table decided an act (with what decided it).
    Decision => "decision",
    /// A person (or a reviewing agent) is asked to approve an act.
    ApprovalAsk => "approval.ask",
    /// The answer to an approval (a timeout is a refusal).
    ApprovalAnswer => "approval.answer",
    /// A tool call finished: what the model was told.
    ToolResult => "tool.result",
    /// A confined command ended, or never ran: what the sandbox reported.
    CommandResult => "command.result",
    /// A sub-session was started.
    SessionSpawn => "session.spawn",
    /// The agent declared the task complete.
    AgentComplete => "agent.complete",
    /// Selected workspace changes were written into the real project.
    WorkspaceApply => "workspace.apply",
    /// The workspace was adopted as the project.
    WorkspaceAdopt => "workspace.adopt",
    /// Events were imported from another session.
    SessionImported => "session.imported",
    /// The network broker decided a destination.
    NetDecision => "net.decision",
    /// The network broker opened a connection (to the pinned address).
    NetConnect => "net.connect",
    /// Free text from the host (a repaired torn tail, an operator remark).
    Note => "note",
    /// The session ended (with why).
    SessionEnd => "session.end",
}

/// A `kind` string this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown event kind `{0}`")]
pub struct UnknownKind(pub String);

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for EventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>().unwrap(), *kind);
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), *kind);
        }
        assert_eq!(
            "tool.invented".parse::<EventKind>(),
            Err(UnknownKind("tool.invented".into()))
        );
    }
}
