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
    /// A WebAssembly plugin's call ended: its limits, what it used, how it ended.
    PluginCall => "plugin.call",
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
    /// An MCP server started, was refused, failed or stopped.
    McpServer => "mcp.server",
    /// An MCP tool definition was pinned, or changed from what was approved.
    McpDefinition => "mcp.definition",
    /// An MCP server asked Chock to call the model.
    McpSampling => "mcp.sampling",
    /// Free text from the host (a repaired torn tail, an operator remark).
    Note => "note",
    /// The session moved to another process (`chock detach`): who let go, who took over.
    SessionHandover => "session.handover",
    /// The session ended (with why).
    SessionEnd => "session.end",
}

/// When an event of a kind is durable, relative to the append (`Log::record`) returning, and why.
///
/// Rule 3: the record of a decision is durable before its act happens. An event is
/// [`Durability::BeforeReturn`] when an act waits on it: something with an effect outside the log
/// (a command runs, a connection opens, a person is asked, the project is written, a sub-session
/// starts, the process ends) happens right after the append returns, so the line is written and
/// `fdatasync`ed first. The rest are [`Durability::Grouped`]: written at once, synced with the next
/// durable event or within a small bound. The log is one file appended in order, so syncing a
/// durable line also makes every grouped line before it durable; a crash can lose only grouped
/// lines written after the last durable one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written and synced before the append returns.
    BeforeReturn(&'static str),
    /// Written at once, synced later (with the next durable event, at the latest shortly after).
    Grouped(&'static str),
}

impl Durability {
    /// Whether the line is synced before the append returns.
    pub const fn before_return(self) -> bool {
        matches!(self, Durability::BeforeReturn(_))
    }

    /// Why the kind is durable before return, or why it may be grouped.
    pub const fn why(self) -> &'static str {
        match self {
            Durability::BeforeReturn(why) | Durability::Grouped(why) => why,
        }
    }
}

impl EventKind {
    /// Which kinds an act waits on (durable before the append returns) and which may be grouped
    /// into a later sync, each with its reason. The one place this is decided: the writer reads
    /// it, docs/log.md's event reference prints it, and a new kind must be placed here.
    pub const fn durability(self) -> Durability {
        use Durability::{BeforeReturn, Grouped};
        match self {
            EventKind::SessionStart => Grouped(
                "The session acts only once its header is durable, and every act waits on a durable event after it: that event's sync makes line 0 durable too, and waits for the new directory entries' sync, begun when the session was created. A crash before any act can lose a session that did nothing.",
            ),
            EventKind::TurnStart => Grouped(
                "Bookkeeping: nothing outside the log happens because a turn began; the turn's first act begins with its own durable event.",
            ),
            EventKind::TurnEnd => Grouped(
                "Bookkeeping: a turn ending starts no act; what follows (another turn, `session.end`) is logged on its own.",
            ),
            EventKind::ModelRequest => Grouped(
                "The harness's own traffic to its configured provider, not an act the policy decides; it is synced within the grouping bound, long before a reply comes back, and every act the reply asks for waits on a durable `decision`.",
            ),
            EventKind::ModelResponse => Grouped(
                "Records what came back (tokens, cost); the acts it asks for each wait on a durable `decision`, which syncs it too.",
            ),
            EventKind::ModelRetry => Grouped(
                "Records a retry of the provider request; nothing but the same request waits on it.",
            ),
            EventKind::ToolCall => Grouped(
                "The act asked for is written before it is decided; every act waits on its `decision` (or `approval.*`), which is durable and syncs this earlier line with it, so a crash still never leaves an act without the call it answers.",
            ),
            EventKind::Decision => BeforeReturn(
                "Rule 3: the decision is durable before its act happens (or is refused).",
            ),
            EventKind::ApprovalAsk => BeforeReturn(
                "A person or a reviewer is shown the question next: the question and its id are on disk before anyone can answer it.",
            ),
            EventKind::ApprovalAnswer => BeforeReturn(
                "The act goes ahead (or not) on this answer: it is durable before the act, like the decision.",
            ),
            EventKind::ToolResult => Grouped(
                "Records what the model will be told, after the act already happened; it reaches the model only in the next `model.request`, itself grouped, and a resumed session answers a call whose result was lost.",
            ),
            EventKind::CommandResult => Grouped(
                "The command already ran and its decision was durable before it; nothing waits on its result but the `tool.result` that follows.",
            ),
            EventKind::PluginCall => Grouped(
                "The plugin already ran and every act it used was decided, durably, before it; nothing waits on its end but the `tool.result` that follows.",
            ),
            EventKind::SessionSpawn => BeforeReturn(
                "A sub-session is started next; its header names this session back, so the parent's record of it comes first.",
            ),
            EventKind::AgentComplete => BeforeReturn(
                "It ends a child's claim on the budget: the unspent slice returns to the parent on it, and a resumed parent reads it to know what it already handed out.",
            ),
            EventKind::WorkspaceApply => BeforeReturn(
                "Written before any byte of the real project changes: the record is what `chock undo` reverts from.",
            ),
            EventKind::WorkspaceAdopt => BeforeReturn(
                "Written before the workspace becomes the project: the act cannot be undone without it.",
            ),
            EventKind::SessionImported => BeforeReturn(
                "Rare; written after the transcript's copy is on disk, so the log never names a copy that is not there.",
            ),
            EventKind::NetDecision => BeforeReturn(
                "Rule 3 for the network broker: the connection is made only after its decision is durable.",
            ),
            EventKind::NetConnect => Grouped(
                "Records a connection the durable `net.decision` already allowed (opened, failed, closed); nothing waits on it.",
            ),
            EventKind::McpServer => BeforeReturn(
                "A server's start is recorded before Chock speaks to it or offers its tools; a refusal before the session goes on without it.",
            ),
            EventKind::McpDefinition => BeforeReturn(
                "A pinned hash is what later definitions are checked against, and a changed one is refused: both are recorded before the tool is offered or refused.",
            ),
            EventKind::McpSampling => BeforeReturn(
                "The prompt a server sends the model is recorded before the model is called.",
            ),
            EventKind::Note => Grouped(
                "Free text: no act waits on a remark (a torn tail's bytes are saved and synced to `log.jsonl.torn` before its note).",
            ),
            EventKind::SessionHandover => BeforeReturn(
                "The new owner acts on the session right after it (a question is put again, the next turn starts): the record of who let go and who took over is durable first.",
            ),
            EventKind::SessionEnd => BeforeReturn(
                "The last line: the workspace is removed and the process exits right after, and `sessions list` reads it to say `ended`.",
            ),
        }
    }
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

    #[test]
    fn every_act_waits_on_a_durable_event() {
        use EventKind::*;
        for kind in [
            Decision,
            ApprovalAsk,
            ApprovalAnswer,
            NetDecision,
            WorkspaceApply,
            WorkspaceAdopt,
            SessionSpawn,
            SessionEnd,
        ] {
            assert!(kind.durability().before_return(), "{kind} must be durable");
        }
        // A tool call is synced by the durable decision every act waits on, and the session's
        // header by the first durable event after it (the writer joins the sync of its names).
        for kind in [
            SessionStart,
            ToolCall,
            TurnStart,
            TurnEnd,
            ModelRequest,
            ModelResponse,
            ModelRetry,
            ToolResult,
            CommandResult,
            PluginCall,
            NetConnect,
            Note,
        ] {
            assert!(!kind.durability().before_return(), "{kind} may be grouped");
        }
        for kind in EventKind::ALL {
            assert!(kind.durability().why().ends_with('.'), "{kind}: say why");
        }
    }
}
