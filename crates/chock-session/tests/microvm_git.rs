//! The git shim in a microVM guest (docs/microvm.md, "The host channel"; docs/git.md): a call's
//! descriptor 3 in the guest is relayed over the guest's port to the session's own channel
//! handler, which reads the repository through the host's view of the shared workspace. So a
//! `git commit` in a guest is the act `git.commit`, decided through the pipeline; a deny row
//! refuses it; and a request about a directory outside the workspace is refused, whatever the
//! guest says.

#[path = "support/guest.rs"]
mod guest;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A project that is a git repository of one commit, with `policy` as its chock.toml (which
/// asks for a guest), opened as a session with the shim.
fn session(dir: &Path, policy: &str) -> (Session, PathBuf) {
    let project = dir.join("project");
    std::fs::create_dir_all(project.join("sub")).expect("project");
    let policy = format!("[sandbox]\nisolation = \"microvm\"\n\n{policy}");
    std::fs::write(project.join("chock.toml"), policy).expect("chock.toml");
    std::fs::write(project.join("sub/keep"), "").expect("keep");
    std::fs::write(project.join("ask.py"), REPLACED_SHIM).expect("ask.py");
    host_git(&project, &["init", "-q", "-b", "main"]);
    host_git(&project, &["config", "user.name", "t"]);
    host_git(&project, &["config", "user.email", "t@example.invalid"]);
    host_git(&project, &["config", "alias.st", "status"]);
    host_git(&project, &["add", "-A"]);
    host_git(&project, &["commit", "-qm", "one"]);
    let opts = SessionOptions {
        sessions_root: Some(dir.join("sessions")),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        ..SessionOptions::default()
    };
    (Session::open(&project, opts).expect("open"), project)
}

/// Runs `script` with `sh -c` as call `id`: its stdout and stderr (it must exit 0).
fn run(s: &Session, id: &str, script: &str) -> (String, String) {
    let opts = CallOptions {
        call_id: Some(id.into()),
        ..CallOptions::default()
    };
    let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
    let r = support::confined_call(s, &argv, &opts, &NoApprover).expect("call");
    let CallOutcome::Ran {
        outcome,
        stdout,
        stderr,
        ..
    } = r.outcome
    else {
        panic!("the call did not run: {:?}", r.outcome);
    };
    let (out, err) = (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    );
    assert_eq!(
        outcome.status,
        chock_sandbox::ExitStatus::Exited(0),
        "{out}\n{err}"
    );
    (out, err)
}

/// The `git.*` decisions logged under `call_id`, in order: (action, allowed).
fn git_decisions(s: &Session, call_id: &str) -> Vec<(String, bool)> {
    chock_log::read_events(s.log().dir())
        .expect("log")
        .into_iter()
        .filter(|e| e.call_id.as_deref() == Some(call_id) && e.kind.to_string() == "decision")
        .filter_map(|e| {
            let action = e.data["action"].as_str()?.to_string();
            action
                .starts_with("git.")
                .then(|| (action, e.data["allowed"].as_bool().unwrap_or(false)))
        })
        .collect()
}

/// A process that speaks the channel itself (`support/replaced_shim.py`).
const REPLACED_SHIM: &str = include_str!("support/replaced_shim.py");

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn git_in_a_guest_is_decided_on_the_host_and_held_to_the_workspace() {
    if !guest::ready(&["/usr/bin/python3"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let base = dir.path().canonicalize().expect("canonical");

    // Allowed: the commit is `git.commit`, decided on the host, and lands in the workspace (in a
    // repository the call makes).
    let (s, project) = session(&base.join("allowed"), "");
    let release = s.guest().expect("a guest").kernel_release().to_string();
    let (out, err) = run(
        &s,
        "c1",
        "uname -r; mkdir r && cd r && git init -q -b main && echo two > two.txt && \
         git add two.txt && git -c user.name=t -c user.email=t@example.invalid commit -qm two; \
         echo \"commit=$?\"; git rev-list --count HEAD",
    );
    assert_eq!(out, format!("{release}\ncommit=0\n1\n"), "{err}");
    let decided = git_decisions(&s, "c1");
    assert_eq!(
        decided.first(),
        Some(&("git.init".to_string(), true)),
        "{decided:?}"
    );
    assert!(
        decided.contains(&("git.add".to_string(), true))
            && decided.contains(&("git.commit".to_string(), true)),
        "{decided:?}"
    );
    assert_eq!(
        decided.last(),
        Some(&("git.inspect".to_string(), true)),
        "{decided:?}"
    );
    assert!(!project.join("r").exists());

    // An alias is its act; but with a directory on `PATH` the host cannot see (the guest's
    // `/tmp`), where a `git-st` git would run first may lie, it is `git.unknown` (asked: nobody
    // is there, so refused).
    let (out, err) = run(
        &s,
        "a1",
        "export PATH=/usr/local/bin:/usr/bin:/bin GIT_OPTIONAL_LOCKS=0; \
         git st >/dev/null; echo \"st=$?\"; \
         mkdir -p /tmp/bin; PATH=/tmp/bin:$PATH git st >/dev/null; echo \"hidden=$?\"",
    );
    assert_eq!(out, "st=0\nhidden=126\n", "{err}");
    // (git runs an alias's command as a git of its own: one `git.status` more.)
    let decided = git_decisions(&s, "a1");
    let (last, before) = decided.split_last().expect("decisions");
    assert_eq!(last, &("git.unknown".to_string(), false), "{decided:?}");
    assert!(
        !before.is_empty()
            && before
                .iter()
                .all(|d| d == &("git.status".to_string(), true)),
        "{decided:?}"
    );

    // A replaced shim (the channel spoken directly) is held to the workspace by the host.
    let p = project.display();
    let (out, err) = run(
        &s,
        "r1",
        &format!(
            "cd sub && python3 ../ask.py '[\"status\"]' {p}/sub; \
             cd /tmp && python3 {p}/ask.py '[\"status\"]' /tmp; \
             cd {p} && python3 ask.py '[\"-C\", \"/tmp\", \"status\"]' {p}; \
             cd /tmp && python3 {p}/ask.py '[\"status\"]' {p}/sub"
        ),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}\n{err}");
    // Its own directory in the workspace: allowed, and the real git handed over (one
    // descriptor, the guest's sealed copy of the git the host named).
    assert!(
        lines[0].contains(r#""action":"git.status","allowed":true"#) && lines[0].ends_with(" 1"),
        "{out}"
    );
    // Its own directory, truthfully claimed, outside the workspace: refused on the host.
    assert!(
        lines[1].contains(r#""kind":"refused""#)
            && lines[1].contains("`/tmp` is outside the workspace")
            && lines[1].ends_with(" 0"),
        "{out}"
    );
    // A repository moved outside it with `-C`: refused on the host.
    assert!(
        lines[2].contains(r#""kind":"refused""#)
            && lines[2].contains("`/tmp` is outside the workspace")
            && lines[2].ends_with(" 0"),
        "{out}"
    );
    // A directory of the workspace that is not its own: refused by the guest's init before the
    // host is asked (the host cannot see the asking process).
    assert!(
        lines[3].contains(r#""kind":"refused""#)
            && lines[3].contains("not the asking process's")
            && lines[3].ends_with(" 0"),
        "{out}"
    );
    assert_eq!(git_decisions(&s, "r1"), [("git.status".to_string(), true)]);
    drop(s);

    // A deny row refuses the commit inside the guest, naming the act and the rule.
    let (s, _) = session(
        &base.join("denied"),
        "[[rule]]\naction = \"git.commit\"\ndecision = \"deny\"\n",
    );
    let (out, err) = run(
        &s,
        "d1",
        "git commit -q --allow-empty -m two; echo \"exit $?\"; git rev-list --count HEAD",
    );
    assert_eq!(out, "exit 126\n1\n", "{err}");
    assert!(
        err.contains("`git.commit` refused by") && err.contains("(rule `git.commit`)"),
        "{err}"
    );
    assert_eq!(
        git_decisions(&s, "d1"),
        [
            ("git.commit".to_string(), false),
            ("git.inspect".to_string(), true)
        ]
    );
}
