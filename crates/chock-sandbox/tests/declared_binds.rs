//! A declared path (`[sandbox]` read or write, an MCP server's `read` or `cache`) is bound
//! through a descriptor opened without following any link: the host resolves the path when it
//! gets the call ready, and a directory on it swapped for a link after that fails the call
//! instead of binding the link's target. The swap here is made between the two halves of a call
//! ([`chock_sandbox::ready_in_session`], then [`chock_sandbox::ReadyCall::start`]), where a
//! process that could write beside the path would have to win a race.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_sandbox::{Plan, SandboxError, SocketIndex, StdioMode, WorkspaceMount};

struct Host {
    _dir: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    // Where the link will lead: a directory the call was never given.
    std::fs::create_dir_all(base.join("elsewhere/cache")).unwrap();
    std::fs::write(base.join("elsewhere/cache/secret"), "the host's secret\n").unwrap();
    // The declared directory, under a parent that will be swapped.
    std::fs::create_dir_all(base.join("tools/cache")).unwrap();
    std::fs::write(base.join("tools/cache/entry"), "cached\n").unwrap();
    Host {
        _dir: dir,
        base,
        project,
    }
}

fn plan(h: &Host, script: &str) -> Plan {
    Plan::builder(
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        WorkspaceMount::Bind {
            source: h.project.clone(),
        },
        h.project.clone(),
    )
    .timeout(Some(Duration::from_secs(30)))
    .build()
}

/// Swaps `base/tools` for a link to `base/elsewhere` (relative, so it leads there from the
/// sandbox's view of the host root too).
fn swap(h: &Host) {
    std::fs::rename(h.base.join("tools"), h.base.join("tools.old")).unwrap();
    std::os::unix::fs::symlink("elsewhere", h.base.join("tools")).unwrap();
}

/// Gets `plan` ready, swaps, starts it: its output, or the error.
fn ready_swap_start(h: &Host, plan: &Plan) -> Result<String, SandboxError> {
    let sockets = SocketIndex::new();
    let ready = chock_sandbox::ready_in_session(plan, None, &sockets)?;
    swap(h);
    let mut child = ready.start(StdioMode::Piped)?;
    let mut out = String::new();
    child
        .take_stdout()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child.wait()?;
    Ok(out)
}

fn refused_as_a_link(result: Result<String, SandboxError>, path: &Path) {
    match result {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("filesystem") || text.contains("symbolic link"),
                "{text}"
            );
        }
        Ok(out) => panic!(
            "the call ran over a link swapped in for {}: {out}",
            path.display()
        ),
    }
}

#[test]
fn a_write_path_swapped_for_a_link_after_the_plan_fails_the_call() {
    let h = host();
    let cache = h.base.join("tools/cache");
    let mut plan = plan(
        &h,
        &format!("cat {c}/*; echo planted > {c}/planted", c = cache.display()),
    );
    plan.extra_write = vec![cache.clone()];
    refused_as_a_link(ready_swap_start(&h, &plan), &cache);
    assert!(!h.base.join("elsewhere/cache/planted").exists());
}

#[test]
fn a_read_directory_swapped_for_a_link_after_the_plan_fails_the_call() {
    let h = host();
    let cache = h.base.join("tools/cache");
    let mut plan = plan(&h, &format!("cat {}/*", cache.display()));
    plan.extra_read = vec![cache.clone()];
    refused_as_a_link(ready_swap_start(&h, &plan), &cache);
}

#[test]
fn a_declared_path_that_is_a_link_when_the_plan_is_made_is_refused() {
    let h = host();
    let link = h.base.join("cache-link");
    std::os::unix::fs::symlink(h.base.join("elsewhere/cache"), &link).unwrap();
    let mut plan = plan(&h, "true");
    plan.extra_read = vec![link.clone()];
    match chock_sandbox::spawn(&plan, StdioMode::Null) {
        Err(SandboxError::Plan(msg)) => assert!(msg.contains("is a symlink"), "{msg}"),
        other => panic!("expected a plan error, got {other:?}"),
    }
}

#[test]
fn an_unswapped_declared_path_is_bound_as_before() {
    let h = host();
    let cache = h.base.join("tools/cache");
    let mut plan = plan(
        &h,
        &format!("cat {c}/entry; echo w > {c}/w", c = cache.display()),
    );
    plan.extra_write = vec![cache.clone()];
    let sockets = SocketIndex::new();
    let ready = chock_sandbox::ready_in_session(&plan, None, &sockets).unwrap();
    let mut child = ready.start(StdioMode::Piped).unwrap();
    let mut out = String::new();
    child
        .take_stdout()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child.wait().unwrap();
    assert_eq!(out, "cached\n");
    assert!(cache.join("w").exists());
}
