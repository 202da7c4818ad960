//! The git shim (docs/git.md, "The shim"): the `git` a call finds, over every real git of the
//! call's tree, and what the host knows of the real ones.
//!
//! Inside a call, [`main`] sends its raw argv, environment and working directory over the call's
//! channel ([`crate::channel`]) and waits. The host classifies the invocation itself, settles the
//! act through the session's pipeline, and answers; an allowed answer carries the real git as a
//! descriptor (it is nowhere in the call's tree), which the shim executes. Anything else — a
//! refusal, no answer, no channel — and the shim exits 126 with the act and the rule.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::channel::{Answer, Client, GitRequest, Request};

/// The shim's file name, installed beside `chock`.
pub const SHIM_BINARY: &str = "chock-git";

/// The installed shim beside the running executable, if there is one (what `chock` passes as
/// [`crate::SessionOptions::git_shim`]).
pub fn installed() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let shim = exe.with_file_name(SHIM_BINARY);
    shim.is_file().then_some(shim)
}

/// A session's git wiring: the shim, and the real gits found at its first call.
#[derive(Debug)]
pub(crate) struct Wiring {
    shim: PathBuf,
    /// The session's own directory of shim layers (`shim_layers.rs`), written by the host only
    /// and seen by no call but through its overlays (removed when the wiring is dropped): used
    /// when the user's cache of them (`shim_cache.rs`, under `cache`) cannot be.
    layers: PathBuf,
    cache: Option<PathBuf>,
    /// The real gits and what a plan is given to show the shim over each, from the first call.
    wired: std::sync::OnceLock<Wired>,
    /// One sealed in-memory copy of each real git handed out, made at its first allowed use.
    copies: std::sync::Mutex<std::collections::BTreeMap<PathBuf, OwnedFd>>,
    /// For an approved push: the host's project (whose configuration decides where a push goes)
    /// and the session's directory the host writes and every call reads only.
    push: Option<(PathBuf, PathBuf)>,
    /// The session's calls run in a microVM guest: the shim is shown from the session's own
    /// copy of it, in the layers' directory, which is what the guest is given to see (not the
    /// directory the shim is installed in).
    guest: bool,
}

impl Wiring {
    /// The shim at `shim`; the layers that show it over a directory of many gits come from the
    /// user's cache under `cache`, else are the session's own under `layers` (made at the first
    /// call).
    pub(crate) fn new(shim: PathBuf, layers: PathBuf, cache: Option<PathBuf>) -> Wiring {
        Wiring {
            shim,
            layers,
            cache,
            wired: std::sync::OnceLock::new(),
            copies: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            push: None,
            guest: false,
        }
    }

    /// For a session whose calls run in a microVM guest: the shim is shown from the session's
    /// own copy of it (`shim_layers::show`'s `own_copy`), a directory the guest is given alone,
    /// never from the user's cache (whose directory holds other sessions' layers too).
    pub(crate) fn for_guest(mut self) -> Wiring {
        self.guest = true;
        self.cache = None;
        self
    }

    /// Lets the session carry out approved pushes: `project` is the host's repository, `host_dir`
    /// (made here, empty) is bound read-only into every call and written by the host only.
    pub(crate) fn with_push(mut self, project: &Path, host_dir: PathBuf) -> Wiring {
        if std::fs::create_dir_all(&host_dir).is_ok() {
            self.push = Some((project.to_path_buf(), host_dir));
        }
        self
    }

    /// Removes the session's push directory when the session closes. Each push's own directory
    /// in it went when its call ended; one left behind (a host that crashed mid-call) keeps the
    /// directory, which is then not empty and stays for a person to see.
    pub(crate) fn remove_host_dir(&self) {
        if let Some(dir) = self.host_dir() {
            let _ = std::fs::remove_dir(dir);
        }
    }

    /// The host's project, when the session carries out pushes.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.push.as_ref().map(|(p, _)| p.as_path())
    }

    /// The session's host-written, call-read-only directory.
    pub(crate) fn host_dir(&self) -> Option<&Path> {
        self.push.as_ref().map(|(_, d)| d.as_path())
    }

    /// The real git at `path` as a descriptor the call may execute: a sealed in-memory copy of
    /// it (`memfd`, sealed against every change), made once per session. Not the host's file
    /// itself: the call's Landlock ruleset lets it execute nothing outside its own tree, and an
    /// anonymous file belongs to no tree.
    pub(crate) fn executable(&self, path: &Path) -> std::io::Result<OwnedFd> {
        let mut copies = self
            .copies
            .lock()
            .map_err(|_| std::io::Error::other("the copies' lock was poisoned"))?;
        if let Some(fd) = copies.get(path) {
            return fd.try_clone();
        }
        let fd = sealed_copy(path)?;
        let mine = fd.try_clone()?;
        copies.insert(path.to_path_buf(), fd);
        Ok(mine)
    }

    /// The real gits and their layers, found from `path` (the call's `PATH`) the first time.
    fn wired(&self, path: &str) -> &Wired {
        self.wired.get_or_init(|| {
            let cached = self
                .cache
                .as_deref()
                .and_then(|root| crate::shim_cache::take(root, &self.shim, path));
            match cached {
                Some(taken) => Wired {
                    gits: taken.gits,
                    shown: taken.shown,
                    hold: Some(taken.hold),
                },
                None => {
                    let gits = Gits::find(path);
                    let shown = crate::shim_layers::show(
                        &self.shim,
                        &gits.masked,
                        Some(&self.layers),
                        self.guest,
                    );
                    Wired {
                        gits,
                        shown,
                        hold: None,
                    }
                }
            }
        })
    }

    /// Gives `plan` the host channel and the shim over every real git: a bind over a git alone in
    /// its directory, one overlay over a directory of several (`shim_layers.rs`), prepared at
    /// the first plan.
    pub(crate) fn apply(&self, plan: &mut chock_sandbox::Plan) {
        let path = plan
            .env_var("PATH")
            .unwrap_or(chock_sandbox::DEFAULT_PATH)
            .to_string();
        plan.host_channel = true;
        self.wired(&path).shown.apply(plan);
        if let Some(dir) = self.host_dir() {
            plan.extra_read.push(dir.to_path_buf());
        }
    }

    /// The real gits, once a call found them.
    pub(crate) fn found(&self) -> Option<&Gits> {
        self.wired.get().map(|w| &w.gits)
    }
}

/// What a session's first call found: the gits, how a plan shows the shim over them, and, when
/// the layers are the user's cached ones, the lock that keeps them in place.
#[derive(Debug)]
struct Wired {
    gits: Gits,
    shown: crate::shim_layers::Shown,
    hold: Option<std::fs::File>,
}

impl Drop for Wiring {
    /// The shim layers go with the session's last use of them, however it ends (an agent's
    /// session is dropped, never closed): a copy of the shim is megabytes.
    fn drop(&mut self) {
        if self.wired.get().is_some_and(|w| w.hold.is_none()) {
            let _ = std::fs::remove_dir_all(&self.layers);
        }
    }
}

/// A sealed in-memory copy of the file at `path`, executable.
fn sealed_copy(path: &Path) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    // `MFD_EXEC` says so on a kernel that would seal a memfd against execution by default (6.3
    // and later, `vm.memfd_noexec`); an older one does not know the flag.
    let fd = rustix::fs::memfd_create("git", flags | MemfdFlags::EXEC)
        .or_else(|_| rustix::fs::memfd_create("git", flags))?;
    let mut file = std::fs::File::from(fd);
    std::io::copy(&mut std::fs::File::open(path)?, &mut file)?;
    let fd = OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    Ok(fd)
}

/// The host's real gits, as a call's tree shows them: found once per session from the first
/// call's `PATH`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Gits {
    /// Every file of the tree that is a real git (each `git` on `PATH` under `/usr`, the `git` of
    /// each one's exec path, and every hard link of any of them there): the shim hides each.
    masked: Vec<PathBuf>,
    /// Each git's exec path (`git --exec-path`).
    exec_dirs: Vec<String>,
    /// The system configuration file of the first git on `PATH`.
    system_config: String,
}

impl Gits {
    /// The gits under `/usr` on `path` (the call's `PATH`). Only the tree's own `/usr` is shown
    /// to a call from the host, so a git elsewhere (a declared read path, the store) is not
    /// hidden: docs/git.md says what that leaves.
    pub(crate) fn find(path: &str) -> Gits {
        let mut firsts: Vec<PathBuf> = Vec::new();
        for dir in path.split(':').filter(|d| d.starts_with('/')) {
            let Ok(real) = Path::new(dir).join("git").canonicalize() else {
                continue;
            };
            if real.starts_with("/usr/") && real.is_file() && !firsts.contains(&real) {
                firsts.push(real);
            }
        }
        let mut exec_dirs: Vec<String> = Vec::new();
        let mut inodes: BTreeSet<(u64, u64)> = BTreeSet::new();
        let mut masked: BTreeSet<PathBuf> = BTreeSet::new();
        for git in &firsts {
            if let Ok(m) = git.metadata() {
                inodes.insert((m.dev(), m.ino()));
            }
            masked.insert(git.clone());
            let out = std::process::Command::new(git)
                .arg("--exec-path")
                .env_clear()
                .output();
            if let Ok(out) = out
                && let Ok(text) = String::from_utf8(out.stdout)
                && let Ok(dir) = Path::new(text.trim()).canonicalize()
                && dir.starts_with("/usr/")
            {
                let own = dir.join("git");
                if let Ok(m) = std::fs::symlink_metadata(&own)
                    && m.is_file()
                {
                    inodes.insert((m.dev(), m.ino()));
                    masked.insert(own);
                }
                let dir = dir.display().to_string();
                if !exec_dirs.contains(&dir) {
                    exec_dirs.push(dir);
                }
            }
        }
        // Hard links of a real git run it under another name (`git-upload-pack`, every builtin
        // of a source build's exec path): each is hidden too. Symbolic links need nothing: they
        // lead to a hidden path.
        let dirs: BTreeSet<PathBuf> = firsts
            .iter()
            .filter_map(|g| g.parent().map(Path::to_path_buf))
            .chain(exec_dirs.iter().map(PathBuf::from))
            .collect();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let is_git = e.file_name().to_str().is_some_and(|n| n.starts_with("git"));
                if let (true, Ok(m)) = (is_git, e.metadata())
                    && m.is_file()
                    && inodes.contains(&(m.dev(), m.ino()))
                {
                    masked.insert(e.path());
                }
            }
        }
        let system_config = match firsts.first() {
            Some(g) if g.starts_with("/usr/local/") => "/usr/local/etc/gitconfig",
            _ => "/etc/gitconfig",
        }
        .to_string();
        Gits {
            masked: masked.into_iter().collect(),
            exec_dirs,
            system_config,
        }
    }

    /// Every real git the shim hides.
    pub(crate) fn masked(&self) -> &[PathBuf] {
        &self.masked
    }

    /// The directories the gits were found in: an entry added, removed or renamed in any of
    /// them may change what [`Gits::find`] finds.
    pub(crate) fn dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        let parents = self
            .masked
            .iter()
            .filter_map(|g| g.parent().map(Path::to_path_buf));
        let dirs: BTreeSet<PathBuf> = parents
            .chain(self.exec_dirs.iter().map(PathBuf::from))
            .collect();
        dirs.into_iter()
    }

    pub(crate) fn exec_dirs(&self) -> impl Iterator<Item = &str> {
        self.exec_dirs.iter().map(String::as_str)
    }

    pub(crate) fn system_config(&self) -> &str {
        &self.system_config
    }

    /// The real git the shim stood in for: the hidden file it was started as (its full path,
    /// or its name looked up on `path` as the kernel did), else the first git on `PATH`. The
    /// tree hides each at the host's own path, so the host's file at that path is the real one.
    pub(crate) fn real_for(&self, invoked_as: &str, path: Option<&str>) -> Option<PathBuf> {
        let candidates: Vec<PathBuf> = if invoked_as.contains('/') {
            vec![PathBuf::from(invoked_as)]
        } else {
            path.unwrap_or(chock_sandbox::DEFAULT_PATH)
                .split(':')
                .map(|d| Path::new(d).join(invoked_as))
                .collect()
        };
        let found = candidates.into_iter().find_map(|c| {
            let real = c.canonicalize().ok()?;
            self.masked.contains(&real).then_some(real)
        });
        found.or_else(|| self.masked.iter().find(|p| p.ends_with("bin/git")).cloned())
    }

    /// The entries of one configuration file as `git config --list` gives them, read by the
    /// host's git with the file named alone (`--file`: no includes followed, nothing run).
    pub(crate) fn read_config(&self, file: &Path) -> Vec<(String, Option<String>)> {
        if !file.is_file() {
            return Vec::new();
        }
        self.list_config(std::ffi::OsStr::new("--file"), file.as_os_str(), None)
    }

    /// The entries of a configuration file's `text` (read by the host from a guest's workspace),
    /// as [`Gits::read_config`] gives them: git reads it from its standard input.
    pub(crate) fn read_config_text(&self, text: &[u8]) -> Vec<(String, Option<String>)> {
        self.list_config(
            std::ffi::OsStr::new("--file"),
            std::ffi::OsStr::new("-"),
            Some(text),
        )
    }

    fn list_config(
        &self,
        flag: &std::ffi::OsStr,
        file: &std::ffi::OsStr,
        text: Option<&[u8]>,
    ) -> Vec<(String, Option<String>)> {
        use std::io::Write;
        let Some(git) = self.masked.first() else {
            return Vec::new();
        };
        let child = std::process::Command::new(git)
            .args(["config", "--list", "-z"])
            .arg(flag)
            .arg(file)
            .env_clear()
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(if text.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            return Vec::new();
        };
        if let (Some(text), Some(mut stdin)) = (text, child.stdin.take()) {
            // git reads its input whole before it writes: a write cut short is git gone.
            let _ = stdin.write_all(text);
        }
        let Ok(out) = child.wait_with_output() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|e| !e.is_empty())
            .map(|e| match e.split_once('\n') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (e.to_string(), None),
            })
            .collect()
    }
}

/// The shim's `main`, inside a call: ask the host, then execute the real git it hands over, or
/// say why not and exit 126. Never returns.
pub fn main() -> ! {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let fail = |what: String| -> ! {
        eprintln!("chock: git: {what}");
        std::process::exit(126)
    };
    let text = |s: OsString| {
        s.into_string()
            .unwrap_or_else(|s| fail(format!("{} is not UTF-8: refused", s.to_string_lossy())))
    };
    let mut argv = argv.into_iter().map(text);
    let invoked_as = argv.next().unwrap_or_else(|| "git".into());
    let args: Vec<String> = argv.collect();
    // An approved ssh push names the shim as its ssh's `ProxyCommand`: a tunnel through the call's
    // proxy to the plan's host and port.
    if std::env::var_os(crate::channel::CONNECT_MODE).is_some_and(|v| v == "1")
        && let [flag, host, port] = args.as_slice()
        && flag == crate::channel::CONNECT_FLAG
    {
        crate::channel::connect_main(host, port)
    }
    // An approved push names the shim as git's askpass (git runs it with its prompt, which ends
    // in `: `): it carries the prompt to the host, which decides whether anyone is asked.
    if std::env::var_os(crate::channel::ASKPASS_MODE).is_some_and(|v| v == "1")
        && let [prompt] = args.as_slice()
        && prompt.ends_with(": ")
    {
        crate::channel::askpass_main()
    }
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| (text(k), text(v)))
        .collect();
    let cwd = std::env::current_dir()
        .map(|d| text(d.into_os_string()))
        .unwrap_or_else(|e| fail(format!("the working directory cannot be read: {e}")));
    let client = Client::from_call().unwrap_or_else(|e| {
        fail(format!(
            "{e}; inside Chock, git runs only when the host allows it"
        ))
    });
    let request = Request::Git(GitRequest {
        invoked_as: invoked_as.clone(),
        args: args.clone(),
        env,
        cwd,
    });
    let (answer, mut fds) = client
        .ask(&request)
        .unwrap_or_else(|e| fail(format!("{e}: nobody answered, a refusal")));
    match answer {
        Answer::Git(a) if a.allowed && fds.len() == 1 => {
            let real = fds
                .pop()
                .unwrap_or_else(|| fail("no git was handed over".into()));
            // The real git and what it starts (hooks, its own `git`) inherit the channel.
            let _ = rustix::io::fcntl_setfd(client.channel(), rustix::io::FdFlags::empty());
            let name = invoked_as.rsplit('/').next().unwrap_or("git").to_string();
            let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&real));
            // An approved push or fetch runs the host's plan, not the invocation, and from the
            // host's environment alone.
            let run_args = a.args.clone().unwrap_or_else(|| args.clone());
            let mut real_git = std::process::Command::new(path);
            real_git.arg0(&name).args(&run_args);
            if a.env_clear {
                real_git.env_clear();
            }
            real_git.envs(a.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let Some(then) = a.then.clone() else {
                let err = real_git.exec();
                fail(format!(
                    "`{}` was allowed, but git could not be started: {err}",
                    a.action
                ))
            };
            // A pull: the fetch, then its next step as a git invocation of its own, asked like any
            // other, with the invocation's environment.
            let status = real_git.status().unwrap_or_else(|err| {
                fail(format!(
                    "`{}` was allowed, but git could not be started: {err}",
                    a.action
                ))
            });
            if !status.success() {
                std::process::exit(status.code().unwrap_or(128))
            }
            drop(real);
            let shim = std::env::current_exe()
                .unwrap_or_else(|e| fail(format!("the shim cannot find itself: {e}")));
            let err = std::process::Command::new(shim)
                .arg0(&name)
                .args(&then)
                .exec();
            fail(format!(
                "`git {}` could not be started: {err}",
                then.join(" ")
            ))
        }
        Answer::Git(a) => {
            let mut line = format!("`{}` refused by {}", a.action, a.rule);
            if !a.by.is_empty() && a.by != a.rule {
                line.push_str(&format!(" ({})", a.by));
            }
            if !a.reason.is_empty() {
                line.push_str(&format!(": {}", a.reason));
            }
            fail(line)
        }
        Answer::Refused { reason } => fail(format!("the host refused the request: {reason}")),
        Answer::Askpass(_) => fail("the host answered a git request with a credential".into()),
    }
}
