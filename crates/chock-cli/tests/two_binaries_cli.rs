//! The two binaries (lib.rs): `chock` runs `exec` itself and hands every other command to
//! `chock-full` beside it. Every other CLI test runs through the hand-over (they all start
//! `chock`); these say what only the split can get wrong.

mod run_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use run_support::{CHOCK, World, text};

/// `chock` copied alone into `dir`: no `chock-full` beside it.
fn chock_alone(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join("chock");
    std::fs::copy(CHOCK, &copy).unwrap();
    copy
}

/// Runs `program` in the world, retrying while the kernel says ETXTBSY: a test thread that forks
/// while the copy's file is still open for writing holds it open until its child execs.
fn run(w: &World, program: &Path, args: &[&str]) -> std::process::Output {
    for _ in 0..100 {
        match w.program(program).args(args).stdin(Stdio::null()).output() {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error()) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
    panic!("{} stayed busy", program.display());
}

#[test]
fn chock_exec_runs_in_chock_alone_and_every_other_command_needs_chock_full() {
    let w = World::new();
    w.write("hello.txt", "hello\n");
    let alone = chock_alone(&w.base.join("alone"));

    // `exec` is the front binary's own: confined, logged, in the throwaway copy, with nothing else.
    let out = run(&w, &alone, &["exec", "--", "cat", "hello.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\n");

    // Everything else (even --version) is chock-full's: missing, it fails and says where it looked.
    let mut said = Vec::new();
    for args in [
        &["sessions", "list"][..],
        &["--version"],
        &["run", "--provider", "demo", "x"],
    ] {
        let out = run(&w, &alone, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        said.push(text(&out.stderr));
    }
    w.settings()
        .bind(|| insta::assert_snapshot!("without_chock_full", said[0]));
    assert!(said.iter().all(|s| *s == said[0]), "{said:#?}");
    // Nothing was started for the refused commands: exec's session is the only one.
    let sessions = std::fs::read_dir(w.state.join("chock/sessions"))
        .unwrap()
        .count();
    assert_eq!(sessions, 1);
}

#[test]
fn a_link_to_chock_finds_chock_full_by_its_real_path_and_keeps_the_name_it_was_run_by() {
    let w = World::new();
    let bin = w.base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("mychock");
    std::os::unix::fs::symlink(CHOCK, &link).unwrap();

    let out = run(&w, &link, &["sessions", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Usage: mychock sessions"),
        "{}",
        text(&out.stdout)
    );
    // A bad first word is refused by chock-full, under the name it was run by, with bad input's status.
    let out = run(&w, &link, &["sessions", "lsit"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("Usage: mychock sessions"),
        "{}",
        text(&out.stderr)
    );
}

/// `chock` beside a `chock-full` that is not of its build: refused before it runs, exit 1, the
/// message naming the file and how to reinstall. A confined call that could write the install
/// directory (the policy refuses such a write path now) would otherwise have the person run its
/// program, unconfined, at their next `chock sessions list`.
#[test]
fn a_chock_full_of_another_build_is_refused_before_it_runs() {
    let w = World::new();
    let dir = w.base.join("install");
    let alone = chock_alone(&dir);
    let full = dir.join("chock-full");
    let marker = w.base.join("ran");
    let install = |bytes: &[u8]| {
        let _ = std::fs::remove_file(&full);
        std::fs::write(&full, bytes).unwrap();
        std::fs::set_permissions(&full, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    let real = std::fs::read(env!("CARGO_BIN_EXE_chock-full")).unwrap();
    let at = real
        .windows(5)
        .position(|w| w == b"full:")
        .expect("chock-full carries its build id");
    let mut other_build = real.clone();
    other_build[at + 5] = if other_build[at + 5] == b'0' {
        b'1'
    } else {
        b'0'
    };
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "it carries no Chock build id",
            format!("#!/bin/sh\ntouch {}\n", marker.display()).into_bytes(),
        ),
        (
            "it is not chock-full (another binary of Chock's)",
            std::fs::read(CHOCK).unwrap(),
        ),
        ("it is from another build of Chock", other_build),
    ];
    for (why, bytes) in cases {
        install(&bytes);
        let out = run(&w, &alone, &["sessions", "list"]);
        assert_eq!(out.status.code(), Some(1), "{why}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        let expected = format!(
            "chock: refusing to run {}: {why}; `chock` hands every command but `exec` to the \
             chock-full built with it. Reinstall both together: `cargo install --path \
             crates/chock-cli`\n",
            full.display()
        );
        assert_eq!(text(&out.stderr), expected);
    }
    assert!(!marker.exists(), "the foreign chock-full ran");
    // The real one, copied beside it, runs.
    install(&real);
    let out = run(&w, &alone, &["sessions", "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
