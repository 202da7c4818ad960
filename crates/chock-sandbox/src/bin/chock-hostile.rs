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
//!   returns: the caller sees the process killed by SIGSYS.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

// A crate root's modules sit beside it, so the bin's own directory is named explicitly.
#[path = "chock-hostile/surface.rs"]
mod surface;

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
        ["write", path] => write_file(path),
        ["read", path] => read_file(path),
        ["unlink", path] => errno_result(nix::unistd::unlink(*path)),
        ["rename", from, to] => errno_result(std::fs::rename(from, to)),
        ["chmod", path] => errno_result(std::fs::set_permissions(
            path,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )),
        ["rewrite", path] => rewrite(path),
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

/// The credential and confinement lines of `/proc/self/status`, as read after our own exec.
fn status() -> i32 {
    let text = match std::fs::read_to_string("/proc/self/status") {
        Ok(t) => t,
        Err(e) => {
            println!("inconclusive /proc/self/status: {e}");
            return INCONCLUSIVE;
        }
    };
    for line in text.lines() {
        let keep = [
            "Uid:",
            "Gid:",
            "Cap",
            "NoNewPrivs:",
            "Seccomp:",
            "Seccomp_filters:",
        ];
        if keep.iter().any(|k| line.starts_with(k)) {
            println!("{line}");
        }
    }
    REFUSED
}

/// Executes a set-user-id program and reads its credentials from `/proc` while it is blocked
/// reading an empty stdin, then kills it. Prints `euid=<n> capeff=<hex> capprm=<hex> name=<comm>`.
fn setuid_probe(program: &str, rest: &[&str]) -> i32 {
    let mut child = match std::process::Command::new(program)
        .args(rest)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return errno_result::<(), _>(Err(e)),
    };
    let pid = child.id();
    let base = program.rsplit('/').next().unwrap_or(program);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            println!(
                "inconclusive {program} exited ({st}) before it could be observed; last status: {last}"
            );
            return INCONCLUSIVE;
        }
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let field = |name: &str| {
                text.lines()
                    .find(|l| l.starts_with(name))
                    .map(|l| l[name.len()..].split_whitespace().collect::<Vec<_>>())
                    .unwrap_or_default()
            };
            let comm = field("Name:").join("");
            let state = field("State:").join(" ");
            last = format!("name={comm} state={state}");
            // Sleeping under the program's own name: the exec happened and the set-uid program is
            // waiting for input. (`/proc/<pid>/exe` is unreadable for a set-uid process, `Name:`
            // is not; it is the file name cut to 15 bytes.)
            if state.starts_with('S') && comm.as_bytes() == &base.as_bytes()[..base.len().min(15)] {
                let uid = field("Uid:");
                println!(
                    "euid={} capeff={} capprm={} name={comm}",
                    uid.get(1).copied().unwrap_or("?"),
                    field("CapEff:").join(""),
                    field("CapPrm:").join(""),
                );
                let _ = child.kill();
                let _ = child.wait();
                return REFUSED;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "inconclusive {program} never blocked where it could be observed; last status: {last}"
    );
    INCONCLUSIVE
}

/// Every network interface this process can see, one name a line (from `if_nameindex`, which asks
/// the kernel through the process's own network namespace, not through a mounted /proc or /sys).
fn ifaces() -> i32 {
    // SAFETY: if_nameindex has no preconditions; it returns null on failure.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let mut names = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: the array ends with an entry whose index is 0 and name is null; we stop there.
        let entry = unsafe { &*list.add(i) };
        if entry.if_index == 0 || entry.if_name.is_null() {
            break;
        }
        // SAFETY: a non-null if_name is a NUL-terminated string owned by the list.
        names.push(
            unsafe { std::ffi::CStr::from_ptr(entry.if_name) }
                .to_string_lossy()
                .into_owned(),
        );
        i += 1;
    }
    // SAFETY: freeing the list if_nameindex returned, once, after the last use of its entries.
    unsafe { libc::if_freenameindex(list) };
    names.sort();
    for n in names {
        println!("{n}");
    }
    REFUSED
}

/// Every process this process can see in `/proc`, as `pid cmdline`.
fn pids() -> i32 {
    let dir = match std::fs::read_dir("/proc") {
        Ok(d) => d,
        Err(e) => return errno_result::<(), _>(Err(e)),
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        println!("{pid} {}", cmdline.join(" "));
    }
    REFUSED
}

/// Reads from a descriptor number this process never opened: only an inherited one can answer.
fn read_fd(fd: &str) -> i32 {
    let Ok(fd) = fd.parse::<i32>() else {
        return USAGE;
    };
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is a valid, writable buffer of the length passed; a bad fd only yields EBADF.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let n = usize::try_from(n).unwrap_or(0);
    succeeded(&String::from_utf8_lossy(&buf[..n]).replace('\n', "\\n"))
}

/// Every open descriptor, as `fd -> target`.
fn fds() -> i32 {
    let dir = match std::fs::read_dir("/proc/self/fd") {
        Ok(d) => d,
        Err(e) => return errno_result::<(), _>(Err(e)),
    };
    for entry in dir.flatten() {
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        println!(
            "{} -> {}",
            entry.file_name().to_string_lossy(),
            target.display()
        );
    }
    REFUSED
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
    // SAFETY: every caller in this file passes plain integers, null, or pointers to locals that are
    // alive for the call and as large as the kernel reads (it validates them and answers EFAULT
    // otherwise). The argument values are chosen so that even an allowed call changes no host state.
    unsafe { libc::syscall(nr, a(0), a(1), a(2), a(3), a(4), a(5)) }
}

/// The raw system calls of the seccomp kill list, each with harmless arguments.
fn syscall(name: &str) -> i32 {
    let ret: libc::c_long = match name {
        "ptrace" => sys(
            libc::SYS_ptrace,
            &[int(libc::PTRACE_TRACEME), int(0), int(0), int(0)],
        ),
        "process_vm_readv" | "process_vm_writev" => {
            let mut buf = [0u8; 8];
            let mut other = [7u8; 8];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: other.as_mut_ptr().cast(),
                iov_len: other.len(),
            };
            let nr = if name == "process_vm_readv" {
                libc::SYS_process_vm_readv
            } else {
                libc::SYS_process_vm_writev
            };
            sys(
                nr,
                &[
                    int(std::process::id()),
                    ptr(&local as *const _),
                    int(1),
                    ptr(&remote as *const _),
                    int(1),
                    int(0),
                ],
            )
        }
        "bpf" => {
            let attr = [0u8; 128];
            // BPF_MAP_CREATE with a zeroed attribute: EINVAL when allowed.
            sys(
                libc::SYS_bpf,
                &[int(0), ptr(attr.as_ptr()), int(attr.len())],
            )
        }
        "perf_event_open" => {
            let mut attr = [0u8; 128];
            attr[4] = 128; // size field (u32 at offset 4), little or big endian both non-zero.
            sys(
                libc::SYS_perf_event_open,
                &[ptr(attr.as_ptr()), int(0), int(-1), int(-1), int(0)],
            )
        }
        "userfaultfd" => sys(libc::SYS_userfaultfd, &[int(libc::O_CLOEXEC)]),
        "io_uring_setup" => {
            let params = [0u8; 120];
            sys(libc::SYS_io_uring_setup, &[int(1), ptr(params.as_ptr())])
        }
        "io_uring_enter" => sys(
            libc::SYS_io_uring_enter,
            &[int(-1), int(0), int(0), int(0), int(0), int(0)],
        ),
        "io_uring_register" => sys(
            libc::SYS_io_uring_register,
            &[int(-1), int(0), int(0), int(0)],
        ),
        // KEYCTL_GET_KEYRING_ID of the session keyring, without creating it.
        "keyctl" => sys(libc::SYS_keyctl, &[int(0), int(-3), int(0)]),
        "add_key" => {
            let (t, d, p) = (cstr("user"), cstr("chock-hostile"), b"x");
            sys(
                libc::SYS_add_key,
                &[
                    ptr(t.as_ptr()),
                    ptr(d.as_ptr()),
                    ptr(p.as_ptr()),
                    int(1),
                    int(-2),
                ],
            )
        }
        "request_key" => {
            let (t, d) = (cstr("user"), cstr("chock-hostile-absent"));
            sys(
                libc::SYS_request_key,
                &[ptr(t.as_ptr()), ptr(d.as_ptr()), int(0), int(0)],
            )
        }
        // A kexec with an impossible architecture in the flags: EINVAL even with CAP_SYS_BOOT.
        "kexec_load" => sys(
            libc::SYS_kexec_load,
            &[int(0), int(0), int(0), int(0xffff_0000_u64)],
        ),
        "kexec_file_load" => sys(
            libc::SYS_kexec_file_load,
            &[int(-1), int(-1), int(0), int(0), int(0)],
        ),
        "init_module" => {
            let p = cstr("");
            sys(libc::SYS_init_module, &[int(0), int(0), ptr(p.as_ptr())])
        }
        "finit_module" => {
            let p = cstr("");
            sys(libc::SYS_finit_module, &[int(-1), ptr(p.as_ptr()), int(0)])
        }
        "delete_module" => {
            let n = cstr("chock_hostile_absent");
            sys(
                libc::SYS_delete_module,
                &[ptr(n.as_ptr()), int(libc::O_NONBLOCK)],
            )
        }
        "mount" => {
            let dir = format!("/tmp/chock-hostile-mnt-{}", std::process::id());
            let _ = std::fs::create_dir_all(&dir);
            let (src, target, fstype) = (cstr("none"), cstr(&dir), cstr("tmpfs"));
            let r = sys(
                libc::SYS_mount,
                &[
                    ptr(src.as_ptr()),
                    ptr(target.as_ptr()),
                    ptr(fstype.as_ptr()),
                    int(0),
                    int(0),
                ],
            );
            if r == 0 {
                // Undo it at once: harmless even where the mount namespace is missing.
                sys(
                    libc::SYS_umount2,
                    &[ptr(target.as_ptr()), int(libc::MNT_DETACH)],
                );
            }
            r
        }
        "umount2" => {
            let t = cstr("/chock-hostile-absent");
            sys(libc::SYS_umount2, &[ptr(t.as_ptr()), int(0)])
        }
        "pivot_root" => {
            let t = cstr("/chock-hostile-absent");
            sys(libc::SYS_pivot_root, &[ptr(t.as_ptr()), ptr(t.as_ptr())])
        }
        "open_tree" => {
            let t = cstr("/tmp");
            // OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC: a detached copy of /tmp, then dropped.
            sys(
                libc::SYS_open_tree,
                &[
                    int(libc::AT_FDCWD),
                    ptr(t.as_ptr()),
                    int(1 | libc::O_CLOEXEC),
                ],
            )
        }
        "move_mount" => {
            let e = cstr("");
            sys(
                libc::SYS_move_mount,
                &[int(-1), ptr(e.as_ptr()), int(-1), ptr(e.as_ptr()), int(0)],
            )
        }
        "fsopen" => {
            let t = cstr("tmpfs");
            sys(libc::SYS_fsopen, &[ptr(t.as_ptr()), int(1)])
        }
        "fsconfig" => sys(
            libc::SYS_fsconfig,
            &[int(-1), int(0), int(0), int(0), int(0)],
        ),
        "fsmount" => sys(libc::SYS_fsmount, &[int(-1), int(0), int(0)]),
        "fspick" => {
            let t = cstr("/tmp");
            sys(
                libc::SYS_fspick,
                &[int(libc::AT_FDCWD), ptr(t.as_ptr()), int(1)],
            )
        }
        "mount_setattr" => {
            let e = cstr("");
            sys(
                libc::SYS_mount_setattr,
                &[int(-1), ptr(e.as_ptr()), int(0), int(0), int(0)],
            )
        }
        // Joining our own network namespace: succeeds where setns is allowed, changes nothing.
        "setns" => match open_fd("/proc/self/ns/net") {
            Some(fd) => sys(libc::SYS_setns, &[int(fd.as_raw_fd()), int(0)]),
            None => {
                println!("inconclusive cannot open /proc/self/ns/net");
                return INCONCLUSIVE;
            }
        },
        "unshare-user" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWUSER)]),
        "unshare-mount" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWNS)]),
        "unshare-net" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWNET)]),
        "unshare-pid" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWPID)]),
        // A plain unshare without namespace flags must stay allowed (programs use CLONE_FILES).
        "unshare-files" => sys(libc::SYS_unshare, &[int(libc::CLONE_FILES)]),
        "clone-newuser" => clone_with(libc::CLONE_NEWUSER),
        "clone-newns" => clone_with(libc::CLONE_NEWNS),
        "clone-newnet" => clone_with(libc::CLONE_NEWNET),
        "clone3-newuser" => clone3_with(libc::CLONE_NEWUSER),
        "ioctl-tiocsti" => {
            let b = b'x';
            sys(
                libc::SYS_ioctl,
                &[int(0), int(libc::TIOCSTI), ptr(&b as *const u8)],
            )
        }
        "ioctl-tioclinux" => {
            // TIOCL_GETFGCONSOLE (12): a read-only subcode.
            let sub = [12u8; 1];
            sys(
                libc::SYS_ioctl,
                &[int(0), int(libc::TIOCLINUX), ptr(sub.as_ptr())],
            )
        }
        "open_by_handle_at" => {
            // struct file_handle { handle_bytes: 8, handle_type: 1, f_handle: [0; 8] }
            let mut handle = [0u8; 16];
            handle[0] = 8;
            handle[4] = 1;
            sys(
                libc::SYS_open_by_handle_at,
                &[
                    int(libc::AT_FDCWD),
                    ptr(handle.as_mut_ptr()),
                    int(libc::O_RDONLY),
                ],
            )
        }
        // A wrong magic number: EINVAL even with CAP_SYS_BOOT.
        "reboot" => sys(libc::SYS_reboot, &[int(0), int(0), int(0), int(0)]),
        "swapon" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_swapon, &[ptr(p.as_ptr()), int(0)])
        }
        "swapoff" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_swapoff, &[ptr(p.as_ptr())])
        }
        "acct" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_acct, &[ptr(p.as_ptr())])
        }
        "quotactl_fd" => sys(
            libc::SYS_quotactl_fd,
            &[int(-1), int(0x0080_0001u32), int(0), int(0)],
        ),
        "open_tree_attr" => {
            let t = cstr("/tmp");
            // open_tree_attr (Linux 6.15, the same number on every architecture), no attributes.
            sys(
                467,
                &[
                    int(libc::AT_FDCWD),
                    ptr(t.as_ptr()),
                    int(1 | libc::O_CLOEXEC),
                    int(0),
                    int(0),
                ],
            )
        }
        // Q_SYNC (0x800001) of every filesystem: needs no privilege where quotactl is allowed.
        "quotactl" => sys(
            libc::SYS_quotactl,
            &[int(0x0080_0001), int(0), int(0), int(0)],
        ),
        // getpid through the x32 entry point (number | 0x4000_0000): numbers the table does not
        // list, reaching the same kernel functions.
        "x32-getpid" if cfg!(target_arch = "x86_64") => sys(libc::SYS_getpid | 0x4000_0000, &[]),
        // getpid through the 32-bit entry point (int 0x80, i386 numbering): another table.
        "int80-getpid" => int80_getpid(),
        // A call that must stay allowed: the control for the tests' parsing.
        "getpid" => sys(libc::SYS_getpid, &[]),
        _ => {
            eprintln!("chock-hostile: unknown syscall act `{name}`");
            return USAGE;
        }
    };
    raw_result(ret, name)
}

/// One set-id act (see the `setid` subcommand). Succeeds only if the file really ends up with a
/// set-id bit, so "refused" or a silently dropped bit are both told apart from an escape.
fn set_id(call: &str, path: &str) -> i32 {
    use std::os::unix::fs::PermissionsExt;
    let c = cstr(path);
    let p = ptr(c.as_ptr());
    let (call, mode) = match call.strip_suffix("-gid") {
        Some(base) => (base, 0o2755u32),
        None => (call, 0o4755u32),
    };
    let creat_flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
    let make_plain = || {
        let fd = sys(
            libc::SYS_openat,
            &[int(libc::AT_FDCWD), p, int(creat_flags), int(0o644u32)],
        );
        if fd < 0 {
            println!(
                "inconclusive creating {path}: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(INCONCLUSIVE);
        }
        fd
    };
    let ret = match call {
        #[cfg(target_arch = "x86_64")]
        "chmod" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(libc::SYS_chmod, &[p, int(mode)])
        }
        "fchmod" => {
            let fd = make_plain();
            let r = sys(libc::SYS_fchmod, &[fd, int(mode)]);
            let e = std::io::Error::last_os_error();
            sys(libc::SYS_close, &[fd]);
            if r == -1 {
                return refused(e.raw_os_error().unwrap_or(0));
            }
            r
        }
        "fchmodat" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(libc::SYS_fchmodat, &[int(libc::AT_FDCWD), p, int(mode)])
        }
        "fchmodat2" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(452, &[int(libc::AT_FDCWD), p, int(mode), int(0)])
        }
        #[cfg(target_arch = "x86_64")]
        "open" => sys(libc::SYS_open, &[p, int(creat_flags), int(mode)]),
        "openat" => sys(
            libc::SYS_openat,
            &[int(libc::AT_FDCWD), p, int(creat_flags), int(mode)],
        ),
        #[cfg(target_arch = "x86_64")]
        "creat" => sys(libc::SYS_creat, &[p, int(mode)]),
        #[cfg(target_arch = "x86_64")]
        "mknod" => sys(libc::SYS_mknod, &[p, int(libc::S_IFREG | mode), int(0)]),
        "mknodat" => sys(
            libc::SYS_mknodat,
            &[int(libc::AT_FDCWD), p, int(libc::S_IFREG | mode), int(0)],
        ),
        "openat2" => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let how = [
                u64::try_from(creat_flags).unwrap_or(0),
                u64::from(mode),
                0u64,
            ];
            sys(
                libc::SYS_openat2,
                &[
                    int(libc::AT_FDCWD),
                    p,
                    ptr(how.as_ptr()),
                    int(std::mem::size_of_val(&how)),
                ],
            )
        }
        _ => {
            eprintln!("chock-hostile: unknown setid act `{call}`");
            return USAGE;
        }
    };
    if ret == -1 {
        return raw_result(ret, call);
    }
    let bits = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o6000);
    if bits == 0 {
        println!("refused dropped (the file has no set-id bit)");
        return REFUSED;
    }
    succeeded(&format!("{call}: {path} has mode bits {bits:o}"))
}

/// getpid (20 in the i386 table) through `int 0x80`: a filter that checks numbers but not the
/// audit architecture would let every i386 call through under numbers it never lists.
#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> libc::c_long {
    let mut ret: i64 = 20;
    // SAFETY: int 0x80 with eax = 20 (getpid) takes no pointers and clobbers only what is listed.
    unsafe {
        std::arch::asm!("int 0x80", inout("rax") ret, out("r8") _, out("r9") _, out("r10") _, out("r11") _);
    }
    // The i386 entry returns a 32-bit value in eax: -errno or the pid. Keeping the low 32 bits is
    // the point of the cast.
    #[allow(clippy::cast_possible_truncation)]
    let ret = i64::from(ret as i32);
    if ret < 0 {
        // SAFETY: errno is thread-local; setting it for raw_result to read.
        unsafe { *libc::__errno_location() = i32::try_from(-ret).unwrap_or(libc::EINVAL) };
        -1
    } else {
        ret
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_getpid() -> libc::c_long {
    println!("inconclusive int 0x80 exists on x86_64 only");
    std::process::exit(INCONCLUSIVE)
}

/// clone(2) with namespace flags, fork-like (no new stack); the child exits at once.
fn clone_with(flags: libc::c_int) -> libc::c_long {
    let flags = libc::c_long::from(flags) | libc::c_long::from(libc::SIGCHLD);
    // SAFETY: a clone without CLONE_VM and with a null stack behaves like fork: the child runs on a
    // copy of our memory and leaves with _exit at once, touching nothing.
    let r = sys(
        libc::SYS_clone,
        &[int(flags), int(0), int(0), int(0), int(0)],
    );
    if r == 0 {
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        // SAFETY: reaping our own child; a null status pointer is allowed.
        unsafe { libc::waitpid(i32::try_from(r).unwrap_or(-1), std::ptr::null_mut(), 0) };
    }
    r
}

/// clone3(2) with namespace flags (seccomp cannot read its arguments, so filters refuse it whole).
fn clone3_with(flags: libc::c_int) -> libc::c_long {
    // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls.
    let mut args = [0u64; 8];
    args[0] = u64::try_from(flags).unwrap_or(0);
    args[4] = u64::try_from(libc::SIGCHLD).unwrap_or(17);
    // SAFETY: as for `clone_with`: no new stack, no shared memory; the struct is 64 bytes as passed.
    let r = sys(
        libc::SYS_clone3,
        &[ptr(args.as_ptr()), int(std::mem::size_of_val(&args))],
    );
    if r == 0 {
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(i32::try_from(r).unwrap_or(-1), std::ptr::null_mut(), 0) };
    }
    r
}
