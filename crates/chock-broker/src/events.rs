//! The broker's log events: `net.decision` before every act, `net.connect` when a connection opens,
//! fails, and closes (with the bytes each way).

use std::net::{IpAddr, SocketAddr};

use chock_log::{EventData, Log};
use chock_protocol::log::{NetConnect, NetDecision, NetVerdict};

use crate::error::BrokerError;

/// Which door an act came through, for the log (the protocol's type).
pub use chock_protocol::log::Door;

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

    fn record(&self, payload: impl Into<EventData>) -> Result<(), BrokerError> {
        self.log
            .record(self.call_id.as_deref(), payload)
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
        let (decision, decided_by, reason) = match answer {
            Ok(by) => (NetVerdict::Allow, Some(by.to_string()), None),
            Err(reason) => (NetVerdict::Refuse, None, Some(reason.to_string())),
        };
        self.record(NetDecision::Gate {
            door,
            action: action.to_string(),
            host: target.0.to_string(),
            port: target.1,
            decision,
            decided_by,
            reason,
        })
    }

    /// The address check of a resolved name (logged before connecting).
    pub fn addresses(
        &self,
        door: Door,
        target: (&str, u16),
        checked: &[IpAddr],
        refused: Option<&str>,
    ) -> Result<(), BrokerError> {
        self.record(NetDecision::Address {
            door,
            host: target.0.to_string(),
            port: target.1,
            addresses_checked: checked.iter().map(ToString::to_string).collect(),
            decision: if refused.is_some() {
                NetVerdict::Refuse
            } else {
                NetVerdict::Allow
            },
            reason: refused.map(str::to_string),
        })
    }

    /// A connection to the pinned address opened.
    pub fn opened(
        &self,
        door: Door,
        target: (&str, u16),
        used: SocketAddr,
    ) -> Result<(), BrokerError> {
        self.record(NetConnect::Open {
            door,
            host: target.0.to_string(),
            port: target.1,
            address_used: used.to_string(),
        })
    }

    /// No checked address accepted a connection.
    pub fn failed(&self, door: Door, target: (&str, u16), reason: &str) -> Result<(), BrokerError> {
        self.record(NetConnect::Failed {
            door,
            host: target.0.to_string(),
            port: target.1,
            reason: reason.to_string(),
        })
    }

    /// A connection closed, with the bytes each way.
    pub fn closed(
        &self,
        door: Door,
        target: (&str, u16),
        used: SocketAddr,
        bytes: (u64, u64),
    ) -> Result<(), BrokerError> {
        self.record(NetConnect::Close {
            door,
            host: target.0.to_string(),
            port: target.1,
            address_used: used.to_string(),
            bytes_sent: bytes.0,
            bytes_received: bytes.1,
        })
    }
}
