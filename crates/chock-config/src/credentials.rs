//! Where a provider's key comes from, and where `chock login` puts it.
//!
//! Order of lookup: the environment variable the provider's config names (`key_env`), then the OS
//! keyring (the Secret Service, where one is running: see [`crate::keyring`]), then a file
//! `$XDG_DATA_HOME/chock/credentials/<provider>` (default `~/.local/share/chock/credentials/<provider>`)
//! created 0600 in a 0700 directory. `chock login` stores in the keyring when it can, else in the file. A key is handed to the provider client and to the log's
//! redaction funnel, and to nothing else: never a tool call's environment, never an event.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A provider's key. Its `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key (trimmed of surrounding whitespace and newlines).
    pub fn new(key: &str) -> Option<ApiKey> {
        let key = key.trim();
        if key.is_empty() {
            None
        } else {
            Some(ApiKey(key.to_string()))
        }
    }

    /// The key itself, for the provider client and the redaction funnel only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Where a key was found, for `--verbose` and errors (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The named environment variable.
    Env(String),
    /// The OS keyring.
    Keyring,
    /// A credential file.
    File(PathBuf),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Env(var) => write!(f, "environment variable {var}"),
            Self::Keyring => f.write_str("the OS keyring (Secret Service)"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Why a credential could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// A provider name that cannot be a file name.
    #[error("provider name {0:?} is not usable: use letters, digits, '-' and '_'")]
    BadName(String),
    /// No data directory (neither XDG_DATA_HOME nor HOME).
    #[error("no place to store credentials: neither XDG_DATA_HOME nor HOME is set")]
    NoDataDir,
    /// Nothing was given.
    #[error("no key was given on standard input")]
    Empty,
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The stored file is readable by others: refused, as ssh refuses such a key.
    #[error(
        "{path} is readable by others (mode {mode:o}); run `chmod 600 {path}` or `chock login` again"
    )]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
}

/// `$XDG_DATA_HOME/chock/credentials`, else `~/.local/share/chock/credentials`.
/// (chock-dirs resolves it, as every other directory of Chock's.)
pub fn credentials_dir() -> Result<PathBuf, CredentialError> {
    chock_dirs::credentials_dir().map_err(|_| CredentialError::NoDataDir)
}

fn check_name(provider: &str) -> Result<(), CredentialError> {
    let ok = !provider.is_empty()
        && provider.len() <= 64
        && provider
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(CredentialError::BadName(provider.to_string()))
    }
}

/// Stores a key for `provider` in `dir`, replacing any earlier one. Returns the file written.
///
/// The file is written beside its final name with mode 0600 from creation (never briefly readable), then
/// renamed into place.
pub fn store_in(dir: &Path, provider: &str, key: &ApiKey) -> Result<PathBuf, CredentialError> {
    check_name(provider)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CredentialError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    let path = dir.join(provider);
    let tmp = dir.join(format!(".{provider}.tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io(&tmp))?;
    file.write_all(key.expose().as_bytes()).map_err(io(&tmp))?;
    file.write_all(b"\n").map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    Ok(path)
}

/// Stores a key for `provider`: in the OS keyring when one takes it (and then an older file for the
/// provider is removed, so no copy stays behind), else in the credentials directory. Says where.
pub fn store(provider: &str, key: &ApiKey) -> Result<KeySource, CredentialError> {
    check_name(provider)?;
    if crate::keyring::store(provider, key) {
        if let Ok(dir) = credentials_dir() {
            let _ = std::fs::remove_file(dir.join(provider));
        }
        return Ok(KeySource::Keyring);
    }
    let path = store_in(&credentials_dir()?, provider, key)?;
    crate::keyring::forget(provider);
    Ok(KeySource::File(path))
}

/// Reads the stored key for `provider` from `dir`, if there is one.
pub fn load_from(dir: &Path, provider: &str) -> Result<Option<(ApiKey, PathBuf)>, CredentialError> {
    check_name(provider)?;
    let path = dir.join(provider);
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CredentialError::Io { path, source }),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredentialError::TooOpen { path, mode });
    }
    let text = std::fs::read_to_string(&path).map_err(|source| CredentialError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(ApiKey::new(&text).map(|key| (key, path)))
}

/// Finds the key for `provider`: the environment variable `key_env` names, else the stored credential.
pub fn find_key(
    provider: &str,
    key_env: Option<&str>,
) -> Result<Option<(ApiKey, KeySource)>, CredentialError> {
    if let Some(var) = key_env
        && let Some(key) = std::env::var(var).ok().as_deref().and_then(ApiKey::new)
    {
        return Ok(Some((key, KeySource::Env(var.to_string()))));
    }
    check_name(provider)?;
    if let Some(key) = crate::keyring::lookup(provider) {
        return Ok(Some((key, KeySource::Keyring)));
    }
    let dir = match credentials_dir() {
        Ok(dir) => dir,
        Err(CredentialError::NoDataDir) => return Ok(None),
        Err(err) => return Err(err),
    };
    Ok(load_from(&dir, provider)?.map(|(key, path)| (key, KeySource::File(path))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_key_is_0600_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("chock/credentials");
        let key = ApiKey::new("sk-test-123\n").unwrap();
        let path = store_in(&creds, "anthropic", &key).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let (read, from) = load_from(&creds, "anthropic").unwrap().unwrap();
        assert_eq!(read, key);
        assert_eq!(from, path);
        assert_eq!(load_from(&creds, "openai").unwrap(), None);
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = store_in(dir.path(), "x", &ApiKey::new("k").unwrap()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            load_from(dir.path(), "x"),
            Err(CredentialError::TooOpen { .. })
        ));
    }

    #[test]
    fn a_name_cannot_escape_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let key = ApiKey::new("k").unwrap();
        for bad in ["../x", "a/b", "", "."] {
            assert!(
                matches!(
                    store_in(dir.path(), bad, &key),
                    Err(CredentialError::BadName(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_never_prints_the_key() {
        let key = ApiKey::new("sk-secret").unwrap();
        assert!(!format!("{key:?}").contains("secret"));
    }
}
