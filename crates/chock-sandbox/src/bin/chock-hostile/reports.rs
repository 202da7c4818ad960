//! The report subcommands: what a confined process can see of itself and around it (its
//! credentials, a set-user-id program's, network interfaces, processes, descriptors), printed for
//! the tests to compare instead of a protocol line.

use std::time::{Duration, Instant};

use super::{INCONCLUSIVE, REFUSED, USAGE, errno_result, refused, succeeded};

/// The credential and confinement lines of `/proc/self/status`, as read after our own exec.
pub(super) fn status() -> i32 {
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
pub(super) fn setuid_probe(program: &str, rest: &[&str]) -> i32 {
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
pub(super) fn ifaces() -> i32 {
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
pub(super) fn pids() -> i32 {
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
pub(super) fn read_fd(fd: &str) -> i32 {
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
pub(super) fn fds() -> i32 {
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
