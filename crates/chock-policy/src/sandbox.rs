//! `[sandbox]`: extra paths bound into every confined call, and host environment names passed in.
//!
//! These are the only holes a project can open in the sandbox, so each is checked at load, before any
//! sandbox exists (security rule 2), and a bad one fails the whole load (rule 1): nothing runs.

use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// The validated `[sandbox]` table of a project.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SandboxConfig {
    /// Paths bound read-only.
    pub read: Vec<PathBuf>,
    /// Paths bound read-write.
    pub write: Vec<PathBuf>,
    /// Names of host environment variables passed into the sandbox (their values are read at call time).
    pub env: Vec<String>,
}

/// What a path check needs to know about the host.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathContext {
    /// `$HOME`, for `~/` and for refusing the whole home directory.
    pub home: Option<PathBuf>,
    /// The real project directory (absolute when known).
    pub project_dir: Option<PathBuf>,
    /// The policy files being loaded (the project's chock.toml, the org bundle).
    pub policy_files: Vec<PathBuf>,
    /// Paths the org bundle forbids, each with the `file:line` of its entry.
    pub forbidden: Vec<(PathBuf, String)>,
    /// Chock's own directories on the host (config, data, state): stored API keys, the seal key,
    /// the session logs and the provider configuration. None of them may be seen from inside.
    pub chock_dirs: Vec<PathBuf>,
}

/// `path` and, when it exists and differs, where it really leads: a host path given through a
/// symlink (`$HOME` on a symlinked /home, a forbidden `~/.ssh` that links elsewhere) must be refused
/// under either name.
pub(crate) fn with_real(path: PathBuf) -> Vec<PathBuf> {
    match path.canonicalize() {
        Ok(real) if real != path => vec![path, real],
        _ => vec![path],
    }
}

/// Whether a path is bound read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// An org bundle's `forbid` entry: only expanded and made absolute.
    Forbid,
}

/// Expands `~/`, requires an absolute path, and refuses `..` and `.` components.
pub(crate) fn expand(raw: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    if raw == "~" {
        return Err("is the whole home directory".into());
    }
    let path = if let Some(rest) = raw.strip_prefix("~/") {
        let Some(home) = home else {
            return Err("starts with `~/` but $HOME is not set".into());
        };
        home.join(rest)
    } else if raw.starts_with('~') {
        return Err("only `~/` is expanded (not `~user`)".into());
    } else {
        PathBuf::from(raw)
    };
    if !path.is_absolute() {
        return Err("must be absolute or start with `~/`".into());
    }
    let mut clean = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::RootDir => {}
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err("holds `.` or `..`: write the path it means".into());
            }
        }
    }
    Ok(clean)
}

/// Checks one expanded path; on success returns it.
pub(crate) fn check_path(path: &Path, access: Access, ctx: &PathContext) -> Result<(), String> {
    if access == Access::Forbid {
        return Ok(());
    }
    check_lexical(path, access, ctx)?;
    // A symlink may point somewhere the lexical check would refuse: check where it really leads too.
    if let Ok(real) = path.canonicalize() {
        if real != path {
            check_lexical(&real, access, ctx)
                .map_err(|why| format!("leads to {} which {why}", real.display()))?;
        }
        if std::fs::metadata(&real).is_ok_and(|m| m.file_type().is_socket()) {
            return Err(
                "is a socket: a socket would let the sandbox talk to a host process".into(),
            );
        }
    }
    Ok(())
}

fn check_lexical(path: &Path, access: Access, ctx: &PathContext) -> Result<(), String> {
    if path == Path::new("/") {
        return Err("is the whole filesystem".into());
    }
    for system in ["/proc", "/sys", "/dev"] {
        if path.starts_with(system) {
            return Err(format!(
                "is under {system}, which the sandbox builds itself"
            ));
        }
    }
    if let Some(home) = &ctx.home {
        for home in with_real(home.clone()) {
            if home.starts_with(path) {
                return Err(format!(
                    "is or contains the home directory {}",
                    home.display()
                ));
            }
        }
    }
    for dir in &ctx.chock_dirs {
        if dir.starts_with(path) || path.starts_with(dir) {
            return Err(format!(
                "overlaps Chock's own directory {} (stored keys, the seal key, session logs, provider \
                 configuration, the daemon's socket), which nothing inside the sandbox may see",
                dir.display()
            ));
        }
    }
    for file in &ctx.policy_files {
        if file == path {
            return Err("is a policy file, which the sandbox binds read-only itself".into());
        }
        if access == Access::Write && file.starts_with(path) {
            return Err(format!(
                "contains the policy file {}, which must stay read-only",
                file.display()
            ));
        }
    }
    if access == Access::Write
        && let Some(project) = &ctx.project_dir
        && (project.starts_with(path) || path.starts_with(project))
    {
        return Err(format!(
            "overlaps the real project {}, which is changed only through a reviewed apply",
            project.display()
        ));
    }
    for (forbidden, place) in &ctx.forbidden {
        if forbidden.starts_with(path) || path.starts_with(forbidden) {
            return Err(format!(
                "overlaps {}, which the org bundle forbids at {place}",
                forbidden.display()
            ));
        }
    }
    Ok(())
}

/// Environment names never passed in: each makes the loader or a shell run code or read files the
/// call did not name. This is the family glibc itself drops for setuid programs, plus the shell's.
const REFUSED_ENV_PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_"];
const REFUSED_ENV_NAMES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "GCONV_PATH",
    "NLSPATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "MALLOC_TRACE",
    "GLIBC_TUNABLES",
];

/// The variables Chock's own providers read their API keys from by default. Passing one in would hand
/// the model's key to every tool call. (A provider configured with another `key_env` is the agent's to
/// keep out: this crate cannot see the user's config.)
const KEY_ENV_NAMES: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AIAND_API_KEY"];

/// Checks one `env` name.
pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(
            "is not a variable name (letters, digits and `_`, not starting with a digit)".into(),
        );
    }
    if REFUSED_ENV_NAMES.contains(&name) || REFUSED_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
    {
        return Err(format!(
            "`{name}` makes the loader or a shell run code the call did not name"
        ));
    }
    if KEY_ENV_NAMES.contains(&name) {
        return Err(format!(
            "`{name}` holds a model provider's API key, which never reaches a tool call"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> PathContext {
        PathContext {
            home: Some(PathBuf::from("/home/u")),
            project_dir: Some(PathBuf::from("/home/u/proj")),
            policy_files: vec![
                PathBuf::from("/home/u/proj/chock.toml"),
                PathBuf::from("/etc/chock/org.toml"),
            ],
            forbidden: vec![(PathBuf::from("/srv/secret"), "org.toml:4".into())],
            chock_dirs: vec![
                PathBuf::from("/home/u/.config/chock"),
                PathBuf::from("/home/u/.local/share/chock"),
            ],
        }
    }

    fn refused(raw: &str, access: Access) -> String {
        let c = ctx();
        match expand(raw, c.home.as_deref()) {
            Err(why) => why,
            Ok(path) => check_path(&path, access, &c).expect_err(raw),
        }
    }

    #[test]
    fn paths_that_would_open_the_sandbox_are_refused() {
        assert!(refused("/", Access::Read).contains("whole filesystem"));
        assert!(refused("~", Access::Read).contains("home"));
        assert!(refused("~/", Access::Read).contains("home directory"));
        assert!(refused("/home", Access::Read).contains("home directory"));
        assert!(refused("/proc/self", Access::Read).contains("/proc"));
        assert!(refused("/dev", Access::Read).contains("/dev"));
        assert!(refused("/sys/fs/cgroup", Access::Write).contains("/sys"));
        assert!(refused("~/proj/chock.toml", Access::Read).contains("policy file"));
        assert!(refused("/etc/chock", Access::Write).contains("policy file"));
        assert!(refused("~/proj/src", Access::Write).contains("real project"));
        assert!(refused("/srv", Access::Read).contains("org bundle forbids at org.toml:4"));
        assert!(refused("/srv/secret/x", Access::Read).contains("org bundle"));
        assert!(refused("relative/dir", Access::Read).contains("absolute"));
        assert!(refused("/usr/../etc", Access::Read).contains(".."));
        assert!(refused("~root/x", Access::Read).contains("~/"));
        assert!(refused("~/.local/share", Access::Read).contains("Chock's own directory"));
        assert!(
            refused("~/.local/share/chock/credentials", Access::Read)
                .contains("/home/u/.local/share/chock")
        );
        assert!(refused("~/.config", Access::Write).contains("Chock's own directory"));
    }

    #[test]
    fn a_home_behind_a_symlink_is_refused_under_its_real_name_too() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("data/u");
        std::fs::create_dir_all(&real).unwrap();
        let link = dir.path().join("home-u");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let ctx = PathContext {
            home: Some(link),
            ..PathContext::default()
        };
        let parent = real.parent().unwrap().canonicalize().unwrap();
        let err = check_path(&parent, Access::Read, &ctx).unwrap_err();
        assert!(err.contains("home directory"), "{err}");
    }

    #[test]
    fn ordinary_paths_pass_and_tilde_expands() {
        let c = ctx();
        let path = expand("~/.cargo/registry", c.home.as_deref()).unwrap();
        assert_eq!(path, PathBuf::from("/home/u/.cargo/registry"));
        check_path(&path, Access::Read, &c).unwrap();
        check_path(Path::new("/home/u/proj/docs"), Access::Read, &c).unwrap();
        check_path(Path::new("/opt/toolchain"), Access::Write, &c).unwrap();
    }

    #[test]
    fn a_symlink_is_checked_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("root");
        std::os::unix::fs::symlink("/", &link).unwrap();
        let err = check_path(&link, Access::Read, &PathContext::default()).unwrap_err();
        assert!(err.contains("whole filesystem"), "{err}");
    }

    #[test]
    fn a_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let err = check_path(&sock, Access::Read, &PathContext::default()).unwrap_err();
        assert!(err.contains("socket"), "{err}");
    }

    #[test]
    fn env_names() {
        check_env_name("CARGO_HOME").unwrap();
        check_env_name("_X1").unwrap();
        assert!(check_env_name("1X").is_err());
        assert!(check_env_name("A-B").is_err());
        assert!(check_env_name("").is_err());
        assert!(check_env_name("LD_PRELOAD").unwrap_err().contains("loader"));
        assert!(check_env_name("LD_LIBRARY_PATH").is_err());
        assert!(check_env_name("BASH_ENV").is_err());
        assert!(check_env_name("BASH_FUNC_x%%").is_err());
        assert!(
            check_env_name("ANTHROPIC_API_KEY")
                .unwrap_err()
                .contains("API key")
        );
        assert!(check_env_name("OPENAI_API_KEY").is_err());
    }
}
