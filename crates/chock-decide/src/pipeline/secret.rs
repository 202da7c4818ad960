//! A secret asked of the person for one act (git's password for an approved push, `chock askpass`):
//! put to the people like a free question, added to the log's redaction the moment it arrives and
//! before anything about it is written, never written itself, and wiped from memory when dropped.

use super::Pipeline;
use crate::error::DecideError;

/// A secret a person typed. Its text is overwritten when it is dropped; `Debug` never shows it.
pub struct Secret(String);

impl Secret {
    /// The text, for the one program it is meant for.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret(text)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        // Keeps the writes from being optimised away as dead stores.
        std::hint::black_box(&bytes);
    }
}

impl Pipeline {
    /// Asks the people for a secret (`text` says what for and is shown as is): logged as
    /// `approval.ask` and `approval.answer` like [`Pipeline::ask_person`], except that the answer's
    /// text is added to the log's redaction before the answer is logged, and the logged answer
    /// carries no text at all. `Ok(None)`: nobody answered, which the caller takes as a refusal;
    /// `Err`: among others, a secret too short for the redaction to cover, which is never handed out.
    pub async fn ask_secret(
        &self,
        call_id: Option<&str>,
        text: &str,
    ) -> Result<Option<(String, Secret)>, DecideError> {
        let (question, answered) = self.put_free_question(call_id, text, true).await?;
        let answered = answered.map(|(by, text)| (by, Secret(text)));
        // Redacted from every later event (git echoing it, an error quoting it) before the answer
        // is logged. A secret the funnel cannot cover (too short to redact without mangling the
        // log) is not handed out: the answer is logged, textless, and the caller gets the refusal.
        let covered = match &answered {
            Some((_, secret)) => self.log.add_secret(secret.expose()),
            None => Ok(()),
        };
        self.record_free_answer(call_id, question, answered.as_ref().map(|(by, _)| by), None)?;
        covered?;
        Ok(answered)
    }
}
