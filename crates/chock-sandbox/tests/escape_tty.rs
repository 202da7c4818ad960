//! Escape suite, the terminal: a call run with the user's terminal as stdin (`chock exec` in a
//! shell) must not type into it (TIOCSTI) nor keep it as its controlling terminal.
//!
//! The attack needs a terminal that is the *controlling* terminal of the process that spawns the
//! call, as a shell's is. The test makes one: a pseudo-terminal, and a copy of this test binary
//! started as a session leader on it, which runs the ignored test `inside_a_terminal` (the
//! spawning side). The outer test reads everything the terminal shows, including the echo of any
//! input that was injected.

mod escape_support;

use std::io::Read;
use std::process::Stdio;

use escape_support::{Backing, Fixture, token};

const CHILD_ENV: &str = "CHOCK_ESCAPE_TTY_CHILD";

/// Attack: TIOCSTI into the host terminal the call inherited, and keeping that terminal as the
/// controlling terminal. Layers: the seccomp filter (TIOCSTI refused by argument: EPERM) and the
/// new session (the terminal is no longer the controlling one: TIOCGSID answers ENOTTY).
#[test]
fn the_host_terminal_cannot_be_typed_into() {
    if escape_support::not_in_guest(
        "a call in a guest cannot share the host's terminal (the guest's confiner refuses \
         StdioMode::Inherit), so there is no host terminal in it to type into",
    ) {
        return;
    }
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let injected = token("typed");
    let slave = std::fs::File::from(pty.slave);
    let mut child = {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "inside_a_terminal",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &injected)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
        // SAFETY: setsid and ioctl are async-signal-safe and touch only the child's own state.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn()
            .expect("start the spawning side on the terminal")
    };
    drop(slave);
    let mut master = std::fs::File::from(pty.master);
    let mut shown = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until every slave descriptor is closed (EIO) — the spawning side has exited.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        shown.extend_from_slice(&buf[..n]);
    }
    let status = child.wait().unwrap();
    let shown = String::from_utf8_lossy(&shown).replace('\r', "");
    assert!(
        status.success(),
        "the spawning side failed ({status}):\n{shown}"
    );
    assert!(
        !shown.contains(&injected),
        "text was typed into the host terminal:\n{shown}"
    );
    let line = |call: &str| -> String {
        shown
            .lines()
            .skip_while(|l| !l.ends_with(&format!("CALL {call}")))
            .nth(1)
            .unwrap_or_else(|| panic!("no result for {call}:\n{shown}"))
            .to_string()
    };
    assert_eq!(
        line("tiocsti"),
        "refused EPERM",
        "TIOCSTI (seccomp by argument):\n{shown}"
    );
    assert_eq!(
        line("tty-session"),
        "refused ENOTTY",
        "controlling terminal (new session):\n{shown}"
    );
}

/// The spawning side of `the_host_terminal_cannot_be_typed_into`; only meaningful when that test
/// starts it on a terminal, hence ignored in a normal run.
#[test]
#[ignore = "started by the_host_terminal_cannot_be_typed_into on a pseudo-terminal"]
fn inside_a_terminal() {
    let Ok(injected) = std::env::var(CHILD_ENV) else {
        println!(
            "skipped: this is the spawning side of the_host_terminal_cannot_be_typed_into, which starts it"
        );
        return;
    };
    let fx = Fixture::new(Backing::Overlay);
    let text = format!("{injected}\n");
    for (call, args) in [
        ("tiocsti", vec!["tiocsti", "0", text.as_str()]),
        ("tty-session", vec!["tty-session", "0"]),
    ] {
        println!("CALL {call}");
        let mut child =
            chock_sandbox::spawn(&fx.hostile_plan(&args), chock_sandbox::StdioMode::Inherit)
                .expect("spawn");
        let outcome = child.wait().expect("wait");
        println!("STATUS {:?}", outcome.status);
    }
}
