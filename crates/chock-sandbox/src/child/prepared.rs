//! Everything the child needs, built on the host before fork (by `host/prepare.rs`), read by the
//! call's processes after it.
//!
//! Why before fork: the parent may be multi-threaded (the agent runs on tokio). After fork only the
//! forking thread exists in the child, and a lock another thread held at that instant stays held
//! forever. So the child should run only async-signal-safe code. Every string, pointer array, mount
//! step and seccomp program is made here; the child walks prepared data with raw system calls. The
//! one exception is the Landlock ruleset, which must name paths of the new root and is built by the
//! `landlock` crate in the call's init (it allocates): glibc's and musl's fork() re-initialise the
//! allocator's locks in the child, so allocation there is safe with those C libraries, and the init
//! takes no other lock (no stdio, no environment, no Rust std mutex).

use std::ffi::{CString, c_char};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;

use crate::child::fresh::FreshStep;
use crate::child::landlock_rules::LandlockPlan;
use crate::child::limits::Rlimits;
use crate::wire::error::SandboxError;
use crate::wire::mount_ops::Step;
use crate::wire::plan::Plan;

/// Prepared data for the child. Holds raw pointers into its own strings, so it stays on the
/// spawning thread's stack.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    pub steps: Vec<Step>,
    pub landlock: LandlockPlan,
    pub seccomp: Vec<BpfProgram>,
    /// A call's own mounts in a session sandbox (see `fresh.rs`); empty for a per-call build.
    pub fresh: Vec<FreshStep>,
    pub cmd: CommandSpec,
    pub rlimits: Rlimits,
    pub cgroup_procs: Option<CString>,
    pub proxy_port: Option<u16>,
}

/// What the command process needs: where the program may be, its arguments, environment and
/// working directory, as C strings with their pointer arrays (the part of a call that differs
/// between the calls of one session sandbox).
#[derive(Debug)]
pub(crate) struct CommandSpec {
    pub candidates: Vec<CString>,
    argv: Vec<CString>,
    pub argv_ptrs: Vec<*const c_char>,
    env: Vec<CString>,
    pub env_ptrs: Vec<*const c_char>,
    pub cwd: CString,
}

// SAFETY: the pointer arrays point into the heap buffers of this value's own `argv` and `env`
// strings, which it owns, never changes after building, and frees only when it is dropped; moving
// the value to another thread moves those buffers with it, and nothing writes through the
// pointers.
unsafe impl Send for CommandSpec {}

impl CommandSpec {
    pub(crate) fn new(plan: &Plan) -> Result<CommandSpec, SandboxError> {
        let path = plan
            .env_var("PATH")
            .unwrap_or(crate::wire::plan::DEFAULT_PATH);
        let candidates = candidates(&plan.argv[0], path)
            .iter()
            .map(|p| cstring("program path", p.as_os_str().as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let argv = plan
            .argv
            .iter()
            .map(|a| cstring("argument", a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let channel = plan.host_channel.then(|| {
            (
                crate::HOST_CHANNEL_ENV.to_string(),
                crate::HOST_CHANNEL_FD.to_string(),
            )
        });
        // The host channel's number is the sandbox's to say: a plan's own value is replaced.
        let env = plan
            .env
            .iter()
            .filter(|(k, _)| k != crate::HOST_CHANNEL_ENV)
            .chain(channel.as_ref())
            .map(|(k, v)| cstring("environment", format!("{k}={v}").as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let cwd = cstring("cwd", plan.cwd.as_os_str().as_bytes())?;
        Ok(Self::from_parts(candidates, argv, env, cwd))
    }

    pub(crate) fn from_parts(
        candidates: Vec<CString>,
        argv: Vec<CString>,
        env: Vec<CString>,
        cwd: CString,
    ) -> CommandSpec {
        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|c| c.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut env_ptrs: Vec<*const c_char> = env.iter().map(|c| c.as_ptr()).collect();
        env_ptrs.push(std::ptr::null());
        CommandSpec {
            candidates,
            argv,
            argv_ptrs,
            env,
            env_ptrs,
            cwd,
        }
    }

    /// The strings, in the order `from_parts` takes them.
    pub(crate) fn parts(&self) -> (&[CString], &[CString], &[CString], &CString) {
        (&self.candidates, &self.argv, &self.env, &self.cwd)
    }
}

pub(crate) fn cstring(what: &str, bytes: &[u8]) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| SandboxError::Plan(format!("{what} contains a NUL byte")))
}

/// Where `argv0` may be: itself when it has a `/`, else each directory of the plan's PATH.
fn candidates(argv0: &str, path: &str) -> Vec<PathBuf> {
    if argv0.contains('/') {
        return vec![PathBuf::from(argv0)];
    }
    path.split(':')
        .map(|d| {
            if d.is_empty() {
                Path::new(".").join(argv0)
            } else {
                Path::new(d).join(argv0)
            }
        })
        .collect()
}
