//! One payload type per event kind of the session log, and [`EventData`], the union a reader
//! parses a line's `data` into.
//!
//! Optional fields are left out when empty, so a line says only what happened. Readers tolerate
//! fields they do not know (a newer writer); [`EventData::parse_exact`] is the strict form the
//! tests use: a payload whose re-serialisation differs from the line lost a field, which means a
//! writer wrote something the type does not describe.

mod acts;
mod handover;
mod mcp;
mod net;
mod plugin;
mod session;
mod stop;

pub use acts::*;
pub use handover::*;
pub use mcp::*;
pub use net::*;
pub use plugin::*;
pub use session::*;
pub use stop::StopReason;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::EventKind;

/// A payload of one event kind.
pub trait Payload: Serialize + DeserializeOwned + schemars::JsonSchema {
    /// The kind this payload is written under.
    const KIND: EventKind;
}

/// A line's `data` that does not fit its kind's type.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Not of the kind's shape.
    #[error("`{kind}` data does not fit its type: {source}")]
    Shape {
        /// The kind the line is written under.
        kind: EventKind,
        /// Why the data does not parse as that kind's type.
        #[source]
        source: serde_json::Error,
    },
    /// Of the shape, but with fields the type does not describe (strict parse only).
    #[error(
        "`{kind}` data has fields its type does not describe: wrote {written}, the type keeps {kept}"
    )]
    Extra {
        /// The kind the line is written under.
        kind: EventKind,
        /// The data as written (JSON).
        written: String,
        /// What the type keeps of it (JSON), to compare.
        kept: String,
    },
}

macro_rules! payloads {
    ($( $variant:ident ( $ty:ty ), )*) => {
        /// The payload of one event, of whichever kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventData {
            $( #[allow(missing_docs)] $variant($ty), )*
        }

        $(
            impl Payload for $ty {
                const KIND: EventKind = EventKind::$variant;
            }

            impl From<$ty> for EventData {
                fn from(payload: $ty) -> Self {
                    EventData::$variant(payload)
                }
            }
        )*

        impl EventData {
            /// The kind this payload is written under.
            pub fn kind(&self) -> EventKind {
                match self {
                    $( EventData::$variant(_) => EventKind::$variant, )*
                }
            }

            /// The `data` object written for this payload.
            pub fn to_value(&self) -> Value {
                let value = match self {
                    $( EventData::$variant(p) => serde_json::to_value(p), )*
                };
                value.expect("payloads serialise to JSON objects")
            }

            /// Parses a line's `data` as its kind's payload, tolerating unknown fields.
            pub fn parse(kind: EventKind, data: &Value) -> Result<EventData, PayloadError> {
                let shape = |source| PayloadError::Shape { kind, source };
                Ok(match kind {
                    $( EventKind::$variant => EventData::$variant(
                        serde_json::from_value(data.clone()).map_err(shape)?,
                    ), )*
                })
            }

            /// The JSON Schema of one kind's payload (its doc comments are the descriptions).
            pub fn schema(kind: EventKind) -> schemars::Schema {
                match kind {
                    $( EventKind::$variant => schemars::schema_for!($ty), )*
                }
            }
        }
    };
}

payloads! {
    SessionStart(SessionStart),
    TurnStart(TurnStart),
    TurnEnd(TurnEnd),
    ModelRequest(ModelRequest),
    ModelResponse(ModelResponse),
    ModelRetry(ModelRetry),
    ToolCall(ToolCall),
    Decision(Decision),
    ApprovalAsk(ApprovalAsk),
    ApprovalAnswer(ApprovalAnswer),
    ToolResult(ToolResult),
    CommandResult(CommandResult),
    PluginCall(PluginCall),
    SessionSpawn(SessionSpawn),
    AgentComplete(AgentComplete),
    WorkspaceApply(WorkspaceApply),
    WorkspaceAdopt(WorkspaceAdopt),
    SessionImported(SessionImported),
    NetDecision(NetDecision),
    NetConnect(NetConnect),
    McpServer(McpServer),
    McpDefinition(McpDefinition),
    McpSampling(McpSampling),
    Note(Note),
    SessionHandover(SessionHandover),
    SessionEnd(SessionEnd),
}

impl EventData {
    /// [`EventData::parse`], and also refuses `data` with a field the type does not keep: the
    /// check that every writer writes only what its type describes.
    pub fn parse_exact(kind: EventKind, data: &Value) -> Result<EventData, PayloadError> {
        let parsed = Self::parse(kind, data)?;
        let kept = parsed.to_value();
        if without_nulls(&kept) != without_nulls(data) {
            return Err(PayloadError::Extra {
                kind,
                written: data.to_string(),
                kept: kept.to_string(),
            });
        }
        Ok(parsed)
    }
}

/// `value` with object members that are `null` left out (an absent optional field and a null one
/// mean the same).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
