//! The reference point both sandbox benchmarks measure against: bubblewrap with the options
//! closest to Chock's layers — every namespace, a read-only /usr and the loader's /etc entries, a
//! fresh /proc and /dev, a /tmp tmpfs, the workspace bound read-write, no capabilities, a new
//! session, dying with its parent, a cleared environment — running `true`. One copy, included by
//! `#[path]` from each bench, so both compare against the same call.

use std::path::Path;

/// The bwrap binary and its arguments for one call in `workspace`; `None` without bubblewrap.
pub fn bwrap_args(workspace: &Path) -> Option<(&'static str, Vec<String>)> {
    let bin = ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let ws = workspace.to_string_lossy().into_owned();
    let mut args: Vec<String> = [
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    for etc in [
        "/etc/ld.so.cache",
        "/etc/passwd",
        "/etc/group",
        "/etc/ssl",
        "/etc/alternatives",
    ] {
        if Path::new(etc).exists() {
            args.extend(["--ro-bind".into(), etc.into(), etc.into()]);
        }
    }
    args.extend([
        "--bind".into(),
        ws.clone(),
        ws.clone(),
        "--chdir".into(),
        ws,
        "/usr/bin/true".into(),
    ]);
    Some((bin, args))
}
