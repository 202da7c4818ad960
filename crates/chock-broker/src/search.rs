//! `web_search`: harness-side search through the same door as `fetch_url`.
//!
//! Two decisions guard a search: `web.search` (is searching allowed at all; the query is shown to
//! whoever answers) and `net.fetch.<reversed backend host>` (may the backend be reached), with the
//! backend's addresses checked and pinned like any fetch.

use chock_policy::Action;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use crate::door::DoorKeeper;
use crate::error::BrokerError;
use crate::events::Door;
use crate::fetch::Fetcher;
use crate::html::html_to_text;

/// Which search backend the agent's configuration names.
///
/// ```toml
/// [search]
/// backend = "searxng"
/// url = "https://searx.example.org"
/// ```
/// or
/// ```toml
/// [search]
/// backend = "brave"
/// api_key_env = "BRAVE_SEARCH_API_KEY"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case", deny_unknown_fields)]
pub enum SearchConfig {
    /// A SearXNG instance with the JSON format enabled: `GET <url>/search?q=…&format=json`.
    Searxng {
        /// The instance's base URL.
        url: String,
    },
    /// The Brave Search API: `GET <url>?q=…` with the key in `X-Subscription-Token`.
    Brave {
        /// The endpoint; default `https://api.search.brave.com/res/v1/web/search`.
        #[serde(default = "brave_default_url")]
        url: String,
        /// The environment variable holding the key (the key itself never sits in a config file).
        #[serde(alias = "key_env")]
        api_key_env: String,
    },
}

/// Request headers (name, value).
type Headers = Vec<(&'static str, String)>;

fn brave_default_url() -> String {
    "https://api.search.brave.com/res/v1/web/search".to_owned()
}

/// One search result, cleaned to plain text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// The result's title.
    pub title: String,
    /// Where it points.
    pub url: String,
    /// The snippet, as text.
    pub snippet: String,
}

/// The results of one search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchResults {
    /// The query as asked.
    pub query: String,
    /// Which backend answered (`searxng`, `brave`).
    pub backend: String,
    /// The hits, in the backend's order, at most the number asked for.
    pub hits: Vec<SearchHit>,
}

impl SearchConfig {
    /// Build from loose parts (a config table that names the backend, its URL and the key's variable),
    /// saying which part is missing or unknown.
    pub fn from_parts(
        backend: &str,
        url: Option<&str>,
        key_env: Option<&str>,
    ) -> Result<SearchConfig, BrokerError> {
        let bad = |reason: String| BrokerError::SearchConfig {
            backend: backend.to_owned(),
            reason,
        };
        match backend {
            "searxng" => Ok(SearchConfig::Searxng {
                url: url
                    .ok_or_else(|| {
                        bad("`url` is required for searxng (the instance's base URL)".into())
                    })?
                    .to_owned(),
            }),
            "brave" => Ok(SearchConfig::Brave {
                url: url.map_or_else(brave_default_url, str::to_owned),
                api_key_env: key_env
                    .ok_or_else(|| {
                        bad("`key_env` is required for brave (the variable holding the key)".into())
                    })?
                    .to_owned(),
            }),
            other => Err(bad(format!(
                "unknown backend `{other}` (known: searxng, brave)"
            ))),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            SearchConfig::Searxng { .. } => "searxng",
            SearchConfig::Brave { .. } => "brave",
        }
    }

    /// The request URL and headers for `query`.
    fn request(&self, query: &str) -> Result<(String, Headers), BrokerError> {
        let bad = |url: &str, e: url::ParseError| BrokerError::BadUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        };
        match self {
            SearchConfig::Searxng { url } => {
                let mut endpoint = Url::parse(&format!("{}/search", url.trim_end_matches('/')))
                    .map_err(|e| bad(url, e))?;
                endpoint
                    .query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("format", "json");
                Ok((
                    endpoint.to_string(),
                    vec![("accept", "application/json".to_owned())],
                ))
            }
            SearchConfig::Brave { url, api_key_env } => {
                let key = std::env::var(api_key_env)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| BrokerError::MissingSearchKey {
                        backend: "brave".into(),
                        env: api_key_env.clone(),
                    })?;
                let mut endpoint = Url::parse(url).map_err(|e| bad(url, e))?;
                endpoint.query_pairs_mut().append_pair("q", query);
                Ok((
                    endpoint.to_string(),
                    vec![
                        ("accept", "application/json".to_owned()),
                        ("x-subscription-token", key),
                    ],
                ))
            }
        }
    }

    /// Read the backend's JSON into hits.
    fn parse(&self, body: &[u8], max: usize) -> Result<Vec<SearchHit>, BrokerError> {
        let unreadable = |reason: String| BrokerError::SearchAnswer {
            backend: self.name().to_owned(),
            reason,
        };
        let value: Value = serde_json::from_slice(body).map_err(|e| unreadable(e.to_string()))?;
        let (list, snippet_field) = match self {
            SearchConfig::Searxng { .. } => (value.get("results"), "content"),
            SearchConfig::Brave { .. } => (
                value.get("web").and_then(|w| w.get("results")),
                "description",
            ),
        };
        let list = list
            .and_then(Value::as_array)
            .ok_or_else(|| unreadable("no result list".into()))?;
        let text = |item: &Value, field: &str| {
            item.get(field)
                .and_then(Value::as_str)
                .map(html_to_text)
                .unwrap_or_default()
        };
        Ok(list
            .iter()
            .filter(|item| item.get("url").and_then(Value::as_str).is_some())
            .take(max)
            .map(|item| SearchHit {
                title: text(item, "title"),
                url: item
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                snippet: text(item, snippet_field),
            })
            .collect())
    }
}

/// `web_search`: the configured backend, the door that decides `web.search`, and the
/// [`Fetcher`] that reaches the backend (decided again at `net.fetch`, pinned like any fetch).
#[derive(Clone)]
pub struct Searcher {
    keeper: DoorKeeper,
    fetcher: Fetcher,
    backend: Option<SearchConfig>,
}

impl std::fmt::Debug for Searcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Searcher {
    /// A searcher asking `backend` (none: every search is refused) through `keeper` and `fetcher`.
    pub(crate) fn new(
        keeper: DoorKeeper,
        fetcher: Fetcher,
        backend: Option<SearchConfig>,
    ) -> Searcher {
        Searcher {
            keeper,
            fetcher,
            backend,
        }
    }

    /// Pass `text` through the log's redaction funnel.
    fn redact(&self, text: &str) -> String {
        self.keeper.log.log().redact(text)
    }

    /// Search the web with the configured backend; at most `max_hits` results. Decided at
    /// `web.search` first, then the backend's host at `net.fetch.<reversed host>`.
    pub async fn search(&self, query: &str, max_hits: usize) -> Result<SearchResults, BrokerError> {
        let Some(config) = self.backend.clone() else {
            return Err(BrokerError::Refused {
                action: "web.search".into(),
                reason: "no search backend is configured".into(),
            });
        };
        let action = Action::parse("web.search").map_err(|e| BrokerError::BadHost {
            host: "web.search".into(),
            reason: e.to_string(),
        })?;
        let detail = format!("search the web for {query:?} with {}", config.name());
        let target = (config.name(), 0);
        self.keeper
            .decide(Door::Search, &action, target, &detail)
            .await?;
        let (url, headers) = config.request(query)?;
        if let Some((_, key)) = headers
            .iter()
            .find(|(name, _)| *name == "x-subscription-token")
        {
            // A key too short for the funnel is still sent; the funnel refuses to match tiny strings.
            let _ = self.keeper.log.log().add_secret(key);
        }
        let raw = self.fetcher.get(Door::Search, &url, &headers).await?;
        if raw.status != 200 {
            return Err(BrokerError::SearchAnswer {
                backend: config.name().to_owned(),
                reason: format!("HTTP status {}", raw.status),
            });
        }
        let hits = config
            .parse(&raw.body, max_hits)?
            .into_iter()
            .map(|hit| SearchHit {
                title: self.redact(&hit.title),
                url: self.redact(&hit.url),
                snippet: self.redact(&hit.snippet),
            })
            .collect();
        Ok(SearchResults {
            query: query.to_owned(),
            backend: config.name().to_owned(),
            hits,
        })
    }
}
