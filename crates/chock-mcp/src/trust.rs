//! What the person approved, recorded outside every project: the exact definition of each server a
//! project's chock.toml brings (so cloning a repository never starts a server), and the hash of
//! each tool definition a server offered when it was approved (so a server cannot swap a harmless
//! tool for a harmful one later). One JSON file, `$XDG_DATA_HOME/chock/mcp-trust.json` (default
//! `~/.local/share/chock/mcp-trust.json`); Chock's own data directory, which no call can write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::McpError;

/// Where a server's definition came from; what its trust and pins are recorded under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "origin", rename_all = "snake_case")]
pub enum Origin {
    /// A project's chock.toml: trusted only once the person trusts this exact definition.
    Project {
        /// The project (canonical).
        project: PathBuf,
        /// The chock.toml it was read from.
        file: PathBuf,
    },
    /// The person's own config.toml: trusted as written.
    User {
        /// The config.toml.
        file: PathBuf,
    },
    /// An editor passed it in ACP `session/new`: the person's editor configuration.
    Editor,
}

impl Origin {
    /// The word the log and `chock mcp list` use.
    pub fn word(&self) -> &'static str {
        match self {
            Origin::Project { .. } => "project",
            Origin::User { .. } => "user",
            Origin::Editor => "editor",
        }
    }

    /// The key its records are kept under.
    fn scope(&self) -> String {
        match self {
            Origin::Project { project, .. } => format!("project:{}", project.display()),
            Origin::User { .. } => "user".to_string(),
            Origin::Editor => "editor".to_string(),
        }
    }

    /// Whether a person must trust the definition before it starts.
    pub fn needs_trust(&self) -> bool {
        matches!(self, Origin::Project { .. })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
struct ServerRecord {
    /// The SHA-256 of the definition the person trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    definition: Option<String>,
    /// Tool name → SHA-256 of the definition approved.
    #[serde(default)]
    tools: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    scopes: BTreeMap<String, BTreeMap<String, ServerRecord>>,
}

/// The trust file, read once; [`TrustStore::save`] writes it back whole (by rename).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
    file: File,
}

/// The default trust file: `$XDG_DATA_HOME/chock/mcp-trust.json`, else under `$HOME`.
pub fn default_trust_path() -> Result<PathBuf, McpError> {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("chock/mcp-trust.json"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(McpError::NoHome)?;
    Ok(PathBuf::from(home).join(".local/share/chock/mcp-trust.json"))
}

/// What the store says of a server's definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    /// From config.toml or an editor: trusted as written.
    Own,
    /// The person trusted exactly this definition.
    Trusted,
    /// Never trusted.
    Untrusted,
    /// The person trusted an earlier definition; this one differs.
    Changed,
}

impl TrustState {
    /// Whether it may start.
    pub fn may_start(self) -> bool {
        matches!(self, TrustState::Own | TrustState::Trusted)
    }

    /// In words.
    pub fn word(self) -> &'static str {
        match self {
            TrustState::Own => "trusted (your own configuration)",
            TrustState::Trusted => "trusted",
            TrustState::Untrusted => "not trusted",
            TrustState::Changed => "changed since trusted",
        }
    }
}

impl TrustStore {
    /// Reads `path` (a missing file is an empty store).
    pub fn open(path: &Path) -> Result<TrustStore, McpError> {
        let file = match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| McpError::TrustFile {
                path: path.to_path_buf(),
                problem: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => {
                return Err(McpError::TrustFile {
                    path: path.to_path_buf(),
                    problem: e.to_string(),
                });
            }
        };
        Ok(TrustStore {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn record(&self, origin: &Origin, server: &str) -> Option<&ServerRecord> {
        self.file.scopes.get(&origin.scope())?.get(server)
    }

    fn record_mut(&mut self, origin: &Origin, server: &str) -> &mut ServerRecord {
        self.file
            .scopes
            .entry(origin.scope())
            .or_default()
            .entry(server.to_string())
            .or_default()
    }

    /// Whether the server with definition hash `hash` may start.
    pub fn state(&self, origin: &Origin, server: &str, hash: &str) -> TrustState {
        if !origin.needs_trust() {
            return TrustState::Own;
        }
        match self
            .record(origin, server)
            .and_then(|r| r.definition.as_deref())
        {
            Some(h) if h == hash => TrustState::Trusted,
            Some(_) => TrustState::Changed,
            None => TrustState::Untrusted,
        }
    }

    /// Records that the person trusts this exact definition. A new definition forgets the tool
    /// pins of the old one: its tools are approved again.
    pub fn trust(&mut self, origin: &Origin, server: &str, hash: &str) {
        let record = self.record_mut(origin, server);
        if record.definition.as_deref() != Some(hash) {
            record.tools.clear();
        }
        record.definition = Some(hash.to_string());
    }

    /// The pinned hash of `tool`'s definition, if it was approved.
    pub fn pinned(&self, origin: &Origin, server: &str, tool: &str) -> Option<&str> {
        self.record(origin, server)?
            .tools
            .get(tool)
            .map(String::as_str)
    }

    /// The tools approved for a server, by name.
    pub fn pinned_tools(&self, origin: &Origin, server: &str) -> Vec<String> {
        self.record(origin, server)
            .map(|r| r.tools.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Pins `tool`'s definition.
    pub fn pin(&mut self, origin: &Origin, server: &str, tool: &str, hash: &str) {
        self.record_mut(origin, server)
            .tools
            .insert(tool.to_string(), hash.to_string());
    }

    /// Writes the store (a temporary file renamed over the old one).
    pub fn save(&self) -> Result<(), McpError> {
        let err = |e: std::io::Error| McpError::TrustFile {
            path: self.path.clone(),
            problem: e.to_string(),
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.file).unwrap_or_default();
        std::fs::write(&tmp, text + "\n").map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_server_is_trusted_only_as_defined() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let origin = Origin::Project {
            project: "/p".into(),
            file: "/p/chock.toml".into(),
        };
        let mut store = TrustStore::open(&path).unwrap();
        assert_eq!(store.state(&origin, "s", "h1"), TrustState::Untrusted);
        store.trust(&origin, "s", "h1");
        store.pin(&origin, "s", "tool", "t1");
        store.save().unwrap();
        let mut store = TrustStore::open(&path).unwrap();
        assert_eq!(store.state(&origin, "s", "h1"), TrustState::Trusted);
        assert_eq!(store.state(&origin, "s", "h2"), TrustState::Changed);
        assert_eq!(store.pinned(&origin, "s", "tool"), Some("t1"));
        store.trust(&origin, "s", "h2");
        assert_eq!(store.pinned(&origin, "s", "tool"), None);
        let user = Origin::User {
            file: "/c.toml".into(),
        };
        assert_eq!(store.state(&user, "s", "x"), TrustState::Own);
    }
}
