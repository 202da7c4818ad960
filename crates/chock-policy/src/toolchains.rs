//! Shipped toolchain profiles: `[sandbox] toolchains = ["rust", "node"]` in chock.toml.
//!
//! A profile is reviewed data, like the seccomp rules are: which host directories a stack's
//! programs live in (shown read-only), which of its download caches a call may write (shared with
//! the host, so they persist), and which environment names it reads. A profile is expanded when
//! the policy is loaded, against this host (`expand.rs`): each path it names is then held to every
//! rule a hand-written `[sandbox]` path is ([`crate::HostPaths`], the one checker), so a profile
//! can open no hole a person could not open by hand.
//!
//! Credentials are never part of a profile: no profile names a file that holds a token, and the
//! sandbox masks the known ones (`~/.cargo/credentials.toml`, `~/.npmrc`, `~/.pypirc`, `~/.netrc`,
//! `~/.config/gh`, ...) even under a directory a call is shown (chock-sandbox's
//! `credential_mask.rs`).

use std::path::PathBuf;

use serde::Serialize;

mod expand;
pub(crate) use expand::{Host, apply, process_var};

/// A host directory a profile names: `$env` when that is set (absolute), else `default`
/// (`~/`-relative unless absolute), then `sub` below it.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    /// The variable the tool itself reads for this directory (`CARGO_HOME`), honoured first.
    pub env: Option<&'static str>,
    /// Where the tool keeps it when the variable is unset, below the home (or absolute).
    pub default: &'static str,
    /// A directory below it (`bin`), or empty for the directory itself.
    pub sub: &'static str,
}

const fn at(env: Option<&'static str>, default: &'static str, sub: &'static str) -> Place {
    Place { env, default, sub }
}

/// A download cache a call may write.
#[derive(Debug, Clone, Copy)]
pub struct Cache {
    /// Where it is.
    pub place: Place,
    /// `Some(name)`: each project gets its own copy, `name` below the project's cache directory
    /// ([`project_cache_dir`]), and the call's `place.env` points the tool at it; the host's
    /// cache is not shown. `None`: the host's cache is shared, bound at its own path.
    pub per_project: Option<&'static str>,
    /// Why it is shared with the host, or kept per project (docs/toolchains.md).
    pub why: &'static str,
}

/// One shipped profile.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// The name written in `toolchains = [...]`.
    pub name: &'static str,
    /// What it is for, in `chock policy show` and `chock init`.
    pub what: &'static str,
    /// The programs that show the stack is on this host (any one found on the host's `PATH`).
    /// Each one found outside the system directories every call sees has its directory, and the
    /// directory it really lives in, shown read-only.
    pub programs: &'static [&'static str],
    /// Directories shown read-only when they exist (a version manager's home).
    pub read: &'static [Place],
    /// Also show the directory above the one a found program really lives in (`go`'s GOROOT,
    /// whose `bin` holds it and whose `src` and `pkg` it reads).
    pub program_root: bool,
    /// Caches a call writes, shared with the host; made (empty, mode 0700) when missing, so the
    /// first session's downloads persist.
    pub caches: &'static [Cache],
    /// Directories the stack keeps inside the project: the session's own copy, thrown away or
    /// applied with the workspace, never shared. Only said (docs, `chock init`): nothing to bind.
    pub in_project: &'static [&'static str],
    /// Host environment names passed in (each checked like a hand-written `env` name).
    pub env: &'static [&'static str],
}

/// Every shipped profile. Adding one is a reviewed change to this table.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "rust",
        what: "cargo and rustc (rustup's toolchains, cargo's registry)",
        programs: &["cargo", "rustc"],
        read: &[
            // rustup's home: its proxies pick the toolchain (settings.toml, a project's
            // rust-toolchain.toml) from the toolchains installed here.
            at(Some("RUSTUP_HOME"), ".rustup", ""),
            // The proxies themselves (cargo, rustc, rustup) and installed binaries; cargo's home
            // itself is not shown, so credentials.toml there never is.
            at(Some("CARGO_HOME"), ".cargo", "bin"),
        ],
        program_root: false,
        caches: &[
            Cache {
                place: at(Some("CARGO_HOME"), ".cargo", "registry"),
                per_project: None,
                why: "cargo's download cache of crates and the index, locked by cargo itself: \
                      shared so a session does not fetch every crate again",
            },
            Cache {
                place: at(Some("CARGO_HOME"), ".cargo", "git"),
                per_project: None,
                why: "cargo's checkouts of git dependencies: shared, as the registry",
            },
        ],
        in_project: &["target/"],
        env: &["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"],
    },
    Profile {
        name: "node",
        what: "node and npm (nvm, fnm, volta or the system's), npm's cache",
        programs: &["node", "npm"],
        read: &[
            at(Some("NVM_DIR"), ".nvm", ""),
            at(Some("FNM_DIR"), ".local/share/fnm", ""),
            at(None, ".fnm", ""),
            at(Some("VOLTA_HOME"), ".volta", ""),
        ],
        program_root: false,
        caches: &[Cache {
            place: at(Some("npm_config_cache"), ".npm", "_cacache"),
            per_project: None,
            why: "npm's content-addressed cache: every entry is checked against its integrity \
                  hash when read, so shared, as npm shares it between projects",
        }],
        in_project: &["node_modules/"],
        env: &[
            "NVM_DIR",
            "NVM_BIN",
            "NVM_INC",
            "FNM_DIR",
            "FNM_MULTISHELL_PATH",
            "VOLTA_HOME",
            "npm_config_cache",
        ],
    },
    Profile {
        name: "python",
        what: "python3 and pip (pyenv, uv or the system's), pip's and uv's caches",
        programs: &["python3", "python", "uv"],
        read: &[
            at(Some("PYENV_ROOT"), ".pyenv", ""),
            at(Some("UV_PYTHON_INSTALL_DIR"), ".local/share/uv/python", ""),
        ],
        program_root: false,
        caches: &[
            Cache {
                place: at(Some("PIP_CACHE_DIR"), ".cache/pip", ""),
                per_project: None,
                why: "pip's download and wheel cache: shared so a venv in each session does not \
                      fetch every package again",
            },
            Cache {
                place: at(Some("UV_CACHE_DIR"), ".cache/uv", ""),
                per_project: None,
                why: "uv's cache, shared as pip's",
            },
        ],
        in_project: &[".venv/"],
        env: &[
            "PYENV_ROOT",
            "PYENV_VERSION",
            "UV_PYTHON_INSTALL_DIR",
            "PIP_CACHE_DIR",
            "UV_CACHE_DIR",
        ],
    },
    Profile {
        name: "go",
        what: "the go command (GOROOT), the module and build caches",
        programs: &["go"],
        read: &[at(Some("GOROOT"), "/usr/local/go", "")],
        program_root: true,
        caches: &[
            Cache {
                place: at(Some("GOPATH"), "go", "pkg/mod"),
                per_project: None,
                why: "the module cache: go checks each module against go.sum as it adds it, and \
                      shares it between modules",
            },
            Cache {
                place: at(Some("GOCACHE"), ".cache/go-build", ""),
                per_project: Some("go-build"),
                why: "the build cache: go trusts an entry's output without checking it, so a call \
                      that could write the host's cache could plant a compiled package in every \
                      later build of the person's, unconfined; each project gets its own copy",
            },
        ],
        in_project: &["vendor/"],
        env: &["GOROOT", "GOPATH", "GOCACHE", "GOFLAGS"],
    },
    Profile {
        name: "c",
        what: "cc and make from the system (/usr, which every call sees already)",
        programs: &["cc", "gcc", "clang", "make"],
        read: &[],
        program_root: false,
        caches: &[],
        in_project: &[],
        env: &["CC", "CXX"],
    },
];

/// The profile named `name`.
pub fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Where this host has `profile`'s programs (on the process's `PATH`): empty when the stack is not
/// installed here, for `chock init`.
pub fn found_on_this_host(profile: &Profile) -> Vec<PathBuf> {
    let host = Host {
        home: None,
        var: &process_var,
        project: None,
    };
    profile
        .programs
        .iter()
        .filter_map(|p| host.which(p))
        .collect()
}

/// The names of the shipped profiles, for an error listing the known ones.
pub fn profile_names() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.name).collect()
}

/// The profile whose programs include `program` (a bare name), for the refusal of a command the
/// sandbox does not show: `cargo` → `rust`.
pub fn toolchain_for_program(program: &str) -> Option<&'static str> {
    let extra: &[(&str, &str)] = &[
        ("rustup", "rust"),
        ("rustfmt", "rust"),
        ("npx", "node"),
        ("pip", "python"),
        ("pip3", "python"),
        ("pytest", "python"),
        ("gofmt", "go"),
        ("c++", "c"),
        ("g++", "c"),
    ];
    PROFILES
        .iter()
        .find(|p| p.programs.contains(&program))
        .map(|p| p.name)
        .or_else(|| extra.iter().find(|(n, _)| *n == program).map(|(_, t)| *t))
}

/// What one named toolchain expanded to on this host: logged at session start and printed by
/// `chock policy show`, so what a name opened is never hidden behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExpandedToolchain {
    /// The profile's name.
    pub name: String,
    /// Where its programs were found on the host.
    pub found: Vec<PathBuf>,
    /// Paths it added to `[sandbox] read`.
    pub read: Vec<PathBuf>,
    /// Caches it added to `[sandbox] write`: shared with the host, or (those in `set_env`) this
    /// project's own copy.
    pub write: Vec<PathBuf>,
    /// Why each of `write` is shared, in the same order (the profile's words).
    pub write_why: Vec<&'static str>,
    /// Names it added to `[sandbox] env`.
    pub env: Vec<String>,
    /// The files that named it: the project's chock.toml, the person's config.toml, or both.
    pub from: Vec<PathBuf>,
    /// Variables the call gets set to a per-project cache (`GOCACHE`), each also in `write`.
    pub set_env: Vec<(String, PathBuf)>,
}

/// Where the per-project caches of `project` are: `<cache>/chock/projects/<name>-<hash>`, with
/// `<cache>` `$XDG_CACHE_HOME` (else `~/.cache`), outside the project (so the workspace copy and
/// the applied diff never hold it) and outside Chock's own directories. The hash (FNV-1a of the
/// project's path) keeps two projects of the same name apart and is stable between releases.
pub fn project_cache_dir(cache_home: &std::path::Path, project: &std::path::Path) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in project.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let name: String = project
        .file_name()
        .map(|n| n.to_string_lossy().chars().take(40).collect())
        .unwrap_or_else(|| "root".into());
    cache_home
        .join("chock/projects")
        .join(format!("{name}-{hash:016x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_program_maps_back() {
        let names = profile_names();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        for p in PROFILES {
            for program in p.programs {
                assert_eq!(toolchain_for_program(program), Some(p.name), "{program}");
            }
            for name in p.env {
                crate::sandbox::check_env_name(name).unwrap();
            }
        }
        assert_eq!(toolchain_for_program("pytest"), Some("python"));
        assert_eq!(toolchain_for_program("ls"), None);
    }
}
