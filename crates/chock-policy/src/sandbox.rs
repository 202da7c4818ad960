//! `[sandbox]`: extra paths bound into every confined call, and host environment names passed in.
//!
//! These are the only holes a project can open in the sandbox, so each is checked at load, before any
//! sandbox exists (security rule 2), and a bad one fails the whole load (rule 1): nothing runs.

use std::path::PathBuf;

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
    /// What each `toolchains` name expanded to on this host (its paths and names are in the
    /// lists above too), for `chock policy show` and the session log.
    pub toolchains: Vec<crate::toolchains::ExpandedToolchain>,
    /// Variables every call gets set to a value (not passed from the host): a toolchain's
    /// per-project cache (`GOCACHE` = this project's copy), each path also in `write`.
    pub set_env: Vec<(String, PathBuf)>,
    /// What confines each call (`[sandbox] isolation`).
    pub isolation: Isolation,
    /// Whether a microVM session snapshots its warm guest after each completed turn, so a fork
    /// at that turn starts its guest from it (`[sandbox] snapshots`, microVM only; its guests
    /// then share by virtio-9p, docs/microvm.md).
    pub snapshots: bool,
}

/// What confines a project's calls: the in-process sandbox alone, or that same sandbox built
/// inside a microVM guest with a kernel of its own (docs/microvm.md). There is no fallback from
/// one to the other: a guest that cannot start fails the call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// `"process"`: the layers built in-process on the host's kernel (the default).
    #[default]
    Process,
    /// `"microvm"`: the same layers, built by the same driver inside a guest.
    Microvm,
}

impl Isolation {
    /// The isolation a `[sandbox] isolation` value names, if any.
    pub fn parse(value: &str) -> Option<Isolation> {
        match value {
            "process" => Some(Isolation::Process),
            "microvm" => Some(Isolation::Microvm),
            _ => None,
        }
    }

    /// Its name in chock.toml.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Process => "process",
            Isolation::Microvm => "microvm",
        }
    }
}

impl SandboxConfig {
    /// Its read and write paths, for the host path checker (the nesting check across tables).
    pub fn declared(&self) -> Vec<crate::DeclaredPath> {
        let read = self
            .read
            .iter()
            .map(|p| (p, crate::Access::Read, "sandbox.read"));
        let write = self
            .write
            .iter()
            .map(|p| (p, crate::Access::Write, "sandbox.write"));
        read.chain(write)
            .map(|(path, access, field)| crate::DeclaredPath {
                path: path.clone(),
                access,
                field: field.to_string(),
            })
            .collect()
    }
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

/// The one rule for an environment name some table passes to a confined process (`[sandbox] env`,
/// an MCP server's `env`): `check_env_name`'s, and none of `withheld`, the variables the
/// person's configuration keeps keys in (each provider's `key_env`, the search backend's), which
/// only the session knows.
pub fn check_passed_env(name: &str, withheld: &[String]) -> Result<(), String> {
    check_env_name(name)?;
    if withheld.iter().any(|w| w == name) {
        return Err(format!(
            "`{name}` holds a key your configuration names (a provider's or the search backend's \
             `key_env`), which never reaches a confined process"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
