//! Credentials a call never sees, even inside a directory it is shown.
//!
//! A declared path (`[sandbox] read = ["~/.cargo"]`, `["~/.config"]`) or a toolchain's shows a
//! whole directory, and some of the files tools keep beside their programs and caches are tokens:
//! cargo's registry token, npm's and PyPI's, `.netrc` passwords, the GitHub CLI's login. Each of
//! the known ones that lies inside a shown directory is covered before the call starts: a file by
//! an empty read-only file, a directory by an empty read-only directory. The list is reviewed data
//! (like the seccomp rules); docs/toolchains.md says what is on it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::host::mounts::builder::Builder;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, cstr};

/// Credential files and directories, below the home.
pub const HOME_CREDENTIALS: &[&str] = &[
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".docker/config.json",
    ".gem/credentials",
    ".pgpass",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube/config",
    ".ssh",
    ".gnupg",
    ".terraform.d/credentials.tfrc.json",
];

/// Variables naming a directory (or file, for an empty entry) a tool keeps credentials in
/// instead of the home's default, with the credential entries below it.
const MOVED_CREDENTIALS: &[(&str, &[&str])] = &[
    ("CARGO_HOME", &["credentials.toml", "credentials"]),
    ("NPM_CONFIG_USERCONFIG", &[""]),
    ("npm_config_userconfig", &[""]),
    ("NETRC", &[""]),
    ("GH_CONFIG_DIR", &[""]),
    (
        "XDG_CONFIG_HOME",
        &["gh", "hub", "git/credentials", "pip/pip.conf"],
    ),
    ("DOCKER_CONFIG", &["config.json"]),
    ("PIP_CONFIG_FILE", &[""]),
];

/// Every credential path of a host whose home is `home` and whose environment is `var`.
pub fn credential_paths(home: &Path, var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = HOME_CREDENTIALS.iter().map(|c| home.join(c)).collect();
    for (name, entries) in MOVED_CREDENTIALS {
        let Some(dir) = var(name).map(PathBuf::from).filter(|p| p.is_absolute()) else {
            continue;
        };
        for entry in *entries {
            let p = if entry.is_empty() {
                dir.clone()
            } else {
                dir.join(entry)
            };
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The credential paths of the host a plan is built on: below its home (the sandbox home is
/// the host's path) and the host user's `$HOME`, and where this process's environment moves them.
pub(crate) fn credentials_of(plan: &crate::wire::plan::Plan) -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name);
    let mut out = credential_paths(&plan.home, &var);
    if let Some(home) = var("HOME").map(PathBuf::from).filter(|h| *h != plan.home) {
        for p in credential_paths(&home, &var) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Where the empty file and directory the masks are bound from live: under the fresh root's
/// `/proc`, which the `/proc` mounted after them hides. They are never removed: a session's calls
/// carry each mask over into their own read overlays (`fresh.rs`), and the kernel will not move
/// a mount whose source was unlinked.
const FILE_SOURCE: &str = "/proc/.chock-credential-mask";
const DIR_SOURCE: &str = "/proc/.chock-credential-mask-dir";

/// Mask steps for each credential of `credentials` (host paths) that exists and lies inside one
/// of `shown` (the declared paths' resolved sources, which are also their targets). A declared
/// path that is a credential or lies inside one (`~/.ssh/id_ed25519`) fails the call: the table
/// asked to show a secret. Returns how many
/// were masked.
pub(crate) fn push_masks(
    b: &mut Builder,
    credentials: &[PathBuf],
    shown: &[PathBuf],
) -> Result<usize, SandboxError> {
    let mut masks: Vec<(PathBuf, bool)> = Vec::new();
    for c in credentials {
        // Where it really is: a link to it is harmless once its target is covered.
        let Ok(real) = c.canonicalize() else {
            continue;
        };
        if let Some(s) = shown.iter().find(|s| s.starts_with(&real)) {
            return Err(SandboxError::Plan(format!(
                "{} is or lies in credentials ({}), which no call is shown: declare what the \
                 tool needs beside it instead",
                s.display(),
                c.display()
            )));
        }
        if shown.iter().any(|s| real.starts_with(s)) && !masks.iter().any(|(m, _)| *m == real) {
            masks.push((real.clone(), real.is_dir()));
        }
    }
    if masks.is_empty() {
        return Ok(0);
    }
    let fs = Layer::Filesystem;
    let (file, dir) = (cstr(FILE_SOURCE)?, cstr(DIR_SOURCE)?);
    b.mkdirs(Path::new("/proc"), fs)?;
    b.push(
        Op::Touch { path: file.clone() },
        fs,
        format!("create {FILE_SOURCE}"),
    );
    b.push(
        Op::Mkdir {
            path: dir.clone(),
            mode: 0o555,
        },
        fs,
        format!("create {DIR_SOURCE}"),
    );
    for (target, is_dir) in &masks {
        let op = Op::Bind {
            source: if *is_dir { dir.clone() } else { file.clone() },
            target: cstr(target.as_os_str().as_bytes())?,
            readonly: true,
            devices: false,
        };
        b.push(op, fs, format!("mask credentials {}", target.display()));
    }
    Ok(masks.len())
}
