//! Nix on the host: the project's dev shell and the programs the agent asks for, each built or
//! fetched by `nix` outside the sandbox (decided and logged like any act first), and shown to the
//! session's calls as their store closures, read-only, and nothing else of the store.

mod devshell;
mod provision;
pub(crate) mod run;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

pub use devshell::DevShell;
pub use provision::Provisioned;

/// What went wrong running nix on the host.
#[derive(Debug, thiserror::Error)]
pub enum NixError {
    /// No `nix` on the host's PATH.
    #[error("no `nix` program on PATH: install Nix to use a dev shell or ask for a program")]
    Missing,
    /// `nix` could not be started.
    #[error("starting {}: {source}", nix.display())]
    Spawn {
        /// The `nix` program.
        nix: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `nix` ended with a failure status.
    #[error("{what} failed ({status}):\n{tail}")]
    Failed {
        /// The act, in words ("building `nixpkgs#ripgrep`").
        what: String,
        /// How it ended (its exit status).
        status: String,
        /// The last lines it wrote to stderr.
        tail: String,
    },
    #[error(
        "{what} did not finish within {secs} s and was killed ([limits] timeout_secs):\n{tail}"
    )]
    /// `nix` ran past its deadline and was killed.
    Deadline {
        /// The act, in words.
        what: String,
        /// The deadline, in seconds.
        secs: u64,
        /// The last lines it wrote to stderr.
        tail: String,
    },
    /// `nix` was killed because its call was interrupted.
    #[error("{what} was interrupted and killed")]
    Interrupted {
        /// The act, in words.
        what: String,
    },
    /// What nix printed is not what this module reads.
    #[error("{what}: unexpected output from nix: {why}")]
    Output {
        /// What it was about ("nix build", "the dev shell's profile", ...).
        what: String,
        /// What is wrong with it.
        why: String,
    },
    /// The store is not one whose paths lie in a directory on this machine.
    #[error("nix store `{0}` is not a local store: only a local store's paths can be bound")]
    Store(String),
    /// A store path the host path checker refuses.
    #[error("store path {}: {why}", path.display())]
    HostPath {
        /// The store path, or where it lies on the host.
        path: PathBuf,
        /// Why the checker refuses it.
        why: String,
    },
    /// The log refused a write (nix's acts are logged before they run).
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// The act could not be decided (it did not run).
    #[error(transparent)]
    Decide(#[from] chock_decide::DecideError),
}

/// The `nix` program on the host's PATH.
pub fn find_nix() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nix"))
        .find(|p| p.is_file())
}

/// The host directory the store's paths lie in, from nix's own `store` setting: `/nix/store` for
/// the default store (or the daemon), `<root>/nix/store` for a store kept under another root
/// (`/some/dir` or `local?root=/some/dir`, what an unprivileged user without a daemon uses).
fn store_dir_of(setting: &str) -> Result<PathBuf, NixError> {
    let root = match setting {
        "" | "local" | "daemon" => return Ok(PathBuf::from(chock_sandbox::STORE_DIR)),
        "auto" => return Ok(auto_store_dir()),
        s if s.starts_with('/') => s.split('?').next().unwrap_or(s).to_string(),
        s if s.starts_with("local?") => s
            .trim_start_matches("local?")
            .split('&')
            .find_map(|kv| kv.strip_prefix("root="))
            .ok_or_else(|| NixError::Store(s.to_string()))?
            .to_string(),
        s => return Err(NixError::Store(s.to_string())),
    };
    Ok(Path::new(&root).join("nix/store"))
}

/// Where nix's `auto` store keeps its paths: the system store when a daemon answers or its
/// state directory is writable, else the per-user store under `~/.local/share/nix/root`.
fn auto_store_dir() -> PathBuf {
    let system = PathBuf::from(chock_sandbox::STORE_DIR);
    let daemon = Path::new("/nix/var/nix/daemon-socket/socket").exists();
    let writable = rustix::fs::access("/nix/var/nix", rustix::fs::Access::WRITE_OK).is_ok();
    match std::env::var_os("HOME") {
        Some(home) if !daemon && !writable && Path::new("/nix/var/nix").exists() => {
            Path::new(&home).join(".local/share/nix/root/nix/store")
        }
        _ => system,
    }
}

/// Nix as a session uses it: the program and where its store's paths lie on the host.
#[derive(Debug, Clone)]
pub(crate) struct Nix {
    pub program: PathBuf,
    pub store: PathBuf,
}

impl Nix {
    /// Finds nix and asks it for its store (`nix show-config`).
    fn locate(deadline: Duration) -> Result<Nix, NixError> {
        let program = find_nix().ok_or(NixError::Missing)?;
        let out = run::run(
            &program,
            &["show-config".into(), "--json".into()],
            "reading nix's settings",
            deadline,
            &|_| {},
            &|_| None,
        )?;
        let config: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| NixError::Output {
                what: "nix show-config".into(),
                why: e.to_string(),
            })?;
        let setting = config["store"]["value"].as_str().unwrap_or("auto");
        Ok(Nix {
            store: store_dir_of(setting)?,
            program,
        })
    }

    /// Where store path `path` (`/nix/store/<name>`) lies on the host.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        self.store.join(path.file_name().unwrap_or_default())
    }
}

/// What a session holds of nix: found once, at the first need.
#[derive(Debug, Default)]
pub(crate) struct NixState {
    nix: OnceLock<Result<Nix, String>>,
    /// The project's dev shell: settled at the session's first call (`None`: the project has
    /// none, nix is missing, it was refused or failed; the log says which).
    devshell: OnceLock<Option<DevShell>>,
    /// Held while the dev shell is settled, so two first calls do not both build it (an async
    /// lock: the second call waits without holding a runtime thread, and the first holds it
    /// across its decision's await).
    settling: tokio::sync::Mutex<()>,
    /// What the agent asked for and was given, in order.
    provisioned: Mutex<Vec<Provisioned>>,
}

impl NixState {
    /// Nix, found at the first call of this (its errors are kept, in words).
    pub fn nix(&self, deadline: Duration) -> Result<&Nix, NixError> {
        match self
            .nix
            .get_or_init(|| Nix::locate(deadline).map_err(|e| e.to_string()))
        {
            Ok(nix) => Ok(nix),
            Err(why) => Err(NixError::Output {
                what: "finding nix".into(),
                why: why.clone(),
            }),
        }
    }

    pub fn devshell(&self) -> Option<&DevShell> {
        self.devshell.get().and_then(Option::as_ref)
    }

    pub fn provisioned(&self) -> Vec<Provisioned> {
        self.provisioned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What a call sees of the store and how its environment changes: every path of the dev
    /// shell's closure and of each provisioned program's, once each.
    pub fn store_paths(&self) -> Vec<chock_sandbox::StorePath> {
        let Some(Ok(nix)) = self.nix.get() else {
            return Vec::new();
        };
        let provisioned = self.provisioned();
        let mut seen = std::collections::BTreeSet::new();
        self.devshell()
            .map(|d| d.closure.as_slice())
            .unwrap_or_default()
            .iter()
            .chain(provisioned.iter().flat_map(|p| p.closure.iter()))
            .filter(|p| seen.insert((*p).clone()))
            .map(|p| chock_sandbox::StorePath {
                source: nix.host_path(p),
                target: p.clone(),
            })
            .collect()
    }

    /// Gives `plan` the dev shell's environment (its variables over the call's own) and a PATH
    /// that finds the provisioned programs first, then the dev shell's, then the call's own.
    pub fn apply_env(&self, plan: &mut chock_sandbox::Plan) {
        let mut path: Vec<String> = Vec::new();
        if let Some(Ok(nix)) = self.nix.get() {
            for given in self.provisioned().iter().rev() {
                for out in &given.outputs {
                    if nix.host_path(out).join("bin").is_dir() {
                        path.push(out.join("bin").display().to_string());
                    }
                }
            }
        }
        let mut set = |name: &str, value: String| match plan.env.iter_mut().find(|(k, _)| k == name)
        {
            Some((_, v)) => *v = value,
            None => plan.env.push((name.to_string(), value)),
        };
        if let Some(shell) = self.devshell() {
            for (name, value) in &shell.env {
                if name == "PATH" {
                    path.extend(value.split(':').filter(|d| !d.is_empty()).map(String::from));
                } else {
                    set(name, value.clone());
                }
            }
        }
        if path.is_empty() {
            return;
        }
        let own = plan
            .env_var("PATH")
            .unwrap_or(chock_sandbox::DEFAULT_PATH)
            .to_string();
        path.push(own);
        plan.env.retain(|(k, _)| k != "PATH");
        plan.env.push(("PATH".into(), path.join(":")));
        plan.env.sort();
    }

    /// The host directory the store's paths lie in, once nix was found.
    pub fn store_dir(&self) -> Option<&Path> {
        match self.nix.get() {
            Some(Ok(nix)) => Some(&nix.store),
            _ => None,
        }
    }
}

/// Runs `f`, which blocks (nix, a host process waited for), from async code without stalling the
/// runtime: in place on a multi-threaded runtime, else on a thread of its own.
pub(crate) fn off_the_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

/// The store path a path inside the store belongs to (`/nix/store/<name>/bin/x` →
/// `/nix/store/<name>`), or `None` outside the store.
pub fn store_path_of(path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(chock_sandbox::STORE_DIR).ok()?;
    let first = rest.components().next()?;
    Some(Path::new(chock_sandbox::STORE_DIR).join(first))
}

/// Every closure path through the host path checker (the one every declared path goes through),
/// where it lies on the host: a store path is a hole in the sandbox like any other.
fn check_closure(
    nix: &Nix,
    policy: &chock_policy::Policy,
    closure: &[PathBuf],
) -> Result<(), NixError> {
    for path in closure {
        if store_path_of(path).as_deref() != Some(path.as_path()) {
            return Err(NixError::HostPath {
                path: path.clone(),
                why: "is not a path directly under /nix/store".into(),
            });
        }
        let host = nix.host_path(path);
        policy
            .host_paths()
            .check(&host, chock_policy::Access::Read)
            .map_err(|why| NixError::HostPath {
                path: host.clone(),
                why,
            })?;
    }
    Ok(())
}

/// Reads `nix path-info --recursive`'s lines into store paths.
fn closure_of(nix: &Nix, roots: &[PathBuf], deadline: Duration) -> Result<Vec<PathBuf>, NixError> {
    let mut args = vec![
        "path-info".to_string(),
        "--recursive".to_string(),
        "--".into(),
    ];
    args.extend(roots.iter().map(|r| r.display().to_string()));
    let out = run::run(
        &nix.program,
        &args,
        "listing the closure",
        deadline,
        &|_| {},
        &|_| None,
    )?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_settings_name_where_the_paths_lie() {
        assert_eq!(store_dir_of("daemon").unwrap(), Path::new("/nix/store"));
        assert_eq!(
            store_dir_of("/tmp/s").unwrap(),
            Path::new("/tmp/s/nix/store")
        );
        assert_eq!(
            store_dir_of("local?root=/tmp/r&x=1").unwrap(),
            Path::new("/tmp/r/nix/store")
        );
        assert!(store_dir_of("ssh://host").is_err());
    }

    #[test]
    fn the_store_path_of_a_program() {
        assert_eq!(
            store_path_of(Path::new("/nix/store/abc-hello/bin/hello")),
            Some(PathBuf::from("/nix/store/abc-hello"))
        );
        assert_eq!(store_path_of(Path::new("/usr/bin/x")), None);
        assert_eq!(store_path_of(Path::new("/nix/store")), None);
    }
}
