//! Which provider and model a session asks, from the flags and config.toml (the built-in offline
//! players included), with its key, and the price table its budget counts in.

use std::sync::Arc;

use chock_provider::{Player, Price, PriceTable, Provider, ProviderConfig};

use super::BuildError;
use chock_config::config::{Config, ProviderKind};
use chock_config::credentials::{self, ApiKey};

/// The provider a session will ask.
pub struct Chosen {
    /// The client.
    pub provider: Arc<dyn Provider>,
    /// Its name (`demo`, a config.toml table).
    pub name: String,
    /// The model asked for.
    pub model: String,
    /// Its key, if it needs one: the builder hands it to the log's redaction funnel.
    pub(super) key: Option<ApiKey>,
    /// Whether a reviewer can ask it: a network provider, or an offline recording with a
    /// `review` answer.
    pub reviews: bool,
}

impl std::fmt::Debug for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chosen")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("reviews", &self.reviews)
            .finish_non_exhaustive()
    }
}

pub(super) fn choose_provider(
    config: &Config,
    provider: Option<String>,
    model: Option<String>,
) -> Result<Chosen, BuildError> {
    let name = provider
        .or_else(|| config.default_provider.clone())
        .ok_or(BuildError::NoProvider)?;
    if let Some(player) = Player::from_spec(&name) {
        let player = player.map_err(|e| BuildError::Recording(e.to_string()))?;
        // The recording's calls are checked against the session's own tools, not a list of its own.
        player
            .check_tools(&chock_tools::Registry::builtin().shapes())
            .map_err(|e| BuildError::Recording(e.to_string()))?;
        let model = model
            .or_else(|| player.recording().model.clone())
            .unwrap_or_else(|| "offline".to_string());
        let reviews = player.recording().review.is_some();
        return Ok(Chosen {
            provider: Arc::new(player),
            name,
            model,
            key: None,
            reviews,
        });
    }
    let source = config
        .source
        .as_ref()
        .map_or("config.toml".to_string(), |p| p.display().to_string());
    let table = config
        .provider(&name)
        .ok_or_else(|| BuildError::UnknownProvider {
            name: name.clone(),
            file: source.clone(),
        })?;
    if table.kind == ProviderKind::ChatGpt {
        return signed_in(config, &name, &table, model);
    }
    let found = credentials::find_key(&name, table.key_env.as_deref())
        .map_err(|e| BuildError::Credentials(e.to_string()))?;
    let key = found.map(|(key, _)| key);
    let needs_key = !matches!(table.kind, ProviderKind::OpenAiChat);
    if needs_key && key.is_none() {
        return Err(BuildError::NoKey {
            name: name.clone(),
            env: table
                .key_env
                .clone()
                .unwrap_or_else(|| "its key_env variable".into()),
        });
    }
    let secret = key.as_ref().map(|k| k.expose().to_string());
    let mut wire = match table.kind {
        ProviderKind::Anthropic => ProviderConfig::anthropic(secret.clone().unwrap_or_default()),
        ProviderKind::OpenAi => ProviderConfig::openai(secret.clone().unwrap_or_default()),
        ProviderKind::ChatGpt => unreachable!("a ChatGPT provider is built by signed_in"),
        ProviderKind::OpenAiChat | ProviderKind::AiAnd => {
            let base = table
                .base_url
                .clone()
                .ok_or_else(|| BuildError::NoBaseUrl {
                    name: name.clone(),
                    file: source.clone(),
                    kind: table.kind.as_str(),
                })?;
            if table.kind == ProviderKind::AiAnd {
                ProviderConfig::aiand(&base, secret.clone().unwrap_or_default())
            } else {
                ProviderConfig::chat_completions(&name, &base, secret.clone())
            }
        }
    };
    if let Some(base) = &table.base_url {
        wire.base_url = base.clone();
    }
    if let Some(secs) = table.idle_timeout_secs {
        wire.idle_timeout = std::time::Duration::from_secs(secs);
    }
    wire.name = name.clone();
    let model = model_for(config, &name, &table, model)?;
    let provider =
        chock_provider::connect(&wire).map_err(|e| BuildError::Connect(e.to_string()))?;
    Ok(Chosen {
        provider: Arc::from(provider),
        name,
        model,
        key,
        reviews: true,
    })
}

/// The model asked of `name`: the flag, else config.toml's default (for the default provider),
/// else the table's, else the kind's own.
fn model_for(
    config: &Config,
    name: &str,
    table: &chock_config::config::ProviderConfig,
    model: Option<String>,
) -> Result<String, BuildError> {
    model
        .or_else(|| {
            if config.default_provider.as_deref() == Some(name) {
                config.default_model.clone()
            } else {
                None
            }
        })
        .or_else(|| table.model.clone())
        .or_else(|| match table.kind {
            ProviderKind::Anthropic => Some("claude-sonnet-4-5".to_string()),
            ProviderKind::OpenAi => Some("gpt-5".to_string()),
            ProviderKind::ChatGpt => Some("gpt-5-codex".to_string()),
            _ => None,
        })
        .ok_or_else(|| BuildError::NoModel {
            name: name.to_string(),
        })
}

/// A ChatGPT account signed in with `chock login --provider NAME`: its kept sign-in, refreshed
/// by the provider's token source as it lapses. Its access token goes to the log's redaction
/// funnel as a key would.
fn signed_in(
    config: &Config,
    name: &str,
    table: &chock_config::config::ProviderConfig,
    model: Option<String>,
) -> Result<Chosen, BuildError> {
    use chock_oauth::chatgpt;
    let signed = chatgpt::load(name)
        .map_err(|e| BuildError::Credentials(e.to_string()))?
        .ok_or_else(|| BuildError::NotSignedIn {
            name: name.to_string(),
        })?;
    let issuer_text = table.issuer.as_deref().unwrap_or(chatgpt::ISSUER);
    if signed.issuer != issuer_text.trim_end_matches('/') {
        return Err(BuildError::NotSignedIn {
            name: name.to_string(),
        });
    }
    let issuer = chatgpt::Issuer::new(issuer_text)
        .map_err(|e| BuildError::Connect(format!("providers.{name}.issuer: {e}")))?;
    let key = ApiKey::new(signed.access_token.expose());
    let account = signed.account_id.clone();
    let bearer = chock_provider::signin::ChatGptBearer::new(name, issuer, signed)
        .map_err(BuildError::Connect)?;
    let base = table
        .base_url
        .clone()
        .unwrap_or_else(|| chock_config::config::CHATGPT_BASE_URL.to_string());
    let mut wire = ProviderConfig::chatgpt(name, &base, account, bearer);
    if let Some(secs) = table.idle_timeout_secs {
        wire.idle_timeout = std::time::Duration::from_secs(secs);
    }
    let model = model_for(config, name, table, model)?;
    let provider =
        chock_provider::connect(&wire).map_err(|e| BuildError::Connect(e.to_string()))?;
    Ok(Chosen {
        provider: Arc::from(provider),
        name: name.to_string(),
        model,
        key,
        reviews: true,
    })
}

pub(super) fn prices(config: &Config) -> PriceTable {
    PriceTable::with_overrides(config.prices.iter().map(|(model, p)| {
        (
            model.clone(),
            Price {
                input: p.input_per_mtok,
                output: p.output_per_mtok,
                cache_read: p.cache_read_per_mtok.unwrap_or(p.input_per_mtok),
                cache_write: p.cache_write_per_mtok.unwrap_or(p.input_per_mtok),
            },
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::parse("", std::path::Path::new("config.toml")).unwrap()
    }

    fn chosen(recording: &str) -> Result<Chosen, BuildError> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.toml");
        std::fs::write(&file, recording).unwrap();
        choose_provider(&config(), Some(format!("script:{}", file.display())), None)
    }

    #[test]
    fn a_recording_is_checked_against_the_sessions_own_tools() {
        assert!(choose_provider(&config(), Some("demo".into()), None).is_ok());
        for (recording, says) in [
            (
                "[[turn]]\n[[turn.call]]\ntool = \"read_fiel\"\ninput = { path = \"a\" }\n[[turn]]\ntext = \"x\"\n",
                "turn 1, call 1 (`read_fiel`): unknown tool; known tools: read_file,",
            ),
            (
                "[[turn]]\n[[turn.call]]\ntool = \"edit_file\"\ninput = { path = \"a\", old = \"x\" }\n[[turn]]\ntext = \"x\"\n",
                "lacks the required field `new`",
            ),
        ] {
            let Err(err) = chosen(recording) else {
                panic!("{says}: accepted");
            };
            assert!(err.to_string().contains(says), "{says}: {err}");
        }
        let declared = "tools = [\"mcp_thing\"]\n[[turn]]\n[[turn.call]]\ntool = \"mcp_thing\"\n[[turn]]\ntext = \"x\"\n";
        assert!(
            chosen(declared).is_ok(),
            "a declared tool is checked when played"
        );
    }
}
