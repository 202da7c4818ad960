//! How a provider is configured and built.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::bearer::BearerSource;
use crate::error::ProviderError;
use crate::retry::{RetryPolicy, Sleeper, TokioSleeper};
use crate::transport::{Secret, Transport};
use crate::{Provider, anthropic, chat, responses};

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// Anthropic Messages API (`POST …/v1/messages`).
    AnthropicMessages,
    /// OpenAI Responses API (`POST …/v1/responses`), stateless with encrypted reasoning.
    OpenAiResponses,
    /// OpenAI Chat Completions and compatible servers (`POST …/v1/chat/completions`).
    ChatCompletions,
}

/// Everything needed to build a network provider. The key is held here and sent only as a header;
/// `Debug` never shows it.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The name used in logs and messages (`anthropic`, `openai`, `aiand`, `ollama`, …).
    pub name: String,
    /// The wire format.
    pub wire: WireFormat,
    /// The API root. With or without the `/v1` segment: `https://api.anthropic.com`,
    /// `http://localhost:11434/v1` and `https://openrouter.ai/api/v1` all work (a trailing `/vN` is kept,
    /// otherwise `/v1` is added).
    pub base_url: String,
    /// The API key, if the server needs one (local servers often do not).
    pub api_key: Option<String>,
    /// Extra headers (`anthropic-beta`, `OpenAI-Organization`, OpenRouter's `HTTP-Referer`, …).
    pub extra_headers: Vec<(String, String)>,
    /// Retry limits and backoff.
    pub retry: RetryPolicy,
    /// The stall timeout: how long the stream may stay silent (and how long to wait for response
    /// headers) before it counts as broken (`StreamFault::Stalled`) and is retried. 300 s by default:
    /// a reasoning model or a local server reading a long prompt on a CPU can be silent for minutes, and a
    /// false stall re-sends (and re-bills) the whole prompt.
    pub idle_timeout: Duration,
    /// How long establishing a connection may take.
    pub connect_timeout: Duration,
    /// The clock used for retry waits (tests inject one that does not sleep).
    pub sleeper: Arc<dyn Sleeper>,
    /// Anthropic only: mark prompt-cache breakpoints (tools, system, the last two user messages) so each
    /// turn re-reads the conversation from the cache. On by default; OpenAI formats cache automatically.
    pub prompt_caching: bool,
    /// Where the bearer token comes from when it is not `api_key`: a sign-in refreshed during the
    /// session ([`ProviderConfig::chatgpt`]). Asked before each request.
    pub bearer: Option<Arc<dyn BearerSource>>,
    /// Whether `/v1` is added to a base URL that does not end in a version (false for an API
    /// whose paths carry none, such as ChatGPT's Codex backend).
    pub add_version: bool,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("wire", &self.wire)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "extra_headers",
                &self
                    .extra_headers
                    .iter()
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            )
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("prompt_caching", &self.prompt_caching)
            .field("bearer", &self.bearer)
            .finish_non_exhaustive()
    }
}

impl ProviderConfig {
    fn new(name: &str, wire: WireFormat, base_url: &str, api_key: Option<String>) -> Self {
        Self {
            name: name.to_owned(),
            wire,
            base_url: base_url.to_owned(),
            api_key,
            extra_headers: Vec::new(),
            retry: RetryPolicy::default(),
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(30),
            sleeper: Arc::new(TokioSleeper),
            prompt_caching: true,
            bearer: None,
            add_version: true,
        }
    }

    /// ChatGPT's Codex backend (`https://chatgpt.com/backend-api/codex`), which speaks the Responses
    /// API to a signed-in ChatGPT account: `bearer` gives the account's access token (refreshed as
    /// it lapses) and `account_id` the account it is for.
    pub fn chatgpt(
        name: &str,
        base_url: &str,
        account_id: Option<String>,
        bearer: Arc<dyn BearerSource>,
    ) -> Self {
        let mut config = Self::new(name, WireFormat::OpenAiResponses, base_url, None);
        config.bearer = Some(bearer);
        config.add_version = false;
        config.extra_headers.push((
            "OpenAI-Beta".to_owned(),
            "responses=experimental".to_owned(),
        ));
        config
            .extra_headers
            .push(("originator".to_owned(), "chock".to_owned()));
        if let Some(account) = account_id {
            config
                .extra_headers
                .push(("chatgpt-account-id".to_owned(), account));
        }
        config
    }

    /// Anthropic's API at `https://api.anthropic.com`.
    pub fn anthropic(api_key: impl Into<String>) -> Self {
        Self::new(
            "anthropic",
            WireFormat::AnthropicMessages,
            "https://api.anthropic.com",
            Some(api_key.into()),
        )
    }

    /// OpenAI's Responses API at `https://api.openai.com`.
    pub fn openai(api_key: impl Into<String>) -> Self {
        Self::new(
            "openai",
            WireFormat::OpenAiResponses,
            "https://api.openai.com",
            Some(api_key.into()),
        )
    }

    /// Any OpenAI-compatible Chat Completions server (vLLM, llama.cpp server, Ollama, OpenRouter, …).
    pub fn chat_completions(name: &str, base_url: &str, api_key: Option<String>) -> Self {
        Self::new(name, WireFormat::ChatCompletions, base_url, api_key)
    }

    /// The "ai&" preset: Chat Completions under the name `aiand`. There is no built-in base URL (we do not
    /// know a verified one): the caller passes the one from configuration, and an empty one is refused by
    /// [`connect`].
    pub fn aiand(base_url: &str, api_key: impl Into<String>) -> Self {
        Self::new(
            "aiand",
            WireFormat::ChatCompletions,
            base_url,
            Some(api_key.into()),
        )
    }

    /// The full URL of `path` (`/messages`, `/responses`, `/chat/completions`) under the base URL.
    pub fn endpoint(&self, path: &str) -> String {
        let base = self.base_url.trim_end_matches('/');
        let last = base.rsplit('/').next().unwrap_or("");
        let versioned = !self.add_version
            || (last.len() > 1
                && last.starts_with('v')
                && last[1..].bytes().all(|b| b.is_ascii_digit()));
        if versioned {
            format!("{base}{path}")
        } else {
            format!("{base}/v1{path}")
        }
    }

    /// The host a key would reach unencrypted: a plain `http://` base URL that is not loopback,
    /// with a key to send. `None` when the key stays on this machine or goes over TLS.
    fn key_in_the_clear(&self) -> Option<String> {
        if self.api_key.as_deref().is_none_or(|k| k.trim().is_empty()) {
            return None;
        }
        let url = reqwest::Url::parse(&self.base_url).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        let host = url.host_str()?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        (!loopback).then(|| host.to_string())
    }

    fn transport(&self, path: &str, auth: &[(&str, String)]) -> Result<Transport, ProviderError> {
        let config_error = |field: &str, message: String| ProviderError::Config {
            field: field.to_owned(),
            message,
        };
        if self.base_url.trim().is_empty() {
            return Err(config_error(
                "base_url",
                format!(
                    "provider `{}` has no base URL; set `base_url` for it in config.toml",
                    self.name
                ),
            ));
        }
        if !(self.base_url.starts_with("https://") || self.base_url.starts_with("http://")) {
            return Err(config_error(
                "base_url",
                format!("`{}` must start with https:// or http://", self.base_url),
            ));
        }
        // A password in the URL would be shown wherever the URL is (Debug, connect errors): refuse it
        // without echoing the URL, and point at the field that keeps a key out of messages.
        let has_credentials = reqwest::Url::parse(&self.base_url)
            .is_ok_and(|url| !url.username().is_empty() || url.password().is_some());
        if has_credentials {
            return Err(config_error(
                "base_url",
                format!(
                    "the base URL of provider `{}` holds a user name or password; put the key in \
                     `api_key` (its environment variable) instead",
                    self.name
                ),
            ));
        }
        if let Some(host) = self.key_in_the_clear() {
            return Err(config_error(
                "base_url",
                format!(
                    "provider `{}` would send its key in the clear to {host} (plain http://); use \
                     https://, or a loopback address (a TLS proxy of your own): set \
                     providers.{}.base_url in config.toml",
                    self.name, self.name
                ),
            ));
        }
        if self.retry.max_attempts == 0 {
            return Err(config_error(
                "retry.max_attempts",
                "must be at least 1".to_owned(),
            ));
        }
        let mut headers = HeaderMap::new();
        let mut put = |name: &str, value: &str, secret: bool| -> Result<(), ProviderError> {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
                config_error(
                    "extra_headers",
                    format!("`{name}` is not a header name: {e}"),
                )
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                // Never echo a key back, not even into an error.
                let shown = if secret {
                    "<redacted>".to_owned()
                } else {
                    format!("`{value}`")
                };
                config_error(name, format!("{shown} is not a valid header value"))
            })?;
            value.set_sensitive(secret);
            headers.insert(header, value);
            Ok(())
        };
        for (name, value) in auth {
            put(name, value, true)?;
        }
        put("accept", "text/event-stream", false)?;
        for (name, value) in &self.extra_headers {
            put(name, value, false)?;
        }
        // No redirects: a model API never redirects a POST, and reqwest keeps custom headers such as
        // `x-api-key` on a redirect to another host, so following one could hand the key to whoever
        // the Location names. A 3xx is reported as the HTTP error it is.
        let client = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| config_error("http client", e.to_string()))?;
        Ok(Transport {
            provider: self.name.clone(),
            client,
            url: self.endpoint(path),
            headers,
            secret: self.api_key.clone().filter(|k| !k.is_empty()).map(Secret),
            bearer: self.bearer.clone(),
            retry: self.retry.clone(),
            sleeper: self.sleeper.clone(),
            idle_timeout: self.idle_timeout,
        })
    }
}

/// Builds the network provider `config` describes.
pub fn connect(config: &ProviderConfig) -> Result<Box<dyn Provider>, ProviderError> {
    let key = config.api_key.clone().filter(|k| !k.is_empty());
    Ok(match config.wire {
        WireFormat::AnthropicMessages => {
            let key = key.ok_or_else(|| missing_key(config))?;
            let auth = [
                ("x-api-key", key),
                ("anthropic-version", anthropic::API_VERSION.to_owned()),
            ];
            let caching = if config.prompt_caching {
                anthropic::Caching::Marked
            } else {
                anthropic::Caching::Off
            };
            Box::new(anthropic::Anthropic::new(
                config.transport("/messages", &auth)?,
                caching,
            ))
        }
        WireFormat::OpenAiResponses => {
            // A sign-in's token is set per request by the transport.
            let auth: Vec<(&str, String)> = match (&config.bearer, key) {
                (Some(_), _) => Vec::new(),
                (None, key) => {
                    let key = key.ok_or_else(|| missing_key(config))?;
                    vec![("authorization", format!("Bearer {key}"))]
                }
            };
            Box::new(responses::Responses::new(
                config.transport("/responses", &auth)?,
            ))
        }
        WireFormat::ChatCompletions => {
            let auth: Vec<(&str, String)> = key
                .map(|k| ("authorization", format!("Bearer {k}")))
                .into_iter()
                .collect();
            Box::new(chat::Chat::new(
                config.transport("/chat/completions", &auth)?,
            ))
        }
    })
}

fn missing_key(config: &ProviderConfig) -> ProviderError {
    ProviderError::Config {
        field: "api_key".to_owned(),
        message: format!(
            "provider `{}` needs an API key (`chock login --provider {}`)",
            config.name, config.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_accepts_base_with_or_without_version() {
        let at = |base: &str| {
            ProviderConfig::chat_completions("x", base, None).endpoint("/chat/completions")
        };
        assert_eq!(
            at("https://api.openai.com"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            at("http://localhost:11434/v1/"),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            at("https://openrouter.ai/api/v1"),
            "https://openrouter.ai/api/v1/chat/completions"
        );
        assert_eq!(
            at("https://example.com/api/v2"),
            "https://example.com/api/v2/chat/completions"
        );
    }

    #[test]
    fn a_key_that_is_not_a_header_value_is_refused_without_echoing_it() {
        let err = connect(&ProviderConfig::anthropic("sk-secret\nsecond-line"))
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(
            text.contains("x-api-key") && !text.contains("secret"),
            "{text}"
        );
    }

    #[test]
    fn a_base_url_with_credentials_is_refused_without_echoing_them() {
        let mut config =
            ProviderConfig::chat_completions("x", "https://u:hunter2@example.com", None);
        let err = connect(&config).err().expect("refused");
        let text = err.to_string();
        assert!(
            text.contains("base_url") && !text.contains("hunter2"),
            "{text}"
        );
        config.base_url = "https://example.com/v1".to_owned();
        assert!(connect(&config).is_ok());
    }

    #[test]
    fn a_key_never_goes_over_plain_http_to_another_machine() {
        let mut config = ProviderConfig::anthropic("sk-ant-secret-123");
        for far in [
            "http://example.com",
            "http://192.168.1.5:8000/v1",
            "http://[2001:db8::1]",
        ] {
            config.base_url = far.to_owned();
            let err = connect(&config).err().expect("refused");
            let text = err.to_string();
            assert!(
                text.contains("in the clear") && text.contains("providers.anthropic.base_url"),
                "{far}: {text}"
            );
            assert!(!text.contains("secret-123"), "{text}");
        }
        for near in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
            "https://example.com",
        ] {
            config.base_url = near.to_owned();
            assert!(connect(&config).is_ok(), "{near}");
        }
        // No key, nothing to leak: a local server on the network is reached as configured.
        let keyless = ProviderConfig::chat_completions("lan", "http://192.168.1.5:8000/v1", None);
        assert!(connect(&keyless).is_ok());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = ProviderConfig::anthropic("sk-ant-secret-123");
        assert!(!format!("{config:?}").contains("secret"));
        // Nor does the transport built from it, which holds the key and the auth header.
        let auth = [("x-api-key", "sk-ant-secret-123".to_owned())];
        let transport = config.transport("/messages", &auth).expect("transport");
        let shown = format!("{transport:?}");
        assert!(!shown.contains("secret-123"), "{shown}");
    }

    #[test]
    fn aiand_without_base_url_is_a_config_error() {
        let err = connect(&ProviderConfig::aiand("", "k"))
            .err()
            .expect("refused");
        assert!(err.to_string().contains("base_url"), "{err}");
        let err = connect(&ProviderConfig::anthropic(""))
            .err()
            .expect("refused");
        assert!(err.to_string().contains("api_key"), "{err}");
    }
}
