//! The user's configuration: `$XDG_CONFIG_HOME/chock/config.toml` (default `~/.config/chock/config.toml`).
//!
//! It names providers (their kind, base URL, model, and the *name* of the environment variable that holds
//! each key), the default provider and model, price overrides and the web-search backend. Chock reads
//! this file and never writes it, so nothing a session does can change what the next session trusts.
//! A bad file is refused with its path, line and column; nothing runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Responses API.
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI-compatible Chat Completions (vLLM, llama.cpp server, Ollama, OpenRouter, …).
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// ai&: a named preset over Chat Completions.
    #[serde(rename = "aiand")]
    AiAnd,
    /// A ChatGPT account signed in with `chock login --provider NAME` (Codex's backend, over the
    /// Responses API): no API key, a refreshed access token.
    #[serde(rename = "chatgpt")]
    ChatGpt,
}

impl ProviderKind {
    /// The spelling used in config.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::OpenAiChat => "openai-chat",
            Self::AiAnd => "aiand",
            Self::ChatGpt => "chatgpt",
        }
    }
}

/// One `[providers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Which wire format it speaks.
    pub kind: ProviderKind,
    /// Where it is; the kind's public endpoint when absent.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model to ask for when neither `--model` nor `default_model` says.
    #[serde(default)]
    pub model: Option<String>,
    /// The NAME of the environment variable holding the key (never the key itself).
    #[serde(default)]
    pub key_env: Option<String>,
    /// How many seconds a reply may stay silent before it counts as stalled and is asked again
    /// (default 300: a slow first token must not re-send, and re-bill, the whole prompt).
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// `chatgpt` only: the issuer the account signs in at (`https://auth.openai.com` when absent;
    /// https, or http to a loopback address).
    #[serde(default)]
    pub issuer: Option<String>,
}

/// Where ChatGPT's Codex backend is, for a `chatgpt` provider with no `base_url`.
pub const CHATGPT_BASE_URL: &str = "https://chatgpt.com/backend-api/codex";

/// A price override for one model, in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Dollars per million input tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output tokens.
    pub output_per_mtok: f64,
    /// Dollars per million tokens read from the prompt cache (defaults to the input price).
    #[serde(default)]
    pub cache_read_per_mtok: Option<f64>,
    /// Dollars per million tokens written to the prompt cache (defaults to the input price).
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
}

/// The `[web_search]` table: which backend the harness-side `web_search` tool asks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    /// `searxng` (a SearXNG JSON endpoint) or another backend name the broker knows.
    pub backend: String,
    /// The backend's endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// The NAME of the environment variable holding the backend's key, if it needs one.
    #[serde(default)]
    pub key_env: Option<String>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The provider used when `--provider` is not given.
    #[serde(default)]
    pub default_provider: Option<String>,
    /// The model used when `--model` is not given (before the provider's own `model`).
    #[serde(default)]
    pub default_model: Option<String>,
    /// Named providers.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Price overrides by model name.
    #[serde(default)]
    pub prices: BTreeMap<String, PriceConfig>,
    /// The web-search backend.
    #[serde(default)]
    pub web_search: Option<WebSearchConfig>,
    /// `[mcp.servers.NAME]`: the person's own MCP servers (the same tables as chock.toml's,
    /// docs/mcp.md); checked when the file is read.
    #[serde(default)]
    pub mcp: Option<chock_policy::mcp::McpSection>,
    /// `[sandbox] toolchains`: policy, not the agent's. chock-policy reads it from this file when
    /// the policy is loaded (`Policy::load`, the one reader, before any sandbox exists), checks
    /// every name and merges it with the project's; it is only accepted here.
    #[serde(default)]
    pub sandbox: Option<toml::Table>,
    /// The checked form of `mcp`.
    #[serde(skip)]
    pub mcp_servers: Vec<chock_policy::mcp::ServerDef>,
    /// Where this configuration was read from (None: no file, defaults only).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a field Chock does not know.
    #[error("{path}:{line}:{column}: {message}{snippet}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
        /// The offending line, quoted (may be empty).
        snippet: String,
    },
    /// The file parsed but says something impossible (an unknown default provider, …).
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Where the configuration file is: `$XDG_CONFIG_HOME/chock/config.toml`, else `~/.config/chock/config.toml`.
/// (chock-dirs resolves it, as every other directory of Chock's.)
pub fn config_path() -> Option<PathBuf> {
    chock_dirs::config_root()
        .ok()
        .map(|dir| dir.join("config.toml"))
}

impl Config {
    /// Reads the user's configuration; a missing file is the empty configuration.
    pub fn load() -> Result<Config, ConfigError> {
        match config_path() {
            Some(path) => Self::load_from(&path),
            None => Ok(Config::default()),
        }
    }

    /// Reads one file; a missing file is the empty configuration.
    pub fn load_from(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses configuration text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|err| {
            let offset = err.span().map_or(0, |span| span.start);
            let (line, column) = line_column(text, offset);
            let snippet = text
                .lines()
                .nth(line.saturating_sub(1))
                .map(|l| format!("\n    {}", l.trim_end()))
                .unwrap_or_default();
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: err.message().trim().to_string(),
                snippet,
            }
        })?;
        if let Some(name) = &config.default_provider
            && !config.providers.contains_key(name)
            && !is_builtin_provider(name)
        {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "default_provider = \"{name}\" names no [providers.{name}] table and no built-in provider"
                ),
            });
        }
        for (name, provider) in &config.providers {
            if provider.idle_timeout_secs == Some(0) {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "providers.{name}.idle_timeout_secs = 0: a reply would count as stalled before it could begin; give at least 1"
                    ),
                });
            }
            if provider.issuer.is_some() && provider.kind != ProviderKind::ChatGpt {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "providers.{name}.issuer: only a provider of kind \"chatgpt\" signs in at an issuer (this one is \"{}\")",
                        provider.kind.as_str()
                    ),
                });
            }
            if provider.kind == ProviderKind::ChatGpt && provider.key_env.is_some() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "providers.{name}.key_env: a \"chatgpt\" provider has no API key; it signs in with `chock login --provider {name}`"
                    ),
                });
            }
            if let Some(var) = &provider.key_env
                && !is_env_name(var)
            {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "providers.{name}.key_env = \"{}\" is not an environment variable name (it names the variable holding the key, never the key)",
                        redact_looking_key(var)
                    ),
                });
            }
        }
        if let Some(mcp) = &config.mcp {
            config.mcp_servers = mcp.check(path).map_err(|e| ConfigError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "mcp.servers.{}{}: {}",
                    e.server,
                    if e.field.is_empty() {
                        String::new()
                    } else {
                        format!(".{}", e.field)
                    },
                    e.problem
                ),
            })?;
        }
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// The provider table for `name`: the user's own, else a built-in one.
    pub fn provider(&self, name: &str) -> Option<ProviderConfig> {
        if let Some(p) = self.providers.get(name) {
            return Some(p.clone());
        }
        builtin_provider(name)
    }
}

impl Config {
    /// Every variable name that holds a key: each provider's `key_env`, the built-in providers' usual
    /// variables, the search backend's. A session withholds them all from its calls (the agent reads
    /// a call's environment), whichever provider this run uses.
    pub fn key_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = ["anthropic", "openai", "aiand"]
            .into_iter()
            .filter_map(builtin_provider)
            .chain(self.providers.values().cloned())
            .filter_map(|p| p.key_env)
            .chain(self.web_search.iter().filter_map(|s| s.key_env.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Providers that need no table: the public endpoints under their usual key variables.
pub fn builtin_provider(name: &str) -> Option<ProviderConfig> {
    let (kind, key_env) = match name {
        "anthropic" => (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
        "openai" => (ProviderKind::OpenAi, "OPENAI_API_KEY"),
        "aiand" => (ProviderKind::AiAnd, "AIAND_API_KEY"),
        "chatgpt" => (ProviderKind::ChatGpt, ""),
        _ => return None,
    };
    Some(ProviderConfig {
        kind,
        base_url: None,
        model: None,
        key_env: (!key_env.is_empty()).then(|| key_env.to_string()),
        idle_timeout_secs: None,
        issuer: None,
    })
}

fn is_builtin_provider(name: &str) -> bool {
    builtin_provider(name).is_some() || name == "demo" || name.starts_with("script:")
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// A key pasted where a variable name belongs must not be echoed back in full.
fn redact_looking_key(s: &str) -> String {
    if s.len() > 12 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(6).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s.to_string()
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/home/u/.config/chock/config.toml"))
    }

    #[test]
    fn a_full_file_reads() {
        let config = parse(
            r#"
default_provider = "local"
default_model = "qwen3"

[providers.local]
kind = "openai-chat"
base_url = "http://127.0.0.1:8080/v1"
key_env = "LOCAL_KEY"

[prices.qwen3]
input_per_mtok = 0.1
output_per_mtok = 0.2

[web_search]
backend = "searxng"
url = "http://127.0.0.1:8888/search"
"#,
        )
        .unwrap();
        assert_eq!(config.default_provider.as_deref(), Some("local"));
        assert_eq!(
            config.provider("local"),
            Some(ProviderConfig {
                kind: ProviderKind::OpenAiChat,
                base_url: Some("http://127.0.0.1:8080/v1".into()),
                model: None,
                key_env: Some("LOCAL_KEY".into()),
                idle_timeout_secs: None,
                issuer: None,
            })
        );
        assert_eq!(config.prices["qwen3"].output_per_mtok, 0.2);
        assert_eq!(
            config.provider("anthropic").unwrap().key_env.as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
    }

    #[test]
    fn an_unknown_field_names_file_line_and_column() {
        let err = parse("[providers.x]\nkind = \"anthropic\"\napi_key = \"sk-123\"\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("/home/u/.config/chock/config.toml:3:1: "),
            "{text}"
        );
        assert!(text.contains("api_key"), "{text}");
    }

    #[test]
    fn an_unknown_kind_is_refused_with_its_place() {
        let err = parse("[providers.x]\nkind = \"gemini\"\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("/home/u/.config/chock/config.toml:2:8: "),
            "{text}"
        );
        assert!(text.contains("gemini"), "{text}");
    }

    #[test]
    fn every_key_variable_is_named_for_withholding() {
        let config = parse(
            "[providers.x]\nkind = \"anthropic\"\nkey_env = \"MY_KEY\"\n[web_search]\nbackend = \"brave\"\nkey_env = \"SEARCH_KEY\"\n",
        )
        .unwrap();
        let names = config.key_env_names();
        for name in [
            "MY_KEY",
            "SEARCH_KEY",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
    }

    /// config.toml's servers go through the host path checker when the file is read (the full
    /// check, with the project and the org bundle, runs again when a server starts).
    #[test]
    fn a_server_reading_chock_s_own_directory_is_refused_when_the_file_is_read() {
        let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
            return;
        };
        let dir = PathBuf::from(home).join(".config/chock");
        let text = format!(
            "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"{}\"]\n",
            dir.display()
        );
        let err = Config::parse(&text, Path::new("config.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "config.toml: mcp.servers.x.read: `{}` overlaps Chock's own directory",
                dir.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_key_in_key_env_is_refused_without_echoing_it() {
        let err =
            parse("[providers.x]\nkind = \"anthropic\"\nkey_env = \"sk-ant-abcdefghijklmnop\"\n")
                .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("not an environment variable name"), "{text}");
        assert!(!text.contains("abcdefghijklmnop"), "{text}");
    }

    #[test]
    fn a_default_provider_must_exist() {
        let err = parse("default_provider = \"nope\"\n").unwrap_err();
        assert!(
            err.to_string().contains("names no [providers.nope] table"),
            "{err}"
        );
        assert!(parse("default_provider = \"demo\"\n").is_ok());
    }

    #[test]
    fn a_missing_file_is_empty() {
        let config = Config::load_from(Path::new("/nonexistent/chock/config.toml")).unwrap();
        assert_eq!(config, Config::default());
    }
}
