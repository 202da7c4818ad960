//! The workspace as the real sandbox driver mounts it: `chock_sandbox::spawn` builds every layer
//! (user, mount, pid, net namespaces, Landlock, seccomp) and mounts `Workspace::mount()` at the
//! project's own path; what the confined command wrote is then read back from the host.

mod common;

use std::io::Read;
use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, StdioMode, spawn};
use chock_workspace::{Selection, Status};
use common::Env;

fn confined(ws: &chock_workspace::Workspace, project: &std::path::Path, script: &str) {
    let plan = Plan::builder(
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        ws.mount(),
        project.to_path_buf(),
    )
    .timeout(Some(Duration::from_secs(60)))
    .build();
    let mut child = spawn(&plan, StdioMode::Piped).expect("every sandbox layer applies");
    let mut err = child.take_stderr().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    drop(child.take_stdout());
    let outcome = child.wait().unwrap();
    let stderr = reader.join().unwrap();
    assert_eq!(outcome.status, ExitStatus::Exited(0), "{stderr}");
}

#[test]
fn a_confined_call_writes_the_overlay_and_the_host_reads_it_back() {
    let env = Env::git(&[("a.txt", "one\ntwo\n"), ("gone.txt", "g\n"), ("d/x", "x\n")]);
    let ws = env.workspace("sb1");
    confined(
        &ws,
        &env.project,
        "echo three >> a.txt && rm gone.txt && rm -r d && mkdir d && echo y > d/y && ln -s a.txt link",
    );
    assert_eq!(
        env.read("a.txt"),
        "one\ntwo\n",
        "the project itself is untouched"
    );
    let diff = ws.diff().unwrap();
    let got: Vec<(String, Status)> = diff
        .files
        .iter()
        .map(|f| (f.path.clone(), f.status()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a.txt".into(), Status::Modified),
            ("d/x".into(), Status::Deleted),
            ("d/y".into(), Status::Added),
            ("gone.txt".into(), Status::Deleted),
            ("link".into(), Status::Added),
        ]
    );
    ws.checkpoint("call").unwrap().expect("a checkpoint commit");
    ws.plan_apply(&Selection::default())
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(env.read("a.txt"), "one\ntwo\nthree\n");
    assert_eq!(env.read("d/y"), "y\n");
    assert!(!env.exists("gone.txt") && !env.exists("d/x"));
}

#[test]
fn a_confined_command_can_create_the_missing_policy_file_and_no_apply_takes_it_unnamed() {
    // No chock.toml in the project: nothing is bound at that path, so the command can make one.
    let env = Env::git(&[("a.txt", "one\n")]);
    let ws = env.workspace("sbpol");
    confined(
        &ws,
        &env.project,
        "printf '[[rule]]\\naction = \"net.connect.*\"\\ndecision = \"allow\"\\n' > chock.toml",
    );
    let diff = ws.diff().unwrap();
    let file = diff
        .file("chock.toml")
        .expect("the command wrote a policy file");
    assert_eq!(
        file.sensitive(),
        Some(chock_workspace::Sensitive::PolicyFile)
    );
    let err = ws.plan_apply(&Selection::default()).unwrap_err();
    assert!(
        matches!(err, chock_workspace::WorkspaceError::ConfiguresChock { ref paths, .. } if paths == &["chock.toml"]),
        "{err}"
    );
    assert!(!env.exists("chock.toml"), "nothing reached the project");
}
