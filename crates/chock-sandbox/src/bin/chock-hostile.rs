//! `chock-hostile`: a deliberately malicious program for the escape suite (`tests/escape*.rs`).
//!
//! Each subcommand tries ONE act that a confined tool call must not be able to do and reports what
//! the kernel answered, so a test can assert not only that the act failed but *how* it failed —
//! which names the layer that stopped it. The arguments of every raw system call are chosen so
//! that, if the act does go through (a layer is missing), nothing on the host is harmed: a sysctl
//! is written back with its own value, a reboot gets a wrong magic number, a module name that does
//! not exist is deleted.
//!
//! Protocol (what the tests parse):
//! - stdout: one line `refused <ERRNO>` (for example `refused EPERM`) or `succeeded <detail>`;
//!   report subcommands (`status`, `env`, `ifaces`, `pids`, `fds`) print their findings instead.
//! - exit status: [`REFUSED`] when the act failed with an errno, [`SUCCEEDED`] when it went
//!   through (an escape), [`USAGE`] for bad arguments, [`INCONCLUSIVE`] when the setup the act
//!   needs failed (the test must then fail, not pass). A call on the seccomp kill list never
//!   returns: the caller sees the process killed (SIGKILL from the host, which names the call).

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

// A crate root's modules sit beside it, so the bin's own directory is named explicitly.
#[path = "chock-hostile/inode.rs"]
mod inode;
#[path = "chock-hostile/raw_acts.rs"]
mod raw_acts;
#[path = "chock-hostile/reports.rs"]
mod reports;
#[path = "chock-hostile/surface.rs"]
mod surface;

use raw_acts::{set_id, syscall};
use reports::{fds, ifaces, pids, read_fd, setuid_probe, status};

/// The act failed with an errno.
const REFUSED: i32 = 0;
/// The act went through: an escape.
const SUCCEEDED: i32 = 42;
/// Bad arguments.
const USAGE: i32 = 2;
/// The setup the act needs failed; nothing was proven either way.
const INCONCLUSIVE: i32 = 3;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let code = match argv.as_slice() {
        ["syscall", name] => syscall(name),
        // The same with a SIGSYS handler installed first (a kill by SIGSYS would become a
        // refusal the program survives), or from a second thread (the watch kills the process,
        // not the thread).
        ["syscall-handled", name] => {
            extern "C" fn ignore(_: libc::c_int) {}
            // SAFETY: sigaction with a zeroed struct and a handler that does nothing.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = ignore as *const () as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigaction(libc::SIGSYS, &raw const act, std::ptr::null_mut());
            }
            syscall(name)
        }
        ["syscall-on-thread", name] => {
            let name = name.to_string();
            std::thread::spawn(move || syscall(&name))
                .join()
                .unwrap_or(INCONCLUSIVE)
        }
        ["write", path] => write_file(path),
        ["read", path] => read_file(path),
        ["unlink", path] => errno_result(nix::unistd::unlink(*path)),
        ["rename", from, to] => errno_result(std::fs::rename(from, to)),
        ["chmod", path] => errno_result(std::fs::set_permissions(
            path,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )),
        ["rewrite", path] => rewrite(path),
        // Sets an inode's mode, owner or times to what they are, or sets and removes an
        // extended attribute (src/bin/chock-hostile/inode.rs).
        ["inode", what, path] => inode::act(what, path),
        // Creates `path` (if absent) and gives it `mode` (octal), e.g. 4755: a set-user-id file
        // owned by the call's uid, left behind for the host.
        ["chmod-mode", path, mode] => match u32::from_str_radix(mode, 8) {
            Ok(m) => errno_result(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .and_then(|_| {
                        std::fs::set_permissions(
                            path,
                            std::os::unix::fs::PermissionsExt::from_mode(m),
                        )
                    }),
            ),
            Err(_) => USAGE,
        },
        // Gives a new file at `path` set-id bits (04755, or 02755 for the `-gid` variants of the
        // chmod calls) through one system call: chmod, fchmod, fchmodat, fchmodat2 on a file it
        // first creates with 0644; open, openat, creat, mknod, mknodat, openat2 creating it so.
        ["setid", call, path] => set_id(call, path),
        // Opens for writing and closes without writing: for files where any write is an act
        // (/proc/sysrq-trigger), the open is where Landlock and the permission checks answer.
        // Opens for reading and reads a few bytes: for files too large to print (kpageflags).
        ["open-read", path] => errno_result(std::fs::File::open(path).and_then(|mut f| {
            let mut buf = [0u8; 16];
            std::io::Read::read(&mut f, &mut buf)
        })),
        ["open-write", path] => errno_result(std::fs::OpenOptions::new().write(true).open(path)),
        ["connect-tcp", addr] => errno_result(std::net::TcpStream::connect(addr)),
        ["bind-tcp", addr] => errno_result(std::net::TcpListener::bind(addr)),
        // UDP is outside Landlock's network rules: only the network namespace keeps it in.
        ["send-udp", addr] => errno_result(
            std::net::UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.send_to(b"chock-hostile datagram", addr)),
        ),
        // Looks up a System V shared memory segment by key (the IPC namespace keeps the host's).
        ["shm-get", key] => match key.parse::<i32>() {
            // SAFETY: shmget with size 0 and no flags only looks the key up.
            Ok(k) => raw_result(
                libc::c_long::from(unsafe { libc::shmget(k, 0, 0) }),
                "shmget",
            ),
            Err(_) => USAGE,
        },
        // Creates `path` and gives it file capabilities (CAP_SETUID, effective): for a root user
        // whose uid 0 is the host's, such a file is a privileged program on the host.
        ["setcap", path] => setcap(path),
        ["connect-unix", path] => errno_result(std::os::unix::net::UnixStream::connect(path)),
        // Creates `marker`, then lists `dir` until `name` is in it (up to 20 s) and connects to
        // it: for a socket a host daemon binds while the call runs, after the host saw the marker.
        ["connect-unix-when-listed", marker, dir, name] => connect_when_listed(marker, dir, name),
        ["connect-abstract", name] => connect_abstract(name),
        ["kill", pid] => kill(pid),
        ["status"] => status(),
        ["setuid-probe", program, rest @ ..] => setuid_probe(program, rest),
        ["ifaces"] => ifaces(),
        ["pids"] => pids(),
        ["env"] => {
            for (k, v) in std::env::vars_os() {
                println!("{}={}", k.to_string_lossy(), v.to_string_lossy());
            }
            REFUSED
        }
        ["read-fd", fd] => read_fd(fd),
        ["fds"] => fds(),
        ["daemonize", marker, delay_ms, _token] => daemonize(marker, delay_ms, false),
        ["daemonize-keep-stdio", marker, delay_ms, _token] => daemonize(marker, delay_ms, true),
        ["tiocsti", fd, text] => tiocsti(fd, text),
        ["tty-session", fd] => tty_session(fd),
        // Kernel surface the filter narrows by argument (src/bin/chock-hostile/surface.rs).
        ["socket", family] => surface::socket(family),
        ["socketpair", family] => surface::socketpair(family),
        ["netlink", protocol] => surface::netlink(protocol),
        ["tiocsetd"] => surface::tiocsetd(),
        ["name-to-handle", path] => surface::name_to_handle(path),
        ["personality", value] => surface::personality(value),
        _ => {
            eprintln!("usage: chock-hostile <act> [args]; see the source for the list of acts");
            USAGE
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// The symbolic name of an errno (`EPERM`), as the tests compare it.
fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

fn refused(errno: i32) -> i32 {
    println!("refused {}", errno_name(errno));
    REFUSED
}

fn succeeded(detail: &str) -> i32 {
    println!("succeeded {detail}");
    SUCCEEDED
}

/// Reports an `io::Result` or `nix::Result` as the protocol line.
fn connect_when_listed(marker: &str, dir: &str, name: &str) -> i32 {
    if let Err(e) = std::fs::write(marker, "") {
        println!("inconclusive marker {marker}: {e}");
        return INCONCLUSIVE;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let listed = std::fs::read_dir(dir)
            .map(|entries| entries.flatten().any(|e| e.file_name() == name))
            .unwrap_or(false);
        if listed {
            let path = std::path::Path::new(dir).join(name);
            return errno_result(std::os::unix::net::UnixStream::connect(path));
        }
        if std::time::Instant::now() > deadline {
            println!("inconclusive {name} never appeared in {dir}");
            return INCONCLUSIVE;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn errno_result<T, E: Into<std::io::Error>>(r: Result<T, E>) -> i32 {
    match r {
        Ok(_) => succeeded("ok"),
        Err(e) => {
            let e: std::io::Error = e.into();
            match e.raw_os_error() {
                Some(errno) => refused(errno),
                None => {
                    println!("inconclusive {e}");
                    INCONCLUSIVE
                }
            }
        }
    }
}

/// The result of a raw system call: -1 means failure with errno.
fn raw_result(ret: libc::c_long, what: &str) -> i32 {
    if ret == -1 {
        refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        succeeded(&format!("{what} returned {ret}"))
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("argument without NUL")
}

fn write_file(path: &str) -> i32 {
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(b"written by chock-hostile\n"));
    errno_result(r)
}

fn read_file(path: &str) -> i32 {
    match std::fs::read(path) {
        Ok(bytes) => succeeded(&String::from_utf8_lossy(&bytes).replace('\n', "\\n")),
        Err(e) => errno_result::<(), _>(Err(e)),
    }
}

/// Opens a kernel tunable for writing and writes back the value it already has: a success proves
/// write access while changing nothing, even on a host where every layer is missing.
fn rewrite(path: &str) -> i32 {
    let current = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return errno_result::<(), _>(Err(e)),
    };
    let r = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(&current));
    errno_result(r)
}

fn connect_abstract(name: &str) -> i32 {
    use std::os::linux::net::SocketAddrExt;
    let addr = match std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()) {
        Ok(a) => a,
        Err(e) => {
            println!("inconclusive {e}");
            return INCONCLUSIVE;
        }
    };
    errno_result(std::os::unix::net::UnixStream::connect_addr(&addr))
}

fn kill(pid: &str) -> i32 {
    let Ok(pid) = pid.parse::<i32>() else {
        return USAGE;
    };
    // SIGCONT: delivered for real if the act succeeds, but harmless to a running process.
    errno_result(nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGCONT,
    ))
}

/// Leaves a grandchild behind in a session of its own, which writes `marker` after `delay_ms`.
/// The parent exits 0 at once; the test checks the grandchild is gone when the call ends.
fn daemonize(marker: &str, delay_ms: &str, keep_stdio: bool) -> i32 {
    let Ok(delay) = delay_ms.parse::<u64>() else {
        return USAGE;
    };
    // SAFETY: this program is single-threaded here; the child only calls async-signal-safe
    // functions and plain Rust without allocation locks held by other threads (there are none).
    match unsafe { nix::unistd::fork() } {
        Err(e) => errno_result::<(), _>(Err(e)),
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            let _ = nix::sys::wait::waitpid(child, None);
            println!("daemon started");
            REFUSED
        }
        Ok(nix::unistd::ForkResult::Child) => {
            let _ = nix::unistd::setsid();
            // SAFETY: as above, single-threaded.
            match unsafe { nix::unistd::fork() } {
                Ok(nix::unistd::ForkResult::Child) => {
                    if !keep_stdio
                        && let Ok(null) = std::fs::File::options()
                            .read(true)
                            .write(true)
                            .open("/dev/null")
                    {
                        for fd in 0..3 {
                            // SAFETY: dup2 onto the standard descriptors of this process.
                            unsafe { libc::dup2(null.as_raw_fd(), fd) };
                        }
                    }
                    // Ignore the polite signals: only a kill of the whole tree may stop us.
                    for sig in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT, libc::SIGPIPE] {
                        // SAFETY: setting a signal disposition to SIG_IGN has no memory effects.
                        unsafe { libc::signal(sig, libc::SIG_IGN) };
                    }
                    std::thread::sleep(Duration::from_millis(delay));
                    let _ = std::fs::write(marker, b"the daemon outlived its call\n");
                    // SAFETY: leaving the forked child without running the parent's destructors.
                    unsafe { libc::_exit(0) }
                }
                // SAFETY: leaving the forked child without running the parent's destructors.
                _ => unsafe { libc::_exit(0) },
            }
        }
    }
}

/// Pushes `text` into the input queue of the terminal on `fd`, as if typed there.
fn tiocsti(fd: &str, text: &str) -> i32 {
    let Ok(fd) = fd.parse::<i32>() else {
        return USAGE;
    };
    for b in text.bytes() {
        // SAFETY: TIOCSTI reads one byte from the pointer, which points at a live local.
        let r = unsafe { libc::ioctl(fd, libc::TIOCSTI, &b as *const u8) };
        if r == -1 {
            return refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
    }
    succeeded(&format!("pushed {} bytes", text.len()))
}

/// Asks the terminal on `fd` for its session (TIOCGSID): it answers only to a process whose
/// controlling terminal it is (ENOTTY otherwise), so a success means the call still holds the
/// host's terminal as its controlling terminal.
fn tty_session(fd: &str) -> i32 {
    let Ok(fd) = fd.parse::<i32>() else {
        return USAGE;
    };
    let mut sid: libc::pid_t = 0;
    // SAFETY: TIOCGSID writes one pid_t to the pointer, which points at a live local.
    let r = unsafe { libc::ioctl(fd, libc::TIOCGSID, &mut sid as *mut libc::pid_t) };
    if r == -1 {
        return refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    succeeded(&format!("the terminal's session is {sid}"))
}

fn setcap(path: &str) -> i32 {
    if let Err(e) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        return errno_result::<(), _>(Err(e));
    }
    // struct vfs_cap_data, revision 2: magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
    // then (permitted, inheritable) for the low and high 32 capability bits. CAP_SETUID is 7.
    let mut data = [0u8; 20];
    data[..4].copy_from_slice(&(0x0200_0000u32 | 1).to_le_bytes());
    data[4..8].copy_from_slice(&(1u32 << 7).to_le_bytes());
    let (p, name) = (cstr(path), cstr("security.capability"));
    // SAFETY: NUL-terminated path and name; `data` is 20 live bytes as passed.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            data.as_ptr().cast(),
            data.len(),
            0,
        )
    };
    raw_result(libc::c_long::from(r), "setxattr security.capability")
}

/// Opens a file for a syscall that needs a descriptor; a failure here is inconclusive.
fn open_fd(path: &str) -> Option<OwnedFd> {
    let c = cstr(path);
    // SAFETY: `c` is a valid NUL-terminated path; the returned fd is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    // SAFETY: a non-negative fd returned by open is ours to own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A system call argument: registers are untyped machine words.
trait Arg {
    fn word(self) -> libc::c_long;
}

macro_rules! arg_as_word {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            // A register is a machine word: sign and width are the kernel's to interpret.
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation, clippy::cast_lossless)]
            fn word(self) -> libc::c_long {
                self as libc::c_long
            }
        }
    )*};
}
arg_as_word!(i32, u32, i64, u64, usize);

fn int(v: impl Arg) -> libc::c_long {
    v.word()
}

fn ptr<T>(p: *const T) -> libc::c_long {
    p as libc::c_long
}

/// One raw system call with up to six arguments.
fn sys(nr: libc::c_long, args: &[libc::c_long]) -> libc::c_long {
    let a = |i: usize| args.get(i).copied().unwrap_or(0);
    // SAFETY: every caller in this program passes plain integers, null, or pointers to locals
    // that are alive for the call and as large as the kernel reads (it validates them and answers
    // EFAULT otherwise). The argument values are chosen so that even an allowed call changes no
    // host state.
    unsafe { libc::syscall(nr, a(0), a(1), a(2), a(3), a(4), a(5)) }
}
