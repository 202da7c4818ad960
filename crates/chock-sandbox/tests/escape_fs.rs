//! Escape suite, filesystem: the real project, the policy file, secrets outside the project,
//! kernel tunables. Each test names the layer that must stop the act; see docs/sandbox.md.

mod escape_support;

use escape_support::{Backing, Fixture, SECRET, run, run_per_call};

/// Attack: write to the real project through the workspace the sandbox sees (modify, create,
/// delete), with either backing. Layer: the workspace mount (an overlay whose lower layer is never
/// written, or the session's copy bound in the project's place).
#[test]
fn writing_the_project_never_reaches_the_real_directory() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        let readme = fx.project.join("README.md");
        let before = std::fs::read_to_string(&readme).unwrap();
        let script = format!(
            "echo changed > {p}/README.md && echo new > {p}/created.txt && rm {p}/chock-hostile && echo done",
            p = fx.project.display()
        );
        let r = run(&fx.plan(vec!["/bin/sh".into(), "-c".into(), script]));
        assert_eq!(
            r.stdout.trim(),
            "done",
            "the writes themselves must work inside: {r:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&readme).unwrap(),
            before,
            "the real README.md was changed"
        );
        assert!(
            !fx.project.join("created.txt").exists(),
            "a file appeared in the real project"
        );
        assert!(
            fx.project.join("chock-hostile").exists(),
            "a file was deleted from the real project"
        );
        assert_eq!(
            std::fs::read_to_string(fx.landed("README.md")).unwrap(),
            "changed\n",
            "the write went nowhere"
        );
    }
}

/// Attack: write the policy file (write, truncate-replace by rename, delete, chmod), with either
/// workspace backing. Layer: the policy file bound read-only over itself.
#[test]
fn the_policy_file_cannot_be_changed() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        let policy = fx.project.join("chock.toml");
        let p = policy.to_string_lossy().into_owned();
        let before = std::fs::read_to_string(&policy).unwrap();
        let other = fx.project.join("other.toml").to_string_lossy().into_owned();
        std::fs::write(
            fx.project.join("other.toml"),
            "[rules]\n\"*\" = \"allow\"\n",
        )
        .unwrap();
        let write = run(&fx.hostile_plan(&["write", &p]));
        write.assert_refused("EROFS", "read-only bind of the policy file");
        let rename = run(&fx.hostile_plan(&["rename", &other, &p]));
        rename.assert_refused("EBUSY", "the policy file is a mount point");
        let unlink = run(&fx.hostile_plan(&["unlink", &p]));
        unlink.assert_refused("EBUSY", "the policy file is a mount point");
        let chmod = run(&fx.hostile_plan(&["chmod", &p]));
        chmod.assert_refused("EROFS", "read-only bind of the policy file");
        let read = run(&fx.hostile_plan(&["read", &p]));
        assert!(
            read.stdout.contains("[rules]"),
            "the policy must stay readable inside: {read:?}"
        );
        assert_eq!(std::fs::read_to_string(&policy).unwrap(), before);
        assert!(
            !fx.landed("chock.toml").exists()
                || std::fs::read_to_string(fx.landed("chock.toml")).unwrap() == before
        );
    }
}

/// Attack: read a secret in the home directory, by its path. Layer: the fresh root (nothing of the
/// host's home is mounted; the sandbox home is an empty tmpfs).
#[test]
fn a_secret_in_the_home_directory_is_invisible() {
    let fx = Fixture::new(Backing::Overlay);
    let r = run(&fx.hostile_plan(&["read", &fx.secret.to_string_lossy()]));
    assert!(!r.stdout.contains(SECRET), "the secret leaked: {r:?}");
    r.assert_refused("ENOENT", "fresh root without the host's home");
}

/// Attack: read the same secret through symlinks the project ships (absolute and relative).
/// Layer: the fresh root (links resolve inside the sandbox's tree, where the target is absent).
#[test]
fn a_secret_is_invisible_through_a_shipped_symlink() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        std::os::unix::fs::symlink(&fx.secret, fx.project.join("leak-absolute")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", fx.project.join("leak-relative")).unwrap();
        // The links do work on the host: the attack is real.
        assert!(
            std::fs::read_to_string(fx.project.join("leak-relative"))
                .unwrap()
                .contains(SECRET)
        );
        for link in ["leak-absolute", "leak-relative"] {
            let path = fx.project.join(link).to_string_lossy().into_owned();
            let r = run(&fx.hostile_plan(&["read", &path]));
            assert!(
                !r.stdout.contains(SECRET),
                "the secret leaked through {link} ({backing:?}): {r:?}"
            );
            r.assert_refused(
                "ENOENT",
                "fresh root: the link's target does not exist inside",
            );
        }
    }
}

/// Attack: read a secret the host keeps outside any home (/var/tmp), and the host's shadow file.
/// Layer: the fresh root (only /usr, the needed /etc entries and the project are there).
#[test]
fn host_files_outside_the_base_set_are_invisible() {
    let fx = Fixture::new(Backing::Overlay);
    let dir = std::path::PathBuf::from("/var/tmp").join(escape_support::token("var"));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let r = run(&fx.hostile_plan(&["read", &secret.to_string_lossy()]));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!r.stdout.contains(SECRET), "the secret leaked: {r:?}");
    r.assert_refused("ENOENT", "fresh root without /var");
    let shadow = run(&fx.hostile_plan(&["read", "/etc/shadow"]));
    shadow.assert_refused(
        "ENOENT",
        "fresh root binds only the /etc entries toolchains need",
    );
}

/// Attack: change the /etc files the base set copies into the fresh root (not bound): overwrite,
/// remove, replace and chmod /etc/passwd, the file every program reads for names. Layer: the
/// root remounted read-only once the tree is built (Landlock would refuse all but the chmod with
/// EACCES after it).
#[test]
fn the_copied_etc_files_cannot_be_changed() {
    let fx = Fixture::new(Backing::Overlay);
    for act in [
        vec!["write", "/etc/passwd"],
        vec!["unlink", "/etc/passwd"],
        vec!["rename", "/etc/group", "/etc/passwd"],
        vec!["chmod", "/etc/passwd"],
    ] {
        // chmod is one act Landlock has no right for: the read-only root alone stops it.
        let r = run(&fx.hostile_plan(&act));
        r.assert_refused(
            "EROFS",
            &format!("{act:?}: the root is read-only once its tree is built"),
        );
    }
    let host = std::fs::read_to_string("/etc/passwd").unwrap();
    let r = run(&fx.hostile_plan(&["read", "/etc/passwd"]));
    assert_eq!(
        r.stdout.trim(),
        format!("succeeded {}", host.replace('\n', "\\n")).trim(),
        "the copy is the host's file"
    );
}

/// Attack: write outside the workspace and /tmp: into /usr (a read-only bind) and into the sandbox
/// home (a writable tmpfs that Landlock must still allow) as a control, and into a declared
/// read-only path. Layers: read-only binds; Landlock.
#[test]
fn writes_outside_the_workspace_are_refused() {
    let fx = Fixture::new(Backing::Overlay);
    let usr = run(&fx.hostile_plan(&["write", "/usr/chock-escape"]));
    usr.assert_refused_any("read-only bind of /usr (EROFS) or Landlock (EACCES)");
    assert!(!std::path::Path::new("/usr/chock-escape").exists());

    let shared = fx.base.join("toolchain");
    std::fs::create_dir_all(&shared).unwrap();
    let mut plan = fx.hostile_plan(&["write", &shared.join("planted").to_string_lossy()]);
    plan.extra_read = vec![shared.clone()];
    let r = run(&plan);
    r.assert_refused_any("a declared read path is read-only");
    assert!(
        !shared.join("planted").exists(),
        "the write reached a declared read-only path"
    );
}

/// Attack: make a new file in the sandbox's /dev, which is the call's own tmpfs (in a session
/// sandbox, one for every call of the session). Layers: /dev remounted read-only once made (EROFS),
/// Landlock behind it (writes are allowed under the workspace, /tmp, /dev/shm and the sandbox home
/// only). Control: the allowed places stay writable, so the refusal is by path.
#[test]
fn a_file_cannot_be_made_in_dev() {
    let fx = Fixture::new(Backing::Overlay);
    let r = run(&fx.hostile_plan(&["write", "/dev/chock-escape"]));
    r.assert_refused("EROFS", "/dev is read-only once made");
    for ok in ["/tmp/allowed", "/dev/shm/allowed"] {
        let r = run(&fx.hostile_plan(&["write", ok]));
        assert!(
            r.stdout.starts_with("succeeded"),
            "{ok} must stay writable: {r:?}"
        );
    }
}

/// Attack: change the device nodes and /dev itself: set the mode, owner and times of /dev/null,
/// /dev/zero, /dev/full, /dev/random, /dev/urandom and /dev/tty, and an extended attribute on them,
/// each to what it already is (so a failure of this test changes nothing). The devices are the
/// host's inodes, bound: as root the call's uid 0 is the host's, and `chmod 000 /dev/null` would
/// break the host. /dev is a tmpfs that, in a session sandbox, every call of the session shares: a
/// mode or attribute set by one call would be seen by the next. Layers: the devices bound
/// read-only, /dev remounted read-only (EROFS, before any owner check). Control: the devices still
/// read and write (a read-only mount refuses changes to the inode, not to the device).
#[test]
fn the_device_nodes_and_dev_cannot_be_changed() {
    let fx = Fixture::new(Backing::Overlay);
    let mut failures = Vec::new();
    let paths = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev",
    ];
    for path in paths {
        for what in ["chmod", "chown", "times", "xattr"] {
            let r = run(&fx.hostile_plan(&["inode", what, path]));
            if r.stdout.trim() != "refused EROFS" {
                failures.push(format!("{what} {path}: {:?} {}", r.status, r.stdout.trim()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "changes a read-only device bind or /dev must refuse with EROFS:\n{}",
        failures.join("\n")
    );
    let script =
        "echo x > /dev/null && head -c 5 /dev/zero | wc -c && head -c 5 /dev/urandom | wc -c";
    let r = run(&fx.plan(vec!["/bin/sh".into(), "-c".into(), script.into()]));
    assert_eq!(
        (r.status, r.stdout.split_whitespace().collect::<Vec<_>>()),
        (chock_sandbox::ExitStatus::Exited(0), vec!["5", "5"]),
        "the devices must still work: {r:?}"
    );
}

/// Attack: write a kernel tunable (the same value back, so a failure of this test harms nothing).
/// Layer: Landlock (the filesystem is read-only outside the workspace and /tmp), and /proc/sys
/// being owned by the host's root.
#[test]
fn proc_sys_cannot_be_written() {
    let fx = Fixture::new(Backing::Overlay);
    for path in [
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/vm/overcommit_memory",
        "/proc/sys/kernel/hostname",
    ] {
        let r = run(&fx.hostile_plan(&["rewrite", path]));
        let errno = r.assert_refused_any(&format!("writing {path}"));
        assert!(
            errno == "EACCES" || errno == "EROFS" || errno == "EPERM",
            "{path}: unexpected {errno}"
        );
    }
}

/// Attack: open the host's most dangerous /proc files for writing (only opened, never written: a
/// failure of this test harms nothing). For a root user the call's uid 0 is the host's root, so the
/// files' owner check passes and only the sandbox's own layers stand between the call and, for
/// example, /proc/sys/kernel/core_pattern. Layers: /proc/sys bound read-only (EROFS), Landlock
/// (EACCES) behind it.
#[test]
fn dangerous_proc_files_cannot_be_opened_for_writing() {
    let fx = Fixture::new(Backing::Overlay);
    // For a user other than root the files' own permissions answer first (EACCES) and the
    // sandbox's layers are not reached; for root they are the only answer. In a guest the
    // call's uid 0 is the guest kernel's root (its init's), whoever runs the host's side.
    let root = nix::unistd::geteuid().is_root() || escape_support::in_guest();
    let sys_errno = if root { "EROFS" } else { "EACCES" };
    for (path, errno, layer) in [
        // Not even listed in a procfs mounted from a user namespace (ENOENT), where it exists.
        (
            "/proc/sysrq-trigger",
            "ENOENT",
            "procfs of the call's user namespace",
        ),
        (
            "/proc/sys/kernel/core_pattern",
            sys_errno,
            "/proc/sys bound read-only",
        ),
        (
            "/proc/sys/kernel/modprobe",
            sys_errno,
            "/proc/sys bound read-only",
        ),
        (
            "/proc/sys/vm/drop_caches",
            sys_errno,
            "/proc/sys bound read-only",
        ),
    ] {
        if !std::path::Path::new(path).exists() {
            continue;
        }
        let r = run(&fx.hostile_plan(&["open-write", path]));
        r.assert_refused(errno, &format!("{layer}: {path}"));
    }
}

/// Attack: read /proc's root-only files (kpageflags, kpagecount, slabinfo, vmallocinfo, timer_list,
/// kmsg, and any other entry at the top of /proc the host shows to root only) and the files
/// container runtimes mask (keys, interrupts), a few bytes each, and list its hardware directories.
/// As root the call's uid 0 is the host's, so the files' owner check passes. Layer: the masks over
/// /proc (a read-only `nodev` bind of /dev/null over a file: EACCES; an empty read-only tmpfs over
/// a directory). For another user the files' own permissions answer the same.
#[test]
fn root_only_proc_files_are_masked() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new(Backing::Overlay);
    let mut files: Vec<String> = [
        "kpageflags",
        "kpagecount",
        "kpagecgroup",
        "slabinfo",
        "vmallocinfo",
        "pagetypeinfo",
        "timer_list",
        "kmsg",
        "kcore",
        "keys",
        "interrupts",
    ]
    .map(String::from)
    .to_vec();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_file()
            && meta.permissions().mode() & 0o004 == 0
            && name != "sysrq-trigger"
            && !files.contains(&name)
        {
            files.push(name);
        }
    }
    let mut failures = Vec::new();
    for name in &files {
        let path = format!("/proc/{name}");
        if !std::path::Path::new(&path).exists() {
            continue;
        }
        let r = run(&fx.hostile_plan(&["open-read", &path]));
        // The list is the host's /proc: a file the guest's kernel does not have is not there to
        // read (its cloud kernel lacks some the host's has, e.g. program_cpu).
        let absent_in_guest = escape_support::in_guest() && r.stdout.trim() == "refused ENOENT";
        if r.stdout.trim() != "refused EACCES" && !absent_in_guest {
            failures.push(format!("{path}: {:?} {}", r.status, r.stdout.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "/proc files that must be masked (EACCES):\n{}",
        failures.join("\n")
    );
    let dirs = [
        "/proc/acpi",
        "/proc/asound",
        "/proc/scsi",
        "/proc/tty/driver",
    ];
    let script = dirs
        .iter()
        .map(|d| format!("echo {d} $(ls -A {d} 2>/dev/null | wc -l)"))
        .collect::<Vec<_>>()
        .join("; ");
    let r = run(&fx.plan(vec!["/bin/sh".into(), "-c".into(), script]));
    for line in r.stdout.lines() {
        assert!(
            line.ends_with(" 0"),
            "a masked /proc directory lists entries: {line}\n{r:?}"
        );
    }
    assert_eq!(r.stdout.lines().count(), dirs.len(), "{r:?}");
}

/// Attack: write /sys (the same value back). Layer: the fresh root (no sysfs at all) or a
/// read-only one.
#[test]
fn sys_cannot_be_written() {
    let fx = Fixture::new(Backing::Overlay);
    for path in [
        "/sys/kernel/mm/ksm/run",
        "/sys/kernel/profiling",
        "/sys/fs/cgroup/cgroup.procs",
    ] {
        let r = run(&fx.hostile_plan(&["rewrite", path]));
        let errno = r.assert_refused_any(&format!("writing {path}"));
        assert!(
            ["ENOENT", "EROFS", "EACCES", "EPERM"].contains(&errno.as_str()),
            "{path}: unexpected {errno}"
        );
    }
}

/// Attack: the project ships its policy file as a symlink to a secret outside the project (a file
/// in the home directory). The policy file is bound over itself; if the driver follows the link on
/// the host, it binds the secret into the sandbox. Layer: the policy bind (it must refuse, or bind
/// nothing but the project's own file).
#[test]
fn a_policy_file_symlink_does_not_bind_a_host_secret() {
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        let policy = fx.project.join("chock.toml");
        std::fs::remove_file(&policy).unwrap();
        std::os::unix::fs::symlink(&fx.secret, &policy).unwrap();
        let plan = fx.hostile_plan(&["read", &policy.to_string_lossy()]);
        match escape_support::start_error(&plan) {
            chock_sandbox::SandboxError::Layer { layer, reason, .. } => {
                assert_eq!(layer, chock_sandbox::Layer::PolicyFile, "{reason}");
                assert!(reason.contains("symlink"), "{reason}");
            }
            e => panic!("refused, but not by the policy-file layer ({backing:?}): {e}"),
        }
    }
}

/// Not an attack, a side effect: the policy bind's mount point already exists in the workspace,
/// so an overlay call must not touch it. Opening it for writing (as the driver once did) copied
/// `chock.toml` up into the upper directory on every call, where a diff of the upper directory
/// saw it as changed.
#[test]
fn an_overlay_call_copies_nothing_up() {
    let fx = Fixture::new(Backing::Overlay);
    let r = run(&fx.hostile_plan(&["read", &fx.project.join("chock.toml").to_string_lossy()]));
    assert!(
        r.stdout.contains("[rules]"),
        "the policy must be readable: {r:?}"
    );
    let upper: Vec<_> = std::fs::read_dir(fx.session.join("upper"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        upper.is_empty(),
        "the call wrote into the upper directory: {upper:?}"
    );
}

/// Attack: leave a set-user-id (or set-group-id) file in the workspace. For a root user the
/// call's uid 0 is the host's root, so such a file is a set-uid-root program on the host as soon
/// as anyone runs it from the session's directory, or from the project after an apply. Layer:
/// whatever refuses the mode bits inside (the seccomp filter by argument would be one way);
/// for another user the file is only set-uid to that same user, which gains nothing.
#[test]
fn no_setuid_file_is_left_for_the_host() {
    use std::os::unix::fs::MetadataExt;
    for backing in [Backing::Overlay, Backing::BindCopy] {
        let fx = Fixture::new(backing);
        for (name, mode) in [("suid", "4755"), ("sgid", "2755")] {
            let path = fx.project.join(name).to_string_lossy().into_owned();
            let r = run(&fx.hostile_plan(&["chmod-mode", &path, mode]));
            let landed = fx.landed(name);
            let meta = std::fs::metadata(&landed).ok();
            let bits = meta.as_ref().map_or(0, |m| m.mode() & 0o6000);
            let owner = meta.as_ref().map_or(u32::MAX, MetadataExt::uid);
            assert!(
                bits == 0 || owner != 0,
                "a set-id file owned by the host's root was left at {} ({backing:?}, mode {:o}): {r:?}",
                landed.display(),
                meta.map_or(0, |m| m.mode())
            );
        }
    }
}

/// Attack: give a file set-id bits through each system call that sets a mode, as root and as a
/// user alike (for a user the bit is harmless, but the table is the same for everyone). Layer:
/// seccomp by argument (EPERM on a set-id mode; openat2, whose mode the filter cannot read,
/// answers ENOSYS). Without the filter every act succeeds for the file's owner.
#[test]
fn set_id_modes_are_refused_by_the_filter() {
    let fx = Fixture::new(Backing::Overlay);
    let mut calls = vec!["fchmod", "fchmodat", "fchmodat2", "openat", "mknodat"];
    if cfg!(target_arch = "x86_64") {
        calls.extend(["chmod", "open", "creat", "mknod"]);
    }
    for (i, call) in calls.iter().enumerate() {
        for variant in [(*call).to_string(), format!("{call}-gid")] {
            let path = fx.project.join(format!("setid-{i}-{variant}"));
            let r = run(&fx.hostile_plan(&["setid", &variant, &path.to_string_lossy()]));
            r.assert_refused("EPERM", &format!("seccomp: {variant} with a set-id mode"));
        }
    }
    let path = fx
        .project
        .join("setid-openat2")
        .to_string_lossy()
        .into_owned();
    run(&fx.hostile_plan(&["setid", "openat2", &path]))
        .assert_refused("ENOSYS", "seccomp: openat2 falls back to openat");
    // Control: the same calls with an ordinary mode go through (the rows match by argument only).
    let plain = fx.project.join("plain").to_string_lossy().into_owned();
    let r = run(&fx.hostile_plan(&["chmod-mode", &plain, "755"]));
    assert!(
        r.stdout.starts_with("succeeded"),
        "chmod 755 must work: {r:?}"
    );
    let r = run(&fx.hostile_plan(&["chmod-mode", &plain, "4755"]));
    r.assert_refused("EPERM", "seccomp: chmod 4755");
}

/// Attack: reach the in-memory upper layer of a thrown-away workspace (`chock exec` without
/// `--keep`) by a path of its own — the tmpfs it lives on, where the overlay was staged — to
/// write beside the overlay. Layer: the workspace mount (the staging tmpfs is detached and its
/// mount point removed before the command starts). The writes themselves must work, a directory
/// removed and made again must be empty (the upper layer keeps overlayfs's `user.` attributes),
/// and nothing may land on the host's disk.
#[test]
fn an_in_memory_upper_layer_is_reached_only_through_the_workspace() {
    if escape_support::not_in_guest(
        "a guest's calls have no in-memory upper layer: the guest kernel (Debian's cloud 6.1) \
         keeps no user.* attributes on tmpfs, so its scratch calls keep their layers on disk",
    ) {
        return;
    }
    let fx = Fixture::new(Backing::Overlay);
    std::fs::create_dir(fx.project.join("dir")).unwrap();
    std::fs::write(fx.project.join("dir/old.txt"), "old\n").unwrap();
    let script = format!(
        "cd {p} && echo made > new.txt && cat new.txt && rm -r dir && mkdir dir && ls -A dir && \
         echo listed; test -e /.chock-scratch && echo STAGING-VISIBLE; \
         awk '$5 == \"/.chock-scratch\" {{ print \"STAGING-MOUNTED\" }}' /proc/self/mountinfo; \
         ls -A / | grep -c chock-scratch",
        p = fx.project.display()
    );
    let mut plan = fx.plan(vec!["/bin/sh".into(), "-c".into(), script]);
    plan.own_overlay = chock_sandbox::OwnOverlay::InMemory;
    let r = run_per_call(&plan);
    assert_eq!(r.stdout, "made\nlisted\n0\n", "{r:?}");
    let upper: Vec<_> = std::fs::read_dir(fx.session.join("upper"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(upper.is_empty(), "a write reached the disk: {upper:?}");
    assert!(!fx.project.join("new.txt").exists());
    assert!(fx.project.join("dir/old.txt").exists());
}
