//! Who Chock is to a streamable HTTP server's authorization server, when the person says so in
//! `[mcp.servers.NAME]`: a client ID metadata document's URL (`client_metadata_url`), or a client
//! registered beforehand (`client_id`, its secret in the host environment variable named by
//! `client_secret_env`, never in the file). Without either, Chock registers dynamically.

use serde::Serialize;

use crate::mcp::{McpConfigError, RawServer, Transport};
use crate::sandbox::check_env_name;

/// The checked client fields of one server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OAuthClientDef {
    /// `client_id`: a client registered beforehand with the authorization server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// `client_secret_env`: the host environment variable holding that client's secret (a
    /// confidential client). Its value is read when signing in, never stored in the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// `client_metadata_url`: the https URL of the client ID metadata document Chock is known
    /// by, used as the client ID where the authorization server takes such documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

/// Checks the client fields of `raw`, whose transport is `transport`: only a streamable HTTP
/// server signs in; the document URL is https with a path (the client ID metadata document
/// draft §3); an ID is not empty; a secret's variable needs an ID and is a valid name.
pub(crate) fn check(
    raw: &RawServer,
    transport: &Transport,
    err: &dyn Fn(&str, String) -> McpConfigError,
) -> Result<Option<OAuthClientDef>, McpConfigError> {
    let def = OAuthClientDef {
        client_id: raw.client_id.clone(),
        client_secret_env: raw.client_secret_env.clone(),
        client_metadata_url: raw.client_metadata_url.clone(),
    };
    if def == OAuthClientDef::default() {
        return Ok(None);
    }
    let first = [
        ("client_id", &def.client_id),
        ("client_secret_env", &def.client_secret_env),
        ("client_metadata_url", &def.client_metadata_url),
    ]
    .into_iter()
    .find(|(_, v)| v.is_some())
    .map(|(f, _)| f)
    .unwrap_or("client_id");
    if !matches!(transport, Transport::Http { .. }) {
        return Err(err(
            first,
            "only a streamable HTTP server (`url`, not `transport = \"sse\"`) signs in with OAuth"
                .into(),
        ));
    }
    if let Some(url) = &def.client_metadata_url {
        check_metadata_url(url).map_err(|problem| err("client_metadata_url", problem))?;
    }
    if let Some(id) = &def.client_id
        && id.trim().is_empty()
    {
        return Err(err("client_id", "is empty".into()));
    }
    if let Some(var) = &def.client_secret_env {
        if def.client_id.is_none() {
            return Err(err(
                "client_secret_env",
                "names a secret for a pre-registered client: give `client_id` too".into(),
            ));
        }
        check_env_name(var).map_err(|e| err("client_secret_env", format!("`{var}`: {e}")))?;
    }
    Ok(Some(def))
}

/// A client ID metadata document URL: https, a host, a path other than `/`, no credentials,
/// no fragment.
fn check_metadata_url(url: &str) -> Result<(), String> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(format!("`{url}` is not an https:// URL"));
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() {
        return Err(format!("`{url}` names no host"));
    }
    if authority.contains('@') {
        return Err(format!("`{url}` holds credentials"));
    }
    if path.len() <= 1 {
        return Err(format!(
            "`{url}` has no path (a client ID metadata document's URL names the document)"
        ));
    }
    if url.contains('#') {
        return Err(format!("`{url}` has a fragment"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::mcp::RawServer;

    fn checked(raw: &RawServer) -> Result<Option<super::OAuthClientDef>, String> {
        raw.check(Path::new("config.toml"), "remote")
            .map(|d| d.oauth)
            .map_err(|e| e.to_string())
    }

    fn http(url: &str) -> RawServer {
        RawServer {
            url: Some(url.into()),
            ..RawServer::default()
        }
    }

    #[test]
    fn the_client_fields_are_kept_for_a_streamable_http_server() {
        assert_eq!(checked(&http("https://mcp.example/mcp")).unwrap(), None);
        let def = checked(&RawServer {
            client_id: Some("chock-at-example".into()),
            client_secret_env: Some("EXAMPLE_MCP_SECRET".into()),
            client_metadata_url: Some("https://chock.example/oauth/client.json".into()),
            ..http("https://mcp.example/mcp")
        })
        .unwrap()
        .unwrap();
        assert_eq!(def.client_id.as_deref(), Some("chock-at-example"));
        assert_eq!(def.client_secret_env.as_deref(), Some("EXAMPLE_MCP_SECRET"));
    }

    #[test]
    fn a_bad_client_field_is_refused_naming_it() {
        let cases = [
            (
                RawServer {
                    command: Some("server".into()),
                    client_id: Some("x".into()),
                    ..RawServer::default()
                },
                "mcp.servers.remote.client_id: only a streamable HTTP server",
            ),
            (
                RawServer {
                    transport: Some("sse".into()),
                    client_metadata_url: Some("https://chock.example/c.json".into()),
                    ..http("https://mcp.example/sse")
                },
                "mcp.servers.remote.client_metadata_url: only a streamable HTTP server",
            ),
            (
                RawServer {
                    client_metadata_url: Some("http://chock.example/c.json".into()),
                    ..http("https://mcp.example/mcp")
                },
                "mcp.servers.remote.client_metadata_url: `http://chock.example/c.json` is not an https:// URL",
            ),
            (
                RawServer {
                    client_metadata_url: Some("https://chock.example/".into()),
                    ..http("https://mcp.example/mcp")
                },
                "mcp.servers.remote.client_metadata_url: `https://chock.example/` has no path",
            ),
            (
                RawServer {
                    client_secret_env: Some("SECRET".into()),
                    ..http("https://mcp.example/mcp")
                },
                "mcp.servers.remote.client_secret_env: names a secret for a pre-registered client",
            ),
            (
                RawServer {
                    client_id: Some("x".into()),
                    client_secret_env: Some("NOT A NAME".into()),
                    ..http("https://mcp.example/mcp")
                },
                "mcp.servers.remote.client_secret_env: `NOT A NAME`",
            ),
            (
                RawServer {
                    client_id: Some(" ".into()),
                    ..http("https://mcp.example/mcp")
                },
                "mcp.servers.remote.client_id: is empty",
            ),
        ];
        for (raw, want) in cases {
            let err = checked(&raw).unwrap_err();
            assert!(err.starts_with(&format!("config.toml: {want}")), "{err}");
        }
    }

    #[test]
    fn the_fields_parse_from_toml_and_an_unknown_one_is_refused() {
        let raw: RawServer = toml::from_str(
            "url = \"https://mcp.example/mcp\"\nclient_metadata_url = \"https://chock.example/c.json\"\n",
        )
        .unwrap();
        assert!(checked(&raw).unwrap().is_some());
        assert!(
            toml::from_str::<RawServer>("url = \"https://x/\"\nclient_secret = \"s\"\n").is_err()
        );
    }
}
