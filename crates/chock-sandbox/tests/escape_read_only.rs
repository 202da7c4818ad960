//! Escape suite, the real project read-only at the project's path
//! (`WorkspaceMount::ReadOnly`): what a long-lived service such as an MCP server runs from, so
//! that it runs what the person trusted and never what the agent wrote. It reads the project; it writes nothing of it (no new file,
//! no rewrite, no unlink: the mount is read-only and Landlock grants no write there); a live
//! socket inside it is not the host's (the project is shown through an overlay of its own); and a
//! declared write path inside it is refused before anything runs.

mod escape_support;

use std::os::unix::net::UnixListener;

use chock_sandbox::{Plan, WorkspaceMount};
use escape_support::{Backing, Fixture, HOSTILE_SUCCEEDED, run};

fn read_only(fx: &Fixture, args: &[&str]) -> Plan {
    let mut plan = fx.hostile_plan(args);
    plan.workspace = WorkspaceMount::ReadOnly {
        source: fx.project.clone(),
    };
    plan
}

#[test]
fn the_real_project_is_read_and_never_written() {
    let fx = Fixture::new(Backing::Overlay);
    let readme = fx.project.join("README.md");
    let read = run(&read_only(&fx, &["read", &readme.to_string_lossy()]));
    assert_eq!(
        read.status,
        chock_sandbox::ExitStatus::Exited(HOSTILE_SUCCEEDED)
    );
    assert!(read.stdout.contains("the real project"), "{}", read.stdout);

    let new = fx.project.join("NEW");
    for args in [
        vec!["write".to_string(), new.display().to_string()],
        vec!["write".to_string(), readme.display().to_string()],
        vec!["unlink".to_string(), readme.display().to_string()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(&read_only(&fx, &args));
        r.assert_refused("EROFS", "the project is read-only");
    }
    assert!(!new.exists(), "a file was made in the real project");
    assert_eq!(
        std::fs::read_to_string(&readme).unwrap(),
        "the real project\n"
    );
    // Nothing of the workspace is used: the overlay's upper layer stays empty.
    let upper = fx.session.join("upper");
    let landed = std::fs::read_dir(&upper).map_or(0, |d| d.count());
    assert_eq!(landed, 0, "something landed in {}", upper.display());
}

#[test]
fn a_live_socket_in_the_read_only_project_is_not_the_hosts() {
    let fx = Fixture::new(Backing::Overlay);
    let path = fx.project.join("dev.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = run(&read_only(&fx, &["connect-unix", &path.to_string_lossy()]));
    assert!(
        listener.accept().is_err(),
        "the project's live socket reached the host listener"
    );
    r.assert_refused_any("the project is shown through an overlay of its own");
}

#[test]
fn a_write_path_inside_the_read_only_project_is_refused() {
    let fx = Fixture::new(Backing::Overlay);
    let inside = fx.project.join("cache");
    std::fs::create_dir(&inside).unwrap();
    // Named inside the project (refused as inside the read-only project), and reached through a
    // symlink from outside it (refused sooner: a declared path is never bound through a link).
    let link = fx.base.join("cache-link");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    for (write, why) in [(inside, "read-only"), (link, "is a symlink")] {
        let mut plan = read_only(&fx, &["write", &write.join("x").to_string_lossy()]);
        plan.extra_write = vec![write.clone()];
        let err = escape_support::start_error(&plan);
        assert!(err.to_string().contains(why), "{}: {err}", write.display());
        assert!(!write.join("x").exists());
    }
}
