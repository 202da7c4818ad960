//! Model providers: Anthropic Messages, OpenAI Responses, Chat Completions, and the offline player.
#![forbid(unsafe_code)]
