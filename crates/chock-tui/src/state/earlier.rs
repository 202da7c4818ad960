//! A resumed session's conversation so far, drawn as the transcript drew it live: the person's
//! messages, the model's words, each tool call and its result's first line (escaped like any
//! text from outside).

use chock_runtime::conversation::{Block, Message, Role};

use super::{App, Kind, result_line, tool_line, user_line};

impl App {
    /// Draws `messages` (the conversation the resumed session carries on from) before its first
    /// new turn.
    pub(super) fn earlier(&mut self, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        self.say(
            Kind::Note,
            "── the conversation so far, from the session's log",
        );
        for message in messages {
            for block in &message.content {
                match (message.role, block) {
                    (Role::User, Block::Text { text }) => self.say(Kind::User, &user_line(text)),
                    (Role::Assistant, Block::Text { text }) => self.say(Kind::Model, text),
                    (_, Block::ToolUse { name, input, .. }) => {
                        self.say(Kind::Tool, &tool_line(name, input));
                    }
                    (
                        _,
                        Block::ToolResult {
                            content, is_error, ..
                        },
                    ) => self.say(
                        Kind::Result { ok: !is_error },
                        &result_line(!is_error, content),
                    ),
                    _ => {}
                }
            }
        }
        self.say(Kind::Note, "── resumed here");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Feed;
    use crate::state::Line;

    #[test]
    fn a_resumed_sessions_conversation_is_drawn_before_its_new_turns() {
        let mut app = App::new();
        app.apply(Feed::Earlier(vec![
            Message::user_text("fix the sum\x1b[2J"),
            Message::assistant(vec![
                Block::Text {
                    text: "Looking.".into(),
                },
                Block::ToolUse {
                    id: "t1".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path": "calc.sh"}),
                },
            ]),
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "t1".into(),
                    content: "echo $(( $1 - $2 ))\nmore".into(),
                    is_error: false,
                }],
            },
        ]));
        let lines: Vec<(Kind, String)> = app
            .take_lines()
            .into_iter()
            .map(|Line { kind, text }| (kind, text))
            .collect();
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines[1].0, Kind::User);
        assert!(
            lines[1].1.starts_with("› fix the sum") && !lines[1].1.contains('\x1b'),
            "escaped: {lines:?}"
        );
        assert_eq!(lines[2], (Kind::Model, "Looking.".into()));
        assert_eq!(lines[3].0, Kind::Tool);
        assert!(lines[3].1.starts_with("→ read_file"), "{lines:?}");
        assert_eq!(
            lines[4],
            (Kind::Result { ok: true }, "  ✓ echo $(( $1 - $2 ))".into())
        );
        assert_eq!(lines[5].0, Kind::Note);
    }
}
