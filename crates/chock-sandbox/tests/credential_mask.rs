//! A call shown a directory that holds credentials (`~/.cargo`, `~/.config`, a write cache) sees
//! everything in it but the credentials (`credential_mask.rs`): cargo's token file, the GitHub
//! CLI's directory and Docker's login read as empty, in a call built on its own and in the calls
//! of a session sandbox (whose read overlays each call makes again).

mod escape_support;

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, SocketIndex, StdioMode};
use escape_support::{Backing, Fixture, SECRET};

/// A fake home inside the fixture: tools and their credentials side by side.
fn home(fx: &Fixture) -> PathBuf {
    let home = fx.base.join("home");
    let write = |rel: &str, text: &str| {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(".cargo/bin/tool", "the tool\n");
    write(
        ".cargo/credentials.toml",
        &format!("token = \"{SECRET}\"\n"),
    );
    write(".config/gh/hosts.yml", &format!("oauth_token: {SECRET}\n"));
    write(".config/other/settings", "plain settings\n");
    write(
        ".docker/config.json",
        &format!("{{\"auth\": \"{SECRET}\"}}\n"),
    );
    write(".docker/cache/entry", "cached\n");
    home
}

fn plan(fx: &Fixture, home: &std::path::Path) -> Plan {
    let script = format!(
        "cat {h}/.cargo/bin/tool {h}/.config/other/settings {h}/.docker/cache/entry; \
         cat {h}/.cargo/credentials.toml {h}/.docker/config.json; \
         ls -a {h}/.config/gh; cat {h}/.config/gh/hosts.yml; \
         echo x > {h}/.docker/config.json; echo x > {h}/.config/gh/new; \
         echo done",
        h = home.display()
    );
    let mut plan = fx.plan(vec!["/bin/sh".into(), "-c".into(), script]);
    plan.home = home.to_path_buf();
    plan.extra_read = vec![home.join(".cargo"), home.join(".config")];
    plan.extra_write = vec![home.join(".docker")];
    plan.timeout = Some(Duration::from_secs(30));
    plan
}

fn run(plan: &Plan, index: Option<&SocketIndex>) -> (ExitStatus, String) {
    let mut child = match index {
        Some(index) => chock_sandbox::spawn_in_session(plan, StdioMode::Piped, None, index),
        None => chock_sandbox::spawn(plan, StdioMode::Piped),
    }
    .unwrap();
    let mut err = child.take_stderr().unwrap();
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = String::new();
    child
        .take_stdout()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap().status;
    (status, format!("{out}{}", errs.join().unwrap()))
}

fn assert_masked(out: &str, home: &std::path::Path) {
    assert!(!out.contains(SECRET), "a credential was read:\n{out}");
    for shown in ["the tool", "plain settings", "cached", "done"] {
        assert!(out.contains(shown), "`{shown}` missing:\n{out}");
    }
    // Nothing written through a mask reached the host.
    let docker = std::fs::read_to_string(home.join(".docker/config.json")).unwrap();
    assert!(docker.contains(SECRET), "{docker}");
    assert!(!home.join(".config/gh/new").exists());
}

#[test]
fn credentials_inside_a_shown_directory_are_masked() {
    let fx = Fixture::new(Backing::Overlay);
    let home = home(&fx);
    let (status, out) = run(&plan(&fx, &home), None);
    assert_eq!(status, ExitStatus::Exited(0), "{out}");
    assert_masked(&out, &home);
}

#[test]
fn credentials_stay_masked_in_every_call_of_a_session_sandbox() {
    let fx = Fixture::new(Backing::BindCopy);
    let home = home(&fx);
    let plan = plan(&fx, &home);
    let index = SocketIndex::new();
    for _ in 0..3 {
        let (status, out) = run(&plan, Some(&index));
        assert_eq!(status, ExitStatus::Exited(0), "{out}");
        assert_masked(&out, &home);
    }
}

#[test]
fn a_credential_or_a_path_inside_one_declared_fails_the_call() {
    let fx = Fixture::new(Backing::Overlay);
    let home = home(&fx);
    let mut plan = plan(&fx, &home);
    plan.extra_read = vec![home.join(".config/gh")];
    plan.extra_write = Vec::new();
    for declared in [home.join(".config/gh"), home.join(".config/gh/hosts.yml")] {
        plan.extra_read = vec![declared.clone()];
        match chock_sandbox::spawn(&plan, StdioMode::Null) {
            Err(chock_sandbox::SandboxError::Plan(msg)) => {
                assert!(msg.contains("lies in credentials"), "{msg}")
            }
            Err(other) => panic!("expected a plan error, got {other}"),
            Ok(_) => panic!("{} was bound", declared.display()),
        }
    }
}
