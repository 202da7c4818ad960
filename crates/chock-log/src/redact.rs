//! The redaction funnel: every event passes through it before any byte reaches the disk.

use serde_json::{Map, Value};

/// Shorter secrets are refused: replacing a 3-character string everywhere would mangle the
/// log (every `the`, every number) while hiding nothing worth hiding.
pub const MIN_SECRET_LEN: usize = 6;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The secrets known to one session, longest first so a secret that contains another is
/// replaced whole.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Adds a secret. Returns false (and adds nothing) when it is shorter than
    /// [`MIN_SECRET_LEN`] characters; the caller turns that into an error.
    pub fn add(&mut self, secret: &str) -> bool {
        if secret.chars().count() < MIN_SECRET_LEN {
            return false;
        }
        if !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_owned());
            self.secrets
                .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        }
        true
    }

    /// How many secrets are known.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// True when no secret is known.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Replaces every known secret inside `text`.
    ///
    /// Every occurrence of every secret is found in the original text first and the union of
    /// those spans is replaced. Replacing one secret at a time would leak: when two secrets
    /// overlap in the text (`…key-A` running into `B…`), replacing the first would cut the
    /// second short and leave its tail readable.
    pub fn redact_str(&self, text: &str) -> String {
        let mut spans: Vec<(usize, usize)> = self
            .secrets
            .iter()
            .flat_map(|secret| {
                text.match_indices(secret.as_str())
                    .map(|(at, found)| (at, at + found.len()))
            })
            .collect();
        if spans.is_empty() {
            return text.to_owned();
        }
        spans.sort_unstable();
        // Overlapping spans become one; touching ones stay two, as two secrets side by side.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match merged.last_mut() {
                Some(last) if start < last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (start, end) in merged {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = end;
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Replaces every known secret in every string of `value`, object keys included, at any
    /// depth. A number whose digits hold a secret (a PIN, an account number passed as a JSON
    /// number) becomes a redacted string: it would otherwise reach the disk as written.
    /// Booleans and nulls are left alone.
    pub fn redact_value(&self, value: Value) -> Value {
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.redact_str(&s)),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    out.insert(self.redact_str(&k), self.redact_value(v));
                }
                Value::Object(out)
            }
            Value::Number(n) => {
                let digits = n.to_string();
                let redacted = self.redact_str(&digits);
                if redacted == digits {
                    Value::Number(n)
                } else {
                    Value::String(redacted)
                }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_secrets_are_refused() {
        let mut r = Redactor::default();
        assert!(!r.add("abc12"));
        assert!(r.is_empty());
        assert!(r.add("abc123"));
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn a_secret_inside_a_larger_string_at_any_depth_is_replaced() {
        let mut r = Redactor::default();
        assert!(r.add("sk-live-0123456789"));
        let v = json!({
            "argv": ["curl", "-H", "Authorization: Bearer sk-live-0123456789"],
            "env": {"KEY_sk-live-0123456789": "x"},
            "n": 5,
            "deep": [{"a": {"b": "prefix sk-live-0123456789sk-live-0123456789 suffix"}}],
        });
        let out = r.redact_value(v);
        let text = out.to_string();
        assert!(!text.contains("sk-live"), "{text}");
        assert_eq!(out["argv"][2], "Authorization: Bearer [REDACTED]");
        assert_eq!(
            out["deep"][0]["a"]["b"],
            "prefix [REDACTED][REDACTED] suffix"
        );
        assert!(out["env"].get("KEY_[REDACTED]").is_some());
        assert_eq!(out["n"], 5);
    }

    #[test]
    fn the_longer_of_two_overlapping_secrets_is_replaced_whole() {
        let mut r = Redactor::default();
        assert!(r.add("hunter22"));
        assert!(r.add("hunter22-and-more"));
        assert_eq!(r.redact_str("pw=hunter22-and-more;"), "pw=[REDACTED];");
    }

    #[test]
    fn two_secrets_overlapping_in_the_text_leave_no_tail() {
        let mut r = Redactor::default();
        assert!(r.add("aaaaaaaa12"));
        assert!(r.add("12345678"));
        // Longest-first one at a time would give "[REDACTED]345678".
        assert_eq!(r.redact_str("x aaaaaaaa12345678 y"), "x [REDACTED] y");
        assert_eq!(
            r.redact_str("12345678 aaaaaaaa12 aaaaaaaa12345678"),
            "[REDACTED] [REDACTED] [REDACTED]"
        );
        assert_eq!(r.redact_str("nothing here"), "nothing here");
    }

    #[test]
    fn a_number_holding_a_secret_becomes_a_redacted_string() {
        let mut r = Redactor::default();
        assert!(r.add("31415926"));
        let out = r.redact_value(json!({"pin": 31415926, "acct": 9931415926u64, "n": 7, "f": 2.5}));
        assert_eq!(out["pin"], "[REDACTED]");
        assert_eq!(out["acct"], "99[REDACTED]");
        assert_eq!(out["n"], 7);
        assert_eq!(out["f"], 2.5);
    }
}
