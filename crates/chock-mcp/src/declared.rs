//! What a server may be given, checked again each time it starts: its `read` and `cache` paths by
//! the host path checker every table's paths go through (with this session's project, org bundle
//! and `[sandbox]` table, and the session's other servers), and its `env` names by the rule
//! `[sandbox] env` follows (never a variable the person's configuration keeps a key in). A
//! cache swapped for a link since the last session, or a path the org bundle has forbidden since,
//! is refused here with the file, server, field and path, before anything is started.

use std::path::PathBuf;

use chock_policy::DeclaredPath;
use chock_policy::mcp::McpConfigError;
use chock_session::Session;

use crate::trust::Origin;
use crate::{Configured, McpError};

/// The file a definition is reported under.
fn file_of(configured: &Configured) -> PathBuf {
    match &configured.origin {
        Origin::Project { file, .. } | Origin::User { file } => file.clone(),
        Origin::Editor => PathBuf::from("session/new"),
    }
}

/// Checks `configured` for `session`, beside the `others` it starts with; a refusal is logged
/// (`mcp.server` `refused`) before it is returned.
pub(crate) fn check_logged(
    session: &Session,
    configured: &Configured,
    others: &[Configured],
) -> Result<(), McpError> {
    check(session, configured, others).inspect_err(|e| {
        let _ = session.log().record(
            None,
            chock_protocol::log::McpServer::Refused {
                server: configured.def.name.clone(),
                reason: e.to_string(),
            },
        );
    })
}

fn check(
    session: &Session,
    configured: &Configured,
    others: &[Configured],
) -> Result<(), McpError> {
    let def = &configured.def;
    let file = file_of(configured);
    let policy = session.policy();
    let mut around: Vec<DeclaredPath> = policy.sandbox().declared();
    around.extend(
        others
            .iter()
            .filter(|o| o.def.name != def.name)
            .flat_map(|o| o.def.declared()),
    );
    def.check_paths(&file, policy.host_paths(), &around)
        .map_err(|e| refused(&def.name, &e))?;
    for name in &def.env {
        chock_policy::check_passed_env(name, session.withheld_env()).map_err(|problem| {
            let problem = if problem.contains(name.as_str()) {
                problem
            } else {
                format!("`{name}` {problem}")
            };
            refused(
                &def.name,
                &McpConfigError {
                    file: file.clone(),
                    server: def.name.clone(),
                    field: "env".into(),
                    problem,
                },
            )
        })?;
    }
    Ok(())
}

fn refused(server: &str, e: &McpConfigError) -> McpError {
    McpError::Refused {
        server: server.to_string(),
        message: e.to_string(),
    }
}

/// Makes a declared cache directory that is missing, never following a link at its own name: an
/// existing one must be a directory (checked with `lstat`), and a missing one is made by `mkdir`,
/// which fails on a link put there since. (Its directories above were checked with it: none lies
/// under a path a confined process may write.)
pub(crate) fn make_cache(cache: &std::path::Path) -> std::io::Result<()> {
    let is_dir = |m: std::fs::Metadata| {
        if m.file_type().is_dir() {
            Ok(())
        } else {
            Err(std::io::Error::other(
                "is not a directory (a link there is never followed)",
            ))
        }
    };
    match std::fs::symlink_metadata(cache) {
        Ok(meta) => is_dir(meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = cache.parent() {
                std::fs::create_dir_all(parent)?;
            }
            match std::fs::create_dir(cache) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    is_dir(std::fs::symlink_metadata(cache)?)
                }
                other => other,
            }
        }
        Err(e) => Err(e),
    }
}
