//! The writer's state under its mutex: the chain's head, the file (once made), and the steps
//! every append shares: refusing a poisoned log, settling a new session's files, rendering a line.

use std::fs::File;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Made, State};
use crate::clock::now_rfc3339;
use crate::line::{render_line, sha256_hex};
use crate::{EventKind, LogError};

impl State {
    /// Refuses a log that a failed write, sync or making of its files poisoned.
    pub(super) fn usable(&self, path: &Path) -> Result<(), LogError> {
        match &self.poisoned {
            Some(reason) => Err(LogError::Poisoned {
                path: path.to_owned(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Waits for a new session's files (if they are still being made) and takes them over. If
    /// they could not be made the log is poisoned: no line after line 0 can chain onto a file
    /// that does not hold it.
    pub(super) fn settle(&mut self, path: &Path) -> Result<(), LogError> {
        let Some(making) = self.making.take() else {
            return Ok(());
        };
        let made = making.join().unwrap_or_else(|_| {
            Err(LogError::io(
                "create",
                path,
                std::io::Error::other("the thread making the session's files panicked"),
            ))
        });
        match made {
            Ok(Made { file, lock, names }) => {
                self.file = Some(file);
                self.lock = Some(lock);
                self.names = names;
                Ok(())
            }
            Err(e) => {
                self.poisoned = Some(format!("the session's files could not be made: {e}"));
                Err(e)
            }
        }
    }

    /// The log file, its making settled first.
    pub(super) fn file_mut(&mut self, path: &Path) -> Result<&mut File, LogError> {
        self.settle(path)?;
        self.usable(path)?;
        self.file.as_mut().ok_or_else(|| LogError::Poisoned {
            path: path.to_owned(),
            reason: "the log has no open file".into(),
        })
    }

    /// The next line: `data` and `call_id` through the redaction funnel, chained onto the head.
    pub(super) fn render(
        &self,
        kind: EventKind,
        call_id: Option<&str>,
        data: Value,
    ) -> Result<(u64, Vec<u8>), LogError> {
        let data = match self.redactor.redact_value(data) {
            Value::Object(map) => Value::Object(map),
            Value::Null => Value::Object(Map::new()),
            other => json!({ "value": other }),
        };
        let call_id = call_id.map(|c| self.redactor.redact_str(c));
        let seq = self.next_seq;
        let line = render_line(
            seq,
            &now_rfc3339(),
            kind,
            call_id.as_deref(),
            &self.prev,
            &data,
        )
        .map_err(|source| LogError::Serialize {
            kind: kind.as_str(),
            source,
        })?;
        Ok((seq, line))
    }

    /// Moves the head past `line`, written at `seq`.
    pub(super) fn chain(&mut self, seq: u64, line: &[u8]) {
        self.prev = sha256_hex(line);
        self.len += line.len() as u64;
        self.next_seq = seq + 1;
    }
}
