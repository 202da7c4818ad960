//! Shared fixture of the escape suite: a throwaway "home" with a secret and a project in it, the
//! hostile program copied into the project, and a runner that collects what the call printed.
//!
//! Everything lives under the real `$HOME` (as a project would): a secret there is "a secret in a
//! home directory", and nothing depends on `/tmp`, which the sandbox replaces with its own.
#![allow(dead_code)] // each test binary uses part of this module

mod guest;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chock_sandbox::{ExitStatus, NetworkPlan, Plan, StdioMode, WorkspaceMount};

/// The secret planted in the home directory; no call may print it.
pub const SECRET: &str = "chock-escape-secret-4f1c9a";

/// Where the hostile program appears inside the project.
pub const HOSTILE_NAME: &str = "chock-hostile";

/// Exit status of chock-hostile when the act was refused with an errno.
pub const HOSTILE_REFUSED: i32 = 0;
/// Exit status of chock-hostile when the act went through.
pub const HOSTILE_SUCCEEDED: i32 = 42;

/// The workspace a call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// The real project as the lower layer of an overlay; writes land in the session's upper dir.
    Overlay,
    /// A copy of the project (the session's throwaway copy) bound read-write.
    BindCopy,
}

/// One test's world. Dropped at the end of the test (removing everything it made).
#[derive(Debug)]
pub struct Fixture {
    /// `$HOME/.chock-escape-<unique>`: stands for a home directory.
    pub base: PathBuf,
    /// `base/secret.txt`, holding [`SECRET`].
    pub secret: PathBuf,
    /// `base/project`: the real project.
    pub project: PathBuf,
    /// `base/session`: overlay upper and work dirs, or the bound copy.
    pub session: PathBuf,
    pub backing: Backing,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// chock-hostile copied once per test process next to the fixtures (same filesystem, so each
/// fixture can hard-link it), mode 0755.
fn staged_hostile() -> &'static Path {
    static STAGED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    STAGED.get_or_init(|| {
        let dir = home().join(format!(".chock-escape-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the staging dir");
        let staged = dir.join(HOSTILE_NAME);
        std::fs::copy(env!("CARGO_BIN_EXE_chock-hostile"), &staged).expect("stage chock-hostile");
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))
            .expect("chmod chock-hostile");
        // Removed when the process exits; a crash leaves one small directory behind.
        extern "C" fn remove_staged() {
            if let Some(p) = STAGED.get().and_then(|p| p.parent()) {
                let _ = std::fs::remove_dir_all(p);
            }
        }
        // SAFETY: registering a plain extern "C" function that captures nothing.
        unsafe { libc::atexit(remove_staged) };
        staged
    })
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// The home directory the tests run under (CI as root: /root; `.ci/sandbox-as-user`: /home/chockci).
/// `$HOME`, or the user's home from the password database when it is unset.
pub fn home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map_or_else(
            || {
                nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
                    .expect("neither HOME nor a password entry names this user's home")
            },
            PathBuf::from,
        )
}

impl Fixture {
    pub fn new(backing: Backing) -> Fixture {
        let base = home().join(format!(".chock-escape-{}", unique()));
        let project = base.join("project");
        let session = base.join("session");
        std::fs::create_dir_all(&project).expect("create project");
        std::fs::create_dir_all(&session).expect("create session dir");
        let secret = base.join("secret.txt");
        std::fs::write(&secret, format!("{SECRET}\n")).expect("write secret");
        std::fs::write(project.join("README.md"), "the real project\n").expect("write README");
        std::fs::write(
            project.join("chock.toml"),
            "# policy\n[rules]\n\"exec.*\" = \"allow\"\n",
        )
        .expect("write policy");
        // A hard link to one staged copy, never a fresh copy: writing an executable while another
        // test thread forks would leave a writable descriptor in that child for a moment, and an
        // exec of the file then fails with ETXTBSY.
        std::fs::hard_link(staged_hostile(), project.join(HOSTILE_NAME))
            .expect("link chock-hostile into the project");
        Fixture {
            base,
            secret,
            project,
            session,
            backing,
        }
    }

    /// The workspace mount for this fixture's backing. For [`Backing::BindCopy`] the copy is made
    /// at the first call, so files added to the project before it are in it.
    pub fn mount(&self) -> WorkspaceMount {
        match self.backing {
            Backing::Overlay => {
                let (upper, work) = (self.session.join("upper"), self.session.join("work"));
                std::fs::create_dir_all(&upper).expect("upper");
                std::fs::create_dir_all(&work).expect("work");
                WorkspaceMount::Overlay {
                    lower: self.project.clone(),
                    upper,
                    work,
                }
            }
            Backing::BindCopy => {
                // Made once per fixture, like a session's copy: later calls see earlier writes.
                let copy = self.session.join("copy");
                if !copy.exists() {
                    copy_tree(&self.project, &copy);
                }
                WorkspaceMount::Bind { source: copy }
            }
        }
    }

    /// The path of the hostile program inside the sandbox.
    pub fn hostile(&self) -> String {
        self.project
            .join(HOSTILE_NAME)
            .to_string_lossy()
            .into_owned()
    }

    /// A plan running chock-hostile with `args`, policy file bound, no network, a safety timeout.
    pub fn hostile_plan(&self, args: &[&str]) -> Plan {
        let mut argv = vec![self.hostile()];
        argv.extend(args.iter().map(|a| (*a).to_string()));
        self.plan(argv)
    }

    /// A plan running `argv` in this fixture's project.
    pub fn plan(&self, argv: Vec<String>) -> Plan {
        Plan::builder(argv, self.mount(), self.project.clone())
            .policy_file(Some(self.project.join("chock.toml")))
            .network(NetworkPlan::None)
            .timeout(Some(Duration::from_secs(60)))
            .build_with_env(&[("PATH".to_string(), chock_sandbox::DEFAULT_PATH.to_string())])
    }

    /// Where a write to `relative` (inside the project) lands on the host for this backing.
    pub fn landed(&self, relative: &str) -> PathBuf {
        match self.backing {
            Backing::Overlay => self.session.join("upper").join(relative),
            Backing::BindCopy => self.session.join("copy").join(relative),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The overlay work dir holds a mode-000 directory made by the kernel: open it up first.
        make_removable(&self.base);
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn make_removable(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_removable(&e.path());
            }
        }
    }
}

/// A plain recursive copy (files, dirs, symlinks), standing in for the session's copy.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for e in std::fs::read_dir(from).expect("read project").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().expect("file type");
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).expect("readlink"), &dst)
                .expect("symlink");
        } else if ty.is_dir() {
            copy_tree(&src, &dst);
        } else if ty.is_file() {
            std::fs::copy(&src, &dst).expect("copy file");
        }
    }
}

/// What a finished call showed.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// The forbidden call the filter killed a process for, as the outcome names it.
    pub forbidden_call: Option<String>,
    /// The outcome's words on the filter's part.
    pub filter_note: Option<String>,
}

/// Runs the plan with piped output and waits for it. A call that cannot start (a layer could not
/// be applied) fails the test: rule 1 says the call fails, and the suite must notice.
///
/// With `CHOCK_ESCAPE_SESSION=1` in the environment every call of a test thread runs as a call of
/// one session ([`chock_sandbox::spawn_in_session`], one `SocketIndex` per thread), so a plan the
/// session sandbox covers is forked from a session init (an overlay workspace becomes the
/// session's shared instance, as in a session): the same attacks against the other way of
/// building a call.
pub fn run(plan: &Plan) -> Run {
    if in_guest() {
        return guest::run(plan);
    }
    thread_local! {
        static SESSION: chock_sandbox::SocketIndex = chock_sandbox::SocketIndex::new();
    }
    let spawned = if std::env::var_os("CHOCK_ESCAPE_SESSION").is_some_and(|v| v == "1") {
        // An overlay workspace is the session's shared instance there, as in a session.
        let mut plan = plan.clone();
        let overlay = match plan.workspace {
            WorkspaceMount::Overlay { .. } => {
                plan.shared_overlay = true;
                Some(chock_sandbox::SharedOverlay::new(&plan.workspace).expect("a shared overlay"))
            }
            WorkspaceMount::Bind { .. } | WorkspaceMount::ReadOnly { .. } => None,
        };
        SESSION.with(|index| {
            // A session's first call is built the per-call way: the first of each thread is a
            // `true`, so every attack runs in a session init.
            if index.session_init_pid().is_none() {
                let mut warm = plan.clone();
                warm.argv = vec!["/bin/true".into()];
                let _ = chock_sandbox::spawn_in_session(
                    &warm,
                    StdioMode::Null,
                    overlay.as_ref(),
                    index,
                )
                .and_then(|mut c| c.wait());
            }
            chock_sandbox::spawn_in_session(&plan, StdioMode::Piped, overlay.as_ref(), index)
        })
    } else {
        chock_sandbox::spawn(plan, StdioMode::Piped)
    };
    collect(plan, spawned)
}

/// Runs `plan` the per-call way whatever `CHOCK_ESCAPE_SESSION` says: for what only a call's own
/// sandbox has (an in-memory upper layer). A guest's init builds every call the per-call way.
pub fn run_per_call(plan: &Plan) -> Run {
    if in_guest() {
        return guest::run(plan);
    }
    collect(plan, chock_sandbox::spawn(plan, StdioMode::Piped))
}

/// Whether the suite's calls run in a microVM guest: `CHOCK_ESCAPE_CONFINER=microvm` (the same
/// test bodies, their plans started through chock-vm's `GuestConfiner` instead of the host's
/// driver; `.ci/run` runs the suite so a third time). Any other value is refused by name.
pub fn in_guest() -> bool {
    match std::env::var("CHOCK_ESCAPE_CONFINER").as_deref() {
        Ok("microvm") => true,
        Ok("") | Ok("host") | Err(_) => false,
        Ok(other) => panic!("CHOCK_ESCAPE_CONFINER={other}: expected `host` or `microvm`"),
    }
}

/// In a guest, says why the calling test's attack does not apply there and returns true (the
/// test then returns); on the host, false.
pub fn not_in_guest(why: &str) -> bool {
    if in_guest() {
        println!("not run in the microVM guest: {why}");
    }
    in_guest()
}

/// Starts `plan` in the suite's confiner and expects it refused before it runs: the error.
pub fn start_error(plan: &Plan) -> chock_sandbox::SandboxError {
    let started = if in_guest() {
        guest::start(plan).map(drop)
    } else {
        chock_sandbox::spawn(plan, StdioMode::Null).map(drop)
    };
    match started {
        Err(e) => e,
        Ok(()) => panic!("`{}` started; it must be refused", plan.argv.join(" ")),
    }
}

fn collect(
    plan: &Plan,
    spawned: Result<chock_sandbox::SandboxChild, chock_sandbox::SandboxError>,
) -> Run {
    let mut child = spawned.unwrap_or_else(|e| {
        panic!(
            "the sandbox refused to start `{}`: {e}",
            plan.argv.join(" ")
        )
    });
    let out = child.take_stdout().map(reader);
    let err = child.take_stderr().map(reader);
    let outcome = child
        .wait()
        .unwrap_or_else(|e| panic!("waiting for `{}`: {e}", plan.argv.join(" ")));
    let stdout = out
        .map(|h| h.join().expect("stdout reader"))
        .unwrap_or_default();
    let stderr = err
        .map(|h| h.join().expect("stderr reader"))
        .unwrap_or_default();
    Run {
        status: outcome.status,
        stdout,
        stderr,
        forbidden_call: outcome.forbidden_call.clone(),
        filter_note: outcome.filter_note(),
    }
}

fn reader(mut f: std::fs::File) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

impl Run {
    /// Asserts chock-hostile reported `refused <errno>`; `layer` names what must have refused it.
    #[track_caller]
    pub fn assert_refused(&self, errno: &str, layer: &str) {
        let expected = format!("refused {errno}");
        assert!(
            self.status == ExitStatus::Exited(HOSTILE_REFUSED) && self.stdout.trim() == expected,
            "expected `{expected}` ({layer}), got {:?}\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout.trim(),
            self.stderr.trim()
        );
    }

    /// Asserts the act was refused with any errno (the exact one is checked elsewhere), and
    /// returns it.
    #[track_caller]
    pub fn assert_refused_any(&self, layer: &str) -> String {
        let errno = self
            .stdout
            .trim()
            .strip_prefix("refused ")
            .map(str::to_string);
        match (self.status, errno) {
            (ExitStatus::Exited(HOSTILE_REFUSED), Some(e)) => e,
            _ => panic!(
                "expected the act to be refused ({layer}), got {:?}\nstdout: {}\nstderr: {}",
                self.status,
                self.stdout.trim(),
                self.stderr.trim()
            ),
        }
    }

    /// Asserts the process was killed by the seccomp filter for the kill row `call`: SIGKILL
    /// from the host's watch, and the outcome naming the call.
    #[track_caller]
    pub fn assert_killed_for(&self, call: &str) {
        assert!(
            self.status == ExitStatus::Signaled(libc::SIGKILL)
                && self.forbidden_call.as_deref() == Some(call)
                && self
                    .filter_note
                    .as_deref()
                    .is_some_and(|n| n.contains(call)),
            "expected `{call}` to be killed by the seccomp filter and named, got {:?} (forbidden \
             call {:?})\nstdout: {}\nstderr: {}",
            self.status,
            self.forbidden_call,
            self.stdout.trim(),
            self.stderr.trim()
        );
    }

    /// Asserts the call was killed by SIGSYS (the kernel's kill, for a call through another
    /// architecture's table), and the outcome says the filter most likely did it.
    #[track_caller]
    pub fn assert_killed_by_sigsys(&self, what: &str) {
        assert!(
            self.status == ExitStatus::Signaled(libc::SIGSYS)
                && self
                    .filter_note
                    .as_deref()
                    .is_some_and(|n| n.contains("SIGSYS")),
            "expected `{what}` to be killed by the seccomp filter (SIGSYS), got {:?}\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout.trim(),
            self.stderr.trim()
        );
    }

    /// Asserts a report subcommand of chock-hostile ran to completion.
    #[track_caller]
    pub fn assert_reported(&self) -> &str {
        assert_eq!(
            self.status,
            ExitStatus::Exited(HOSTILE_REFUSED),
            "the report did not complete\nstdout: {}\nstderr: {}",
            self.stdout.trim(),
            self.stderr.trim()
        );
        &self.stdout
    }
}

/// Runs chock-hostile with `args` in a fresh fixture.
pub fn hostile(backing: Backing, args: &[&str]) -> Run {
    let fx = Fixture::new(backing);
    run(&fx.hostile_plan(args))
}

/// Every host process whose command line contains `token`.
pub fn host_processes_with(token: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(token) {
            found.push(pid);
        }
    }
    found
}

/// A unique token for marking processes and files of one test.
pub fn token(what: &str) -> String {
    format!("chock-escape-{what}-{}", unique())
}

/// The Landlock ABI the kernel offers (0 when it has none), asked the way the driver asks it; in
/// a guest, the guest kernel's.
pub fn landlock_abi() -> i64 {
    if in_guest() {
        return guest::landlock_abi();
    }
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    v.max(0)
}

/// Whether the kernel has Landlock's TCP rules (ABI 4+). When it has not, the driver applies the
/// highest ABI there is, and the tests that name Landlock's TCP answer say so and check only that
/// the act failed.
pub fn landlock_has_tcp() -> bool {
    let abi = landlock_abi();
    if abi < 4 {
        println!(
            "Landlock ABI {abi} has no TCP rules: checking only that the act fails (network namespace)"
        );
    }
    abi >= 4
}
