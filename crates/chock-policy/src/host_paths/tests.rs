use super::*;

fn ctx() -> HostPaths {
    HostPaths {
        home: Some(PathBuf::from("/home/u")),
        project_dir: Some(PathBuf::from("/home/u/proj")),
        policy_files: vec![
            PathBuf::from("/home/u/proj/chock.toml"),
            PathBuf::from("/etc/chock/org.toml"),
        ],
        forbidden: vec![(PathBuf::from("/srv/secret"), "org.toml:4".into())],
        chock_dirs: vec![
            PathBuf::from("/home/u/.config/chock"),
            PathBuf::from("/home/u/.local/share/chock"),
        ],
        binaries: vec![PathBuf::from("/home/u/.cargo/bin")],
    }
}

fn refused(raw: &str, access: Access) -> String {
    let c = ctx();
    match c.expand(raw) {
        Err(why) => why,
        Ok(path) => c.check(&path, access).expect_err(raw),
    }
}

#[test]
fn paths_that_would_open_the_sandbox_are_refused() {
    assert!(refused("/", Access::Read).contains("whole filesystem"));
    assert!(refused("~", Access::Read).contains("home"));
    assert!(refused("~/", Access::Read).contains("home directory"));
    assert!(refused("/home", Access::Read).contains("home directory"));
    assert!(refused("/proc/self", Access::Read).contains("/proc"));
    assert!(refused("/dev", Access::Read).contains("/dev"));
    assert!(refused("/sys/fs/cgroup", Access::Write).contains("/sys"));
    assert!(refused("~/proj/chock.toml", Access::Read).contains("policy file"));
    assert!(refused("/etc/chock", Access::Write).contains("policy file"));
    assert!(refused("~/proj/src", Access::Write).contains("real project"));
    assert!(refused("/srv", Access::Read).contains("org bundle forbids at org.toml:4"));
    assert!(refused("/srv/secret/x", Access::Read).contains("org bundle"));
    assert!(refused("relative/dir", Access::Read).contains("absolute"));
    assert!(refused("/usr/../etc", Access::Read).contains(".."));
    assert!(refused("~root/x", Access::Read).contains("~/"));
    assert!(refused("~/.local/share", Access::Read).contains("Chock's own directory"));
    assert!(
        refused("~/.local/share/chock/credentials", Access::Read)
            .contains("/home/u/.local/share/chock")
    );
    assert!(refused("~/.config", Access::Write).contains("Chock's own directory"));
}

#[test]
fn no_write_path_may_reach_chock_s_binaries_but_reading_them_is_harmless() {
    assert!(refused("~/.cargo", Access::Write).contains("Chock's own binaries"));
    assert!(refused("~/.cargo/bin", Access::Write).contains("/home/u/.cargo/bin"));
    let c = ctx();
    c.check(Path::new("/home/u/.cargo"), Access::Read).unwrap();
    c.check(Path::new("/home/u/.cargo/registry"), Access::Write)
        .unwrap();
}

#[test]
fn the_running_binary_s_directory_is_found() {
    let dir = binaries_dir().unwrap();
    let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
    assert_eq!(exe.parent().unwrap(), dir);
    assert!(HostPaths::for_host().binaries.contains(&dir));
}

#[test]
fn a_home_behind_a_symlink_is_refused_under_its_real_name_too() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("data/u");
    std::fs::create_dir_all(&real).unwrap();
    let link = dir.path().join("home-u");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let ctx = HostPaths {
        home: Some(link),
        ..HostPaths::default()
    };
    let parent = real.parent().unwrap().canonicalize().unwrap();
    let err = ctx.check(&parent, Access::Read).unwrap_err();
    assert!(err.contains("home directory"), "{err}");
}

#[test]
fn ordinary_paths_pass_and_tilde_expands() {
    let c = ctx();
    let path = c.expand("~/.cargo/registry").unwrap();
    assert_eq!(path, PathBuf::from("/home/u/.cargo/registry"));
    c.check(&path, Access::Read).unwrap();
    c.check(Path::new("/home/u/proj/docs"), Access::Read)
        .unwrap();
    c.check(Path::new("/opt/toolchain"), Access::Write).unwrap();
}

#[test]
fn a_declared_symlink_is_refused_and_a_linked_parent_is_checked_where_it_leads() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("root");
    std::os::unix::fs::symlink("/", &link).unwrap();
    let err = HostPaths::default().check(&link, Access::Read).unwrap_err();
    assert!(err.contains("is a symlink (to /)"), "{err}");
    // A directory under a linked parent: checked by its real name too.
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(secret.join("keys")).unwrap();
    let via = dir.path().join("via");
    std::os::unix::fs::symlink(&secret, &via).unwrap();
    let c = HostPaths {
        forbidden: vec![(secret.canonicalize().unwrap(), "org.toml:2".into())],
        ..HostPaths::default()
    };
    let err = c.check(&via.join("keys"), Access::Read).unwrap_err();
    assert!(
        err.contains("leads to") && err.contains("org.toml:2"),
        "{err}"
    );
}

#[test]
fn a_socket_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let err = HostPaths::default().check(&sock, Access::Read).unwrap_err();
    assert!(err.contains("socket"), "{err}");
}

fn declared(path: &Path, access: Access, field: &str) -> DeclaredPath {
    DeclaredPath {
        path: path.to_path_buf(),
        access,
        field: field.into(),
    }
}

#[test]
fn a_path_under_another_table_s_write_path_is_refused_by_either_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let cargo = base.join("cargo");
    std::fs::create_dir_all(cargo.join("npm")).unwrap();
    let sandbox_write = declared(&cargo, Access::Write, "sandbox.write");
    let cache = declared(&cargo.join("npm"), Access::Write, "mcp.servers.x.cache");
    let (at, why) = check_nesting(&[sandbox_write.clone(), cache]).unwrap_err();
    assert_eq!(at, 1);
    assert!(why.contains("sandbox.write"), "{why}");
    // The same directory reached through a link elsewhere: refused by where it leads.
    let alias = base.join("alias");
    std::os::unix::fs::symlink(&cargo, &alias).unwrap();
    let read = declared(&alias.join("npm"), Access::Read, "mcp.servers.x.read");
    let (at, _) = check_nesting(&[read, sandbox_write.clone()]).unwrap_err();
    assert_eq!(at, 0);
    // Side by side, or the same path twice, is fine.
    let other = declared(&base.join("other"), Access::Write, "mcp.servers.x.cache");
    check_nesting(&[sandbox_write.clone(), other, sandbox_write]).unwrap();
}

/// A confined process that can write in `w` replaces a directory there, one a host link leads
/// through, with a link out of it: the declared path then resolves outside `w`, so neither its
/// name nor its final real path lies under `w`, yet where it leads is the process's choice. The
/// links met on the way are compared too.
#[test]
fn a_path_resolved_through_a_link_inside_a_write_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let w = base.join("w");
    std::fs::create_dir_all(&w).unwrap();
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("data")).unwrap();
    // The host's link into the write path (a tool's `current` link, say) ...
    let link = base.join("tool");
    std::os::unix::fs::symlink(w.join("v1"), &link).unwrap();
    // ... and, in the write path, what the confined process swapped in.
    std::os::unix::fs::symlink(&elsewhere, w.join("v1")).unwrap();
    let write = declared(&w, Access::Write, "sandbox.write");
    let read = declared(&link.join("data"), Access::Read, "mcp.servers.x.read");
    assert_eq!(
        std::fs::canonicalize(&read.path).unwrap(),
        elsewhere.join("data")
    );
    let (at, why) = check_nesting(&[write.clone(), read.clone()]).unwrap_err();
    assert_eq!(at, 1);
    assert!(why.contains("sandbox.write"), "{why}");
    let seen = [("its read path", read.path.clone())];
    assert!(sees_a_write_path(&seen, std::slice::from_ref(&w)).is_some());
    // Not made yet, behind a host link into the write path: the confined process would make it.
    let later = declared(
        &base.join("later").join("data"),
        Access::Read,
        "sandbox.read",
    );
    std::os::unix::fs::symlink(w.join("v2"), base.join("later")).unwrap();
    assert!(std::fs::canonicalize(&later.path).is_err());
    let (at, _) = check_nesting(&[write.clone(), later]).unwrap_err();
    assert_eq!(at, 1);
    // Reached without passing through the write path: fine.
    let direct = declared(&elsewhere.join("data"), Access::Read, "mcp.servers.x.read");
    check_nesting(&[write, direct]).unwrap();
}

/// `chock` run through a link (`~/.local/bin/chock` -> the installed binary): a call that can
/// write the link's directory replaces the link with a program of its own, which the person runs
/// next, unconfined. The directory the person runs it from is refused as a write path too.
#[test]
fn the_directory_chock_is_run_from_through_a_link_is_no_write_path() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
    std::os::unix::fs::symlink(&exe, bin.join("chock")).unwrap();
    let path_var = std::ffi::OsString::from(format!("/nonexistent:{}", bin.display()));
    for arg0 in [
        std::ffi::OsString::from("chock"),
        bin.join("chock").into_os_string(),
    ] {
        let dirs = binaries_dirs_for(&arg0, Some(&path_var), &base);
        assert!(
            dirs.contains(&exe.parent().unwrap().to_path_buf()),
            "{dirs:?}"
        );
        assert!(dirs.contains(&bin), "{arg0:?}: {dirs:?}");
        let c = HostPaths {
            binaries: dirs,
            ..HostPaths::default()
        };
        let err = c.check(&bin, Access::Write).unwrap_err();
        assert!(err.contains("Chock's own binaries"), "{err}");
        c.check(&bin, Access::Read).unwrap();
    }
    // Relative to the working directory.
    let dirs = binaries_dirs_for(std::ffi::OsStr::new("bin/chock"), None, &base);
    assert!(dirs.contains(&bin), "{dirs:?}");
}

/// A host bind mount shows a forbidden directory under another path, which no name comparison
/// (written or resolved: a bind mount is no link) matches. The test runs itself again in a user
/// and mount namespace of its own (`unshare -rm`), where it may bind mount as root or not.
#[test]
fn a_forbidden_directory_under_another_name_is_refused() {
    const INNER: &str = "CHOCK_POLICY_TEST_BIND_BASE";
    if let Some(base) = std::env::var_os(INNER) {
        let base = PathBuf::from(base);
        let (secret, alias) = (base.join("secret"), base.join("alias"));
        let status = std::process::Command::new("mount")
            .args(["--bind"])
            .arg(&secret)
            .arg(&alias)
            .status()
            .unwrap();
        assert!(status.success(), "mount --bind: {status}");
        let c = HostPaths {
            forbidden: vec![(secret.clone(), "org.toml:3".into())],
            ..HostPaths::default()
        };
        for path in [alias.clone(), alias.join("keys")] {
            let err = c.check(&path, Access::Read).unwrap_err();
            assert!(err.contains("org.toml:3"), "{err}");
        }
        // A path beside it is fine.
        c.check(&base.join("other"), Access::Read).unwrap();
        // The real project under another name: readable, never a write path.
        let c = HostPaths {
            project_dir: Some(secret.clone()),
            ..HostPaths::default()
        };
        c.check(&alias, Access::Read).unwrap();
        let err = c.check(&alias, Access::Write).unwrap_err();
        assert!(err.contains("the real project"), "{err}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    for d in ["secret/keys", "alias", "other"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    let out = std::process::Command::new("unshare")
        .args(["-rm", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "host_paths::tests::a_forbidden_directory_under_another_name_is_refused",
            "--nocapture",
        ])
        .env(INNER, &base)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}
