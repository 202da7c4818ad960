//! Where the policy files are and how they are read: the org bundle's path, the project's chock.toml,
//! Chock's own directories, and the checks made before a file is even read.

use std::path::{Path, PathBuf};

use crate::error::{ErrorKind, PolicyError};

/// Where the org bundle is read when `CHOCK_ORG_POLICY` is not set.
pub const DEFAULT_ORG_BUNDLE: &str = "/etc/chock/org.toml";
/// The environment variable naming another org bundle path.
pub const ORG_POLICY_ENV: &str = "CHOCK_ORG_POLICY";
/// The project file's name.
pub const PROJECT_FILE: &str = "chock.toml";

/// The text of one policy file and the name it is reported under.
#[derive(Debug, Clone)]
pub struct Source {
    /// The path as named when loading; every error about this file starts with it.
    pub path: PathBuf,
    /// The whole file, kept so errors can quote the offending text.
    pub text: String,
}

/// Everything [`crate::Policy::from_sources`] reads, so tests can load a policy with no files or environment.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The project's chock.toml, if it has one.
    pub project: Option<Source>,
    /// The org bundle, if there is one.
    pub org: Option<Source>,
    /// The real project directory (absolute), for refusing write paths into it.
    pub project_dir: Option<PathBuf>,
    /// `$HOME`, for `~/` and for refusing the whole home directory.
    pub home: Option<PathBuf>,
    /// Chock's own directories (see [`chock_dirs_from_env`]), which no `[sandbox]` path may overlap.
    /// The defaults under `home` are always added, so a test that gives only `home` is covered too.
    pub chock_dirs: Vec<PathBuf>,
    /// The person's config.toml, if they have one: only its `[sandbox] toolchains` is read here
    /// (`user_config.rs`), merged with the project's.
    pub user: Option<Source>,
}

/// Whether a policy file must exist. A file someone named (the org bundle in `$CHOCK_ORG_POLICY`, a
/// table given to `lint`) must: a missing one would silently drop its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// A missing file is an error.
    Required,
    /// A missing file is read as no file.
    Optional,
}

/// Where the org bundle is: `$CHOCK_ORG_POLICY` (then it is [`Presence::Required`]), else
/// `/etc/chock/org.toml` ([`Presence::Optional`]).
pub fn org_bundle_path() -> (PathBuf, Presence) {
    match std::env::var_os(ORG_POLICY_ENV) {
        Some(path) if !path.is_empty() => (PathBuf::from(path), Presence::Required),
        _ => (PathBuf::from(DEFAULT_ORG_BUNDLE), Presence::Optional),
    }
}

/// The path chock.toml is reported under for a project directory (`chock.toml` for `.`).
pub fn project_file_path(project_dir: &Path) -> PathBuf {
    if project_dir == Path::new(".") || project_dir.as_os_str().is_empty() {
        PathBuf::from(PROJECT_FILE)
    } else {
        project_dir.join(PROJECT_FILE)
    }
}

/// Chock's own directories on this host, as chock-dirs resolves them for every part of Chock that
/// writes there (configuration, data, state, runtime; the defaults under `$HOME` are added by
/// [`crate::Policy::from_sources`]). They hold the provider configuration (a base URL the agent
/// could redirect), stored API keys, the seal key, the session logs and the daemon's socket: a
/// `[sandbox]` path reaching any of them would hand the agent a key, the means to forge the record,
/// or a way to answer its own questions.
pub fn chock_dirs_from_env() -> Vec<PathBuf> {
    chock_dirs::own_dirs()
}

/// The defaults of [`chock_dirs_from_env`] under a home directory.
pub(crate) fn default_chock_dirs(home: &Path) -> [PathBuf; 3] {
    chock_dirs::HOME_DEFAULTS.map(|dir| home.join(dir).join("chock"))
}

/// Refuses a project chock.toml that is a symlink leading outside the project (or nowhere). The
/// sandbox binds the policy file over itself; a link to a host file would bind that file into the
/// sandbox, and reading it as a table would quote its first line in the error.
pub(crate) fn refuse_foreign_link(file: &Path, project: &Path) -> Result<(), PolicyError> {
    let is_link = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(());
    }
    let why = match file.canonicalize() {
        Ok(real) if real.starts_with(project) => return Ok(()),
        Ok(real) => format!(
            "is a symlink to {}, outside the project {}; the policy file must be the project's own",
            real.display(),
            project.display()
        ),
        Err(err) => format!("is a symlink that leads nowhere readable ({err})"),
    };
    Err(PolicyError {
        file: file.to_path_buf(),
        line: 0,
        column: 0,
        kind: Box::new(ErrorKind::Io(why)),
        text: String::new(),
    })
}

/// Reads a file; `Ok(None)` when it does not exist and is [`Presence::Optional`].
pub fn read_source(path: &Path, presence: Presence) -> Result<Option<Source>, PolicyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(Source {
            path: path.to_path_buf(),
            text,
        })),
        // A dangling symlink is not "no file": an org that links its bundle from elsewhere must not
        // lose its rules silently when the target goes missing.
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound
                && presence == Presence::Optional
                && std::fs::symlink_metadata(path).is_err() =>
        {
            Ok(None)
        }
        Err(err) => Err(PolicyError {
            file: path.to_path_buf(),
            line: 0,
            column: 0,
            kind: Box::new(ErrorKind::Io(err.to_string())),
            text: String::new(),
        }),
    }
}
