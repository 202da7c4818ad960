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
    /// The files its command line names inside the project, by the word as written → pin
    /// (crate::files). Absent in a record trusted before files were pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files: Option<BTreeMap<String, String>>,
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
/// (chock-dirs resolves it, as every other directory of Chock's.)
pub fn default_trust_path() -> Result<PathBuf, McpError> {
    chock_dirs::mcp_trust_file().map_err(|_| McpError::NoHome)
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

/// How a file a trusted server's command line names in the project changed since the trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// Its content (or, for a link leading out of the project, where it leads) differs.
    Differs {
        /// The word of the command line.
        word: String,
    },
    /// It was pinned and is gone (or is no longer a file).
    Gone {
        /// The word of the command line.
        word: String,
    },
    /// It names a file now that was not there when the server was trusted.
    New {
        /// The word of the command line.
        word: String,
    },
    /// The trust was recorded before Chock pinned files, and the command line names this one.
    NeverPinned {
        /// The word of the command line.
        word: String,
    },
}

impl FileChange {
    /// The word of the command line that names the file.
    pub fn word(&self) -> &str {
        match self {
            FileChange::Differs { word }
            | FileChange::Gone { word }
            | FileChange::New { word }
            | FileChange::NeverPinned { word } => word,
        }
    }
}

impl std::fmt::Display for FileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileChange::Differs { word } => {
                write!(
                    f,
                    "its file `{word}` in the project differs from the one trusted"
                )
            }
            FileChange::Gone { word } => {
                write!(
                    f,
                    "its file `{word}`, pinned when it was trusted, is gone from the project"
                )
            }
            FileChange::New { word } => write!(
                f,
                "`{word}` of its command line names a file in the project that was not there when it was trusted"
            ),
            FileChange::NeverPinned { word } => write!(
                f,
                "it was trusted before Chock pinned the files a server runs, and its file `{word}` is not pinned"
            ),
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

    /// Records the files the trusted definition's command line names in the project.
    pub fn pin_files(&mut self, origin: &Origin, server: &str, files: &BTreeMap<String, String>) {
        self.record_mut(origin, server).files = Some(files.clone());
    }

    /// How the files a trusted server's command line names now (`now`, from the real project)
    /// differ from those pinned when it was trusted; `None`: they do not.
    pub fn files_changed(
        &self,
        origin: &Origin,
        server: &str,
        now: &BTreeMap<String, String>,
    ) -> Option<FileChange> {
        let record = self.record(origin, server)?;
        let Some(pinned) = &record.files else {
            // Trusted before files were pinned: only a server that names none is unchanged.
            return now
                .keys()
                .next()
                .map(|word| FileChange::NeverPinned { word: word.clone() });
        };
        for (word, pin) in pinned {
            match now.get(word) {
                None => return Some(FileChange::Gone { word: word.clone() }),
                Some(p) if p != pin => return Some(FileChange::Differs { word: word.clone() }),
                Some(_) => {}
            }
        }
        now.keys()
            .find(|word| !pinned.contains_key(*word))
            .map(|word| FileChange::New { word: word.clone() })
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

    #[test]
    fn files_are_checked_against_their_pins_and_an_older_record_asks_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let origin = Origin::Project {
            project: "/p".into(),
            file: "/p/chock.toml".into(),
        };
        // A record written before files were pinned: read as it is, trusted while the server
        // names no file of the project, asked again once it does.
        std::fs::write(
            &path,
            r#"{"scopes":{"project:/p":{"s":{"definition":"h1","tools":{"t":"x"}}}}}"#,
        )
        .unwrap();
        let mut store = TrustStore::open(&path).unwrap();
        assert_eq!(store.state(&origin, "s", "h1"), TrustState::Trusted);
        let none = BTreeMap::new();
        let one: BTreeMap<String, String> = [("srv.py".to_string(), "sha256:a".to_string())].into();
        assert_eq!(store.files_changed(&origin, "s", &none), None);
        let change = store.files_changed(&origin, "s", &one).unwrap();
        assert_eq!(
            change,
            FileChange::NeverPinned {
                word: "srv.py".into()
            }
        );
        assert!(change.to_string().contains("`srv.py`"), "{change}");

        store.pin_files(&origin, "s", &one);
        store.save().unwrap();
        let store = TrustStore::open(&path).unwrap();
        assert_eq!(store.files_changed(&origin, "s", &one), None);
        let other: BTreeMap<String, String> =
            [("srv.py".to_string(), "sha256:b".to_string())].into();
        assert_eq!(
            store.files_changed(&origin, "s", &other),
            Some(FileChange::Differs {
                word: "srv.py".into()
            })
        );
        assert_eq!(
            store.files_changed(&origin, "s", &none),
            Some(FileChange::Gone {
                word: "srv.py".into()
            })
        );
        let more: BTreeMap<String, String> = one
            .clone()
            .into_iter()
            .chain([("lib.py".to_string(), "sha256:c".to_string())])
            .collect();
        assert_eq!(
            store.files_changed(&origin, "s", &more),
            Some(FileChange::New {
                word: "lib.py".into()
            })
        );
    }
}
