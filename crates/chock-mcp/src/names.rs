//! A server's tool names into Chock's two grammars: the act (`mcp.<server>.tool.<label>`, one
//! label of the action grammar) and the name the model calls it by (1 to 64 of `A-Z a-z 0-9 _ -`).
//!
//! A server may name a tool anything (`read.file`, `fetch/url`, `*`, `ünïcode`). The act's label
//! escapes every character outside `A-Z a-z 0-9 _ -` as `+` and two lower-case hex digits per
//! UTF-8 byte (`+` itself too), so the escaping is reversible and two tools never share an act:
//! `read.file` is `read+2efile`, and a wildcard or dot a server puts in a name never widens a
//! rule. Questions and the log show the raw name besides.

use chock_policy::{Action, ActionError};
use sha2::{Digest, Sha256};

/// The action-grammar label for a tool named `tool`. Empty names have none.
pub fn tool_label(tool: &str) -> Option<String> {
    if tool.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(tool.len());
    for ch in tool.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            out.push(ch);
        } else {
            let mut buf = [0u8; 4];
            for byte in ch.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("+{byte:02x}"));
            }
        }
    }
    Some(out)
}

/// The act one call of `server`'s tool `tool` is decided as.
pub fn tool_action(server: &str, tool: &str) -> Result<Action, ActionError> {
    let label = tool_label(tool).ok_or(ActionError::EmptyLabel)?;
    Action::mcp_tool(server, &label)
}

/// The act of `server` asking for a model call.
pub fn sampling_action(server: &str) -> Result<Action, ActionError> {
    Action::parse(&format!("mcp.{server}.sampling"))
}

/// The name the model calls `server`'s tool `tool` by: `mcp__<server>__<tool>`, characters no
/// provider takes replaced by `_`, and a name longer than 64 cut with a hash of the whole so two
/// long names stay apart.
pub fn model_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= 64 && clean == raw {
        return clean;
    }
    let hash = hex::encode(&Sha256::digest(raw.as_bytes())[..4]);
    let keep: String = clean.chars().take(64 - 9).collect();
    format!("{keep}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escape_what_the_grammar_cannot_hold() {
        assert_eq!(tool_label("get_current_time").unwrap(), "get_current_time");
        assert_eq!(tool_label("read.file").unwrap(), "read+2efile");
        assert_eq!(tool_label("a+b").unwrap(), "a+2bb");
        assert_eq!(tool_label("*").unwrap(), "+2a");
        assert_eq!(tool_label("é").unwrap(), "+c3+a9");
        assert!(tool_label("").is_none());
        assert_eq!(
            tool_action("fs", "read.file").unwrap().as_str(),
            "mcp.fs.tool.read+2efile"
        );
        // `+2e` written by a server is escaped too: it cannot collide with an escaped dot.
        assert_ne!(tool_label("read+2efile"), tool_label("read.file"));
    }

    #[test]
    fn model_names_fit_every_provider() {
        assert_eq!(model_name("time", "now"), "mcp__time__now");
        let dotted = model_name("fs", "read.file");
        assert!(dotted.starts_with("mcp__fs__read_file_"), "{dotted}");
        assert_ne!(dotted, model_name("fs", "read/file"));
        let long = model_name("s", &"x".repeat(100));
        assert_eq!(long.len(), 64);
    }
}
