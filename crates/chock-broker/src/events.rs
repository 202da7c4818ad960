//! The broker's log events: `net.decision` before every act, `net.connect` when a connection opens,
//! fails, and closes (with the bytes each way).

use std::net::{IpAddr, SocketAddr};

use chock_log::{EventKind, Log};
use serde_json::{Value, json};

use crate::error::BrokerError;

/// Which door an act came through, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `fetch_url`.
    Fetch,
    /// `web_search`.
    Search,
    /// The egress proxy serving a command in the sandbox.
    Proxy,
}

impl Door {
    fn as_str(self) -> &'static str {
        match self {
            Door::Fetch => "fetch_url",
            Door::Search => "web_search",
            Door::Proxy => "proxy",
        }
    }
}

/// The session log plus the call the events belong to.
#[derive(Debug, Clone)]
pub struct NetLog {
    log: Log,
    call_id: Option<String>,
}

impl NetLog {
    /// Events for `call_id` (or the session, with `None`).
    pub fn new(log: Log, call_id: Option<String>) -> Self {
        Self { log, call_id }
    }

    /// The underlying log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    fn append(&self, kind: EventKind, data: Value) -> Result<(), BrokerError> {
        self.log
            .append(kind, self.call_id.as_deref(), data)
            .map(|_| ())
            .map_err(|e| BrokerError::Log(e.to_string()))
    }

    /// The gate's answer for an act (logged before anything is resolved or opened).
    pub fn gate(
        &self,
        door: Door,
        action: &str,
        target: (&str, u16),
        answer: Result<&str, &str>,
    ) -> Result<(), BrokerError> {
        let (decision, by) = match answer {
            Ok(by) => ("allow", json!({ "decided_by": by })),
            Err(reason) => ("refuse", json!({ "reason": reason })),
        };
        let mut data = json!({
            "stage": "gate", "door": door.as_str(), "action": action,
            "host": target.0, "port": target.1, "decision": decision,
        });
        merge(&mut data, by);
        self.append(EventKind::NetDecision, data)
    }

    /// The address check of a resolved name (logged before connecting).
    pub fn addresses(
        &self,
        door: Door,
        target: (&str, u16),
        checked: &[IpAddr],
        refused: Option<&str>,
    ) -> Result<(), BrokerError> {
        let mut data = json!({
            "stage": "address", "door": door.as_str(), "host": target.0, "port": target.1,
            "addresses_checked": checked.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "decision": if refused.is_some() { "refuse" } else { "allow" },
        });
        if let Some(reason) = refused {
            merge(&mut data, json!({ "reason": reason }));
        }
        self.append(EventKind::NetDecision, data)
    }

    /// A connection to the pinned address opened.
    pub fn opened(
        &self,
        door: Door,
        target: (&str, u16),
        used: SocketAddr,
    ) -> Result<(), BrokerError> {
        self.append(
            EventKind::NetConnect,
            json!({ "phase": "open", "door": door.as_str(), "host": target.0, "port": target.1,
                    "address_used": used.to_string() }),
        )
    }

    /// No checked address accepted a connection.
    pub fn failed(&self, door: Door, target: (&str, u16), reason: &str) -> Result<(), BrokerError> {
        self.append(
            EventKind::NetConnect,
            json!({ "phase": "failed", "door": door.as_str(), "host": target.0, "port": target.1,
                    "reason": reason }),
        )
    }

    /// A connection closed, with the bytes each way.
    pub fn closed(
        &self,
        door: Door,
        target: (&str, u16),
        used: SocketAddr,
        bytes: (u64, u64),
    ) -> Result<(), BrokerError> {
        self.append(
            EventKind::NetConnect,
            json!({ "phase": "close", "door": door.as_str(), "host": target.0, "port": target.1,
                    "address_used": used.to_string(), "bytes_sent": bytes.0, "bytes_received": bytes.1 }),
        )
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}
