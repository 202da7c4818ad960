//! The files a project's stdio server runs, pinned by content.
//!
//! Trusting a definition covers its text; `python3 srv.py` runs whatever `srv.py` holds. So when
//! the person trusts a project's server, every word of its command line (the command, each
//! argument) that names something inside the project is pinned beside the definition's hash, and
//! every start checks the project again: a file that differs, is gone, or is new since the trust
//! makes the server "changed" (refused until `chock mcp trust` again). The server itself runs
//! from the real project, read-only (chock-session's service), so what is checked here is what it
//! runs; the agent's workspace is not in its sandbox at all.
//!
//! A word names a path when it is one as a whole: relative to the project (the server's working
//! directory) or absolute; a command without a `/` is looked up on the PATH the server gets, as
//! its sandbox does. Decided, per what the path is:
//! - a regular file inside the project (symlinks resolved, all inside it): pinned as the SHA-256
//!   of its content (`sha256:<hex>`);
//! - a name inside the project whose symlinks lead out of it (a venv's `bin/python`): never
//!   followed out; pinned as where it leads (`outside:<path>`), so pointing it elsewhere is a change;
//! - a directory: not pinned (a tree changes with every edit, and which of its files the server
//!   loads is the server's business); `chock mcp trust` says so, and reviewing it is the person's;
//! - anything else (nothing there, a path outside the project, a device or socket): not pinned.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use chock_policy::mcp::{ServerDef, Transport};
use sha2::{Digest, Sha256};

use chock_protocol::log::McpServer;

use crate::server::StartContext;
use crate::trust::Origin;
use crate::{Configured, McpError};

/// What a server's command line names inside the project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectFiles {
    /// The word as written → its pin (`sha256:<hex>` or `outside:<path>`).
    pub pinned: BTreeMap<String, String>,
    /// Words naming something inside the project that is not pinned, with why (a directory).
    pub unpinned: Vec<(String, String)>,
}

/// The pins of `def`'s command line against `project` (canonical): empty for an HTTP server.
/// `server` names it in errors.
pub fn project_files(def: &ServerDef, project: &Path) -> Result<ProjectFiles, McpError> {
    let mut out = ProjectFiles::default();
    let Transport::Stdio { command, args } = &def.transport else {
        return Ok(out);
    };
    let command_path = if command.contains('/') {
        Some(in_project(project, command))
    } else {
        on_path(project, command)
    };
    let words = std::iter::once((command, command_path))
        .chain(args.iter().map(|a| (a, Some(in_project(project, a)))));
    for (word, path) in words {
        let Some(path) = path else { continue };
        if out.pinned.contains_key(word) {
            continue;
        }
        match pin(project, &path).map_err(|problem| McpError::ProjectFile {
            server: def.name.clone(),
            word: word.clone(),
            path: path.clone(),
            problem,
        })? {
            Pin::File(p) => {
                out.pinned.insert(word.clone(), p);
            }
            Pin::Directory => out.unpinned.push((
                word.clone(),
                "a directory: not pinned (only files are); review what the server loads from it"
                    .into(),
            )),
            Pin::Nothing => {}
        }
    }
    Ok(out)
}

/// For a project's stdio server: the files its command line names, from the real project now,
/// checked against the pins of its trust (unless the person is trusting it now, when they are
/// what will be pinned). A difference is refused and logged like an untrusted definition.
/// `None`: nothing to pin (the person's own or an editor's server, an HTTP one).
pub(crate) fn checked(
    configured: &Configured,
    cx: &StartContext,
    log: &chock_log::Log,
) -> Result<Option<BTreeMap<String, String>>, McpError> {
    let Origin::Project { project, .. } = &configured.origin else {
        return Ok(None);
    };
    if !matches!(configured.def.transport, Transport::Stdio { .. }) {
        return Ok(None);
    }
    let name = &configured.def.name;
    let refuse = |e: McpError| -> McpError {
        let _ = log.record(
            None,
            McpServer::Refused {
                server: name.clone(),
                reason: e.to_string(),
            },
        );
        e
    };
    let files = project_files(&configured.def, project).map_err(refuse)?;
    if !cx.trusting {
        let store = cx.trust.lock().map_err(|_| McpError::Poisoned)?;
        if let Some(change) = store.files_changed(&configured.origin, name, &files.pinned) {
            return Err(refuse(McpError::FileChanged {
                server: name.clone(),
                change,
            }));
        }
    }
    Ok(Some(files.pinned))
}

enum Pin {
    File(String),
    Directory,
    Nothing,
}

/// `word` as a path the server would open: relative to the project, lexically normalised.
fn in_project(project: &Path, word: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in project.join(word).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The file a command without `/` runs: the first candidate on the PATH the sandbox gets (the
/// host's, else the default), a relative entry resolved against the project.
fn on_path(project: &Path, command: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| chock_sandbox::DEFAULT_PATH.to_string());
    path.split(':')
        .map(|dir| in_project(project, &format!("{dir}/{command}")))
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| !m.is_dir()))
}

/// What `path` is pinned as. Errors are in words.
fn pin(project: &Path, path: &Path) -> Result<Pin, String> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(Pin::Nothing);
    }
    let named_inside = path.starts_with(project);
    let Ok(resolved) = path.canonicalize() else {
        // A dangling symlink: where it leads, when it is the project's.
        return Ok(if named_inside {
            Pin::File(format!(
                "outside:{}",
                std::fs::read_link(path).unwrap_or_default().display()
            ))
        } else {
            Pin::Nothing
        });
    };
    if !resolved.starts_with(project) {
        return Ok(if named_inside {
            Pin::File(format!("outside:{}", resolved.display()))
        } else {
            Pin::Nothing
        });
    }
    let meta = std::fs::metadata(&resolved).map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return Ok(Pin::Directory);
    }
    if !meta.is_file() {
        return Ok(Pin::Nothing);
    }
    let mut file = std::fs::File::open(&resolved).map_err(|e| e.to_string())?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(Pin::File(format!(
        "sha256:{}",
        hex::encode(hasher.finalize())
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(command: &str, args: &[&str]) -> ServerDef {
        chock_policy::mcp::RawServer {
            command: Some(command.into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
        .check(Path::new("chock.toml"), "s")
        .unwrap()
    }

    #[test]
    fn files_inside_are_pinned_by_content_and_nothing_is_followed_out() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(project.join("srv.py"), "print(1)").unwrap();
        std::fs::create_dir(project.join("tools")).unwrap();
        std::fs::write(outside.path().join("x.py"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("x.py"), project.join("out.py")).unwrap();
        std::os::unix::fs::symlink("srv.py", project.join("in.py")).unwrap();
        let abs = project.join("srv.py").display().to_string();
        let d = def(
            "python3",
            &["srv.py", "./in.py", "out.py", "tools", "-u", &abs, "../x"],
        );
        let files = project_files(&d, &project).unwrap();
        let hash = files.pinned["srv.py"].clone();
        assert!(hash.starts_with("sha256:"), "{hash}");
        assert_eq!(files.pinned["./in.py"], hash, "a link inside is its target");
        assert_eq!(files.pinned[&abs], hash);
        let out = &files.pinned["out.py"];
        assert!(
            out.starts_with("outside:") && out.ends_with("x.py"),
            "{out}"
        );
        assert_eq!(files.pinned.len(), 4, "{:?}", files.pinned);
        assert_eq!(files.unpinned.len(), 1);
        assert_eq!(files.unpinned[0].0, "tools");
        std::fs::write(project.join("srv.py"), "print(2)").unwrap();
        let again = project_files(&d, &project).unwrap();
        assert_ne!(again.pinned["srv.py"], hash);
    }
}
