//! The `[mcp.servers.NAME]` tables: which MCP servers a project (chock.toml) or a person
//! (config.toml) configures. One parser for both files: chock.toml's is read with the policy (so a
//! project's server is known before any sandbox exists, rule 2), config.toml's by chock-config with
//! the same types. What a server may *do* is decided per act by the table
//! (`mcp.<server>.tool.<tool>`, `mcp.<server>.network`, `mcp.<server>.sampling`); these tables say
//! only how to start or reach it. docs/mcp.md has the format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::action::check_label;
use crate::host_paths::{Access, DeclaredPath, HostPaths, under_write_path};
use crate::sandbox::check_env_name;

/// How long a server may take to start and answer `initialize` when the table does not say.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take when the table does not say.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout a table may set (either kind).
pub const MAX_TIMEOUT_SECS: u64 = 3600;

/// The `[mcp]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// `[mcp.servers.NAME]`, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, RawServer>,
}

/// One `[mcp.servers.NAME]` table as written (checked by [`McpSection::check`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// The program of a stdio server (a name found on the sandbox's PATH, or an absolute path).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The endpoint of a streamable HTTP server (or of a legacy SSE server's event stream).
    pub url: Option<String>,
    /// With `url`: `"sse"` for a server of the legacy HTTP+SSE transport (MCP 2024-11-05);
    /// absent or `"streamable_http"` for streamable HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Names of host environment variables the server receives (names only, never values).
    #[serde(default)]
    pub env: Vec<String>,
    /// Host paths the server may read (its installation, when it is outside the system
    /// directories the sandbox already shows).
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Host paths the server may write that outlive the session: `npx`'s or `uvx`'s cache.
    #[serde(default)]
    pub cache: Vec<PathBuf>,
    /// Seconds the server has to start and answer `initialize`.
    pub startup_timeout_secs: Option<u64>,
    /// Seconds one tool call may take.
    pub call_timeout_secs: Option<u64>,
    /// With `url`: a client ID registered beforehand with the server's authorization server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// With `client_id`: the host environment variable holding its secret (names only here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// With `url`: the https URL of Chock's client ID metadata document for this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

/// How Chock reaches a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    /// Chock starts it, confined, and speaks to it over its standard streams.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Chock reaches it through the broker's door, like `fetch_url`.
    Http {
        /// The endpoint.
        url: String,
    },
    /// A server of the legacy HTTP+SSE transport, reached through the broker's door too.
    Sse {
        /// Its event stream.
        url: String,
    },
}

/// One checked server definition. Its [`serde::Serialize`] form is what a trust hash covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerDef {
    /// The server's name: one label of the action grammar.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Environment variable names it receives.
    pub env: Vec<String>,
    /// Extra read-only host paths.
    pub read: Vec<PathBuf>,
    /// Writable host paths that outlive the session.
    pub cache: Vec<PathBuf>,
    /// Seconds to start.
    pub startup_timeout_secs: u64,
    /// Seconds per call.
    pub call_timeout_secs: u64,
    /// Who Chock is to its authorization server, when the table says (crate::mcp_oauth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<crate::mcp_oauth::OAuthClientDef>,
}

impl ServerDef {
    /// The startup timeout.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(self.startup_timeout_secs)
    }

    /// The per-call timeout.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.call_timeout_secs)
    }
}

/// A server table that cannot be used, naming the file and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: mcp.servers.{server}{}: {problem}", file.display(), field_suffix(field))]
pub struct McpConfigError {
    /// The file (chock.toml or config.toml).
    pub file: PathBuf,
    /// The server's name as written.
    pub server: String,
    /// The field (`command`, `env`, …; empty for the table itself).
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

fn field_suffix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!(".{field}")
    }
}

fn timeout(
    value: Option<u64>,
    default: Duration,
    err: &dyn Fn(&str, String) -> McpConfigError,
    field: &str,
) -> Result<u64, McpConfigError> {
    match value {
        None => Ok(default.as_secs()),
        Some(0) => Err(err(field, "must be at least 1 second".into())),
        Some(n) if n > MAX_TIMEOUT_SECS => Err(err(
            field,
            format!("must be at most {MAX_TIMEOUT_SECS} seconds"),
        )),
        Some(n) => Ok(n),
    }
}

/// Expands and checks one list of paths as written (`~/` expanded, absolute, no `..`, then the
/// host path checker).
fn expand_paths(
    paths: &[PathBuf],
    field: &str,
    host: &HostPaths,
    err: &dyn Fn(&str, String) -> McpConfigError,
) -> Result<Vec<PathBuf>, McpConfigError> {
    paths
        .iter()
        .map(|path| {
            let Some(raw) = path.to_str() else {
                return Err(err(
                    field,
                    format!("`{}` is not valid UTF-8", path.display()),
                ));
            };
            host.expand(raw)
                .map_err(|why| err(field, format!("`{raw}` {why}")))
        })
        .collect()
}

impl ServerDef {
    /// Its `read` and `cache` paths, for the host path checker.
    pub fn declared(&self) -> Vec<DeclaredPath> {
        let read = self.read.iter().map(|p| (p, Access::Read, "read"));
        let cache = self.cache.iter().map(|p| (p, Access::Write, "cache"));
        read.chain(cache)
            .map(|(path, access, field)| DeclaredPath {
                path: path.clone(),
                access,
                field: format!("mcp.servers.{}.{field}", self.name),
            })
            .collect()
    }

    /// Checks its `read` and `cache` paths with `host` (the one checker `[sandbox]` paths go
    /// through), and that none lies under a write path of `around` (the `[sandbox]` table, the
    /// session's other servers) nor one of those under its cache. Run when its table is read and
    /// again each time it starts: a cache swapped for a link between two sessions is refused.
    pub fn check_paths(
        &self,
        file: &Path,
        host: &HostPaths,
        around: &[DeclaredPath],
    ) -> Result<(), McpConfigError> {
        let err = |field: &str, problem: String| McpConfigError {
            file: file.to_path_buf(),
            server: self.name.clone(),
            field: field.to_string(),
            problem,
        };
        let own = self.declared();
        let short = |d: &DeclaredPath| d.field.rsplit('.').next().unwrap_or_default().to_string();
        for d in &own {
            host.check(&d.path, d.access)
                .map_err(|why| err(&short(d), format!("`{}` {why}", d.path.display())))?;
        }
        // Only what involves this server: its paths under any write path, and another table's
        // path under its cache (what lies between other tables is theirs to answer for).
        let writes = |from: &[DeclaredPath]| -> Vec<DeclaredPath> {
            from.iter()
                .filter(|d| d.access == Access::Write)
                .cloned()
                .collect()
        };
        let (own_writes, all_writes) = (
            writes(&own),
            writes(&[own.clone(), around.to_vec()].concat()),
        );
        for d in &own {
            if let Some(why) = under_write_path(d, &all_writes.iter().collect::<Vec<_>>()) {
                return Err(err(&short(d), format!("`{}` {why}", d.path.display())));
            }
        }
        for a in around {
            if let Some(why) = under_write_path(a, &own_writes.iter().collect::<Vec<_>>()) {
                return Err(err(
                    "cache",
                    format!("`{}` ({}) {why}", a.path.display(), a.field),
                ));
            }
        }
        Ok(())
    }
}

impl McpSection {
    /// Checks every server table read from `file`, its paths against this host
    /// ([`HostPaths::for_host`]: config.toml, read before any project is known).
    pub fn check(&self, file: &Path) -> Result<Vec<ServerDef>, McpConfigError> {
        self.check_with(file, &HostPaths::for_host())
    }

    /// Checks every server table read from `file`, its paths with `host`.
    pub fn check_with(
        &self,
        file: &Path,
        host: &HostPaths,
    ) -> Result<Vec<ServerDef>, McpConfigError> {
        self.servers
            .iter()
            .map(|(name, raw)| raw.check_with(file, name, host))
            .collect()
    }
}

impl RawServer {
    /// Checks one table named `name`, read from `file`, its paths against this host
    /// ([`HostPaths::for_host`]).
    pub fn check(&self, file: &Path, name: &str) -> Result<ServerDef, McpConfigError> {
        self.check_with(file, name, &HostPaths::for_host())
    }

    /// Checks one table named `name`, read from `file`, its paths with `host`.
    pub fn check_with(
        &self,
        file: &Path,
        name: &str,
        host: &HostPaths,
    ) -> Result<ServerDef, McpConfigError> {
        let err = |field: &str, problem: String| McpConfigError {
            file: file.to_path_buf(),
            server: name.to_string(),
            field: field.to_string(),
            problem,
        };
        if name.contains('.') {
            return Err(err("", "a server's name is one label: no `.`".into()));
        }
        check_label(name).map_err(|e| err("", format!("cannot name a server: {e}")))?;
        let transport = match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "url",
                    "give `command` (a stdio server) or `url` (a streamable HTTP server), not both"
                        .into(),
                ));
            }
            (None, None) => {
                return Err(err(
                    "",
                    "needs `command` (a stdio server) or `url` (a streamable HTTP server)".into(),
                ));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(err("command", "is empty".into()));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() {
                    return Err(err(
                        "args",
                        "only a stdio server (`command`) takes args".into(),
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(err(
                        "url",
                        format!("`{url}` is not an http:// or https:// URL"),
                    ));
                }
                match self.transport.as_deref() {
                    None | Some("streamable_http") => Transport::Http { url: url.clone() },
                    Some("sse") => Transport::Sse { url: url.clone() },
                    Some(other) => {
                        return Err(err(
                            "transport",
                            format!("`{other}` is not `streamable_http` or `sse`"),
                        ));
                    }
                }
            }
        };
        if self.command.is_some() && self.transport.is_some() {
            return Err(err(
                "transport",
                "only a server with `url` takes a transport".into(),
            ));
        }
        for var in &self.env {
            check_env_name(var).map_err(|e| {
                let words = if e.contains(var.as_str()) {
                    e
                } else {
                    format!("`{var}` {e}")
                };
                err("env", words)
            })?;
        }
        let def = ServerDef {
            name: name.to_string(),
            transport: transport.clone(),
            env: self.env.clone(),
            read: expand_paths(&self.read, "read", host, &err)?,
            cache: expand_paths(&self.cache, "cache", host, &err)?,
            startup_timeout_secs: timeout(
                self.startup_timeout_secs,
                DEFAULT_STARTUP_TIMEOUT,
                &err,
                "startup_timeout_secs",
            )?,
            call_timeout_secs: timeout(
                self.call_timeout_secs,
                DEFAULT_CALL_TIMEOUT,
                &err,
                "call_timeout_secs",
            )?,
            oauth: crate::mcp_oauth::check(self, &transport, &err)?,
        };
        def.check_paths(file, host, &[])?;
        Ok(def)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Vec<ServerDef>, McpConfigError> {
        let section: McpSection = toml::from_str::<toml::Table>(text)
            .unwrap()
            .get("mcp")
            .cloned()
            .unwrap()
            .try_into()
            .unwrap();
        section.check(Path::new("chock.toml"))
    }

    #[test]
    fn a_stdio_and_an_http_server() {
        let defs = check(
            "[mcp.servers.time]\ncommand = \"mcp-server-time\"\nenv = [\"TZ\"]\ncall_timeout_secs = 5\n\
             [mcp.servers.web]\nurl = \"http://127.0.0.1:3001/mcp\"\n",
        )
        .unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0].call_timeout_secs, 5);
        assert_eq!(defs[0].startup_timeout(), DEFAULT_STARTUP_TIMEOUT);
        assert!(matches!(defs[1].transport, Transport::Http { .. }));
    }

    #[test]
    fn a_legacy_sse_server_is_a_url_with_its_transport() {
        let defs = check(
            "[mcp.servers.old]\nurl = \"http://127.0.0.1:3001/sse\"\ntransport = \"sse\"\n\
             [mcp.servers.new]\nurl = \"http://127.0.0.1:3001/mcp\"\ntransport = \"streamable_http\"\n",
        )
        .unwrap();
        assert!(
            matches!(defs[1].transport, Transport::Sse { .. }),
            "{defs:?}"
        );
        assert!(
            matches!(defs[0].transport, Transport::Http { .. }),
            "{defs:?}"
        );
        let e =
            check("[mcp.servers.x]\nurl = \"http://h/\"\ntransport = \"websocket\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "chock.toml: mcp.servers.x.transport: `websocket` is not `streamable_http` or `sse`"
        );
        let e = check("[mcp.servers.x]\ncommand = \"a\"\ntransport = \"sse\"\n").unwrap_err();
        assert_eq!(e.field, "transport");
    }

    #[test]
    fn bad_tables_name_the_file_and_field() {
        let e = check("[mcp.servers.x]\ncommand = \"a\"\nurl = \"http://h/\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "chock.toml: mcp.servers.x.url: give `command` (a stdio server) or `url` (a streamable HTTP server), not both"
        );
        let e = check("[mcp.servers.x]\ncommand = \"a\"\nenv = [\"LD_PRELOAD\"]\n").unwrap_err();
        assert_eq!(e.field, "env");
        let e = check("[mcp.servers.x]\ncommand = \"a\"\nstartup_timeout_secs = 0\n").unwrap_err();
        assert_eq!(e.field, "startup_timeout_secs");
        let e = check("[mcp.servers.\"a.b\"]\ncommand = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("one label"), "{e}");
        let e = check("[mcp.servers.x]\nurl = \"file:///etc\"\n").unwrap_err();
        assert_eq!(e.field, "url");
        let e = check("[mcp.servers.x]\ncommand = \"a\"\ncache = [\"npm\"]\n").unwrap_err();
        assert_eq!(e.field, "cache");
        assert!(check("[mcp.servers.x]\n").is_err());
    }
}
