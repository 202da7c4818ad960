//! The reviewed list, and the confinement it builds run for real around a probe in the place of
//! QEMU and of virtiofsd: the same namespaces, root and Landlock rules, with `sh` as the program.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chock_guest::confine::Grant;
use chock_test_support::{installed, requires};

use super::rules::{Place, Process, RULES, When};
use super::{Machine, rules_for};
use crate::accel::{Accel, AccelChoice};
use crate::kernel::GuestKernel;
use crate::machine::{HostShare, MachineSpec};

#[test]
fn every_row_says_why_and_the_monitor_is_given_nothing_of_the_project() {
    for r in RULES {
        assert!(r.why.len() > 20, "{r:?}");
        if r.process == Process::Monitor {
            assert!(!matches!(r.place, Place::Proc | Place::ServerRun), "{r:?}");
            // What it serves itself is its only read-write place, and only a snapshot-capable
            // monitor serves anything.
            assert!(
                r.grant != Grant::ReadWrite || r.place == Place::Share,
                "{r:?}"
            );
            assert!(
                r.place != Place::OwnFds || r.when == When::Snapshots,
                "{r:?}"
            );
        } else {
            assert!(
                !matches!(
                    r.place,
                    Place::Kernel | Place::Initramfs | Place::DevKvm | Place::OwnFds
                ),
                "{r:?}"
            );
        }
        if r.grant == Grant::ReadWrite {
            assert!(matches!(r.place, Place::Share | Place::ServerRun), "{r:?}");
            assert!(r.place != Place::Share || r.when == When::ReadWriteShare);
        }
    }
    let dir = Path::new("/machine");
    let paths = |kvm| {
        let m = Machine {
            kvm,
            dir,
            served: &[],
            snapshots: false,
        };
        rules_for(Process::Monitor, &m, None)
            .into_iter()
            .map(|r| r.path.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert!(!paths(false).contains(&"/dev/kvm".to_string()));
    assert!(paths(true).contains(&"/dev/kvm".to_string()));
    assert!(paths(false).iter().all(|p| !p.starts_with("/machine")));
    assert!(paths(false).iter().all(|p| !p.starts_with("/proc")));
    // A snapshot-capable monitor gets exactly the directories it serves, each as the share is.
    let served = [
        HostShare {
            path: "/project".into(),
            read_only: true,
            overlay: None,
        },
        HostShare {
            path: "/work/guest-merged".into(),
            read_only: false,
            overlay: Some(["/project".into(), "/work/upper".into(), "/work/work".into()]),
        },
    ];
    let m = Machine {
        kvm: false,
        dir,
        served: &served,
        snapshots: true,
    };
    let rules = rules_for(Process::Monitor, &m, None);
    let on = |p: &str| {
        rules
            .iter()
            .filter(|r| r.path == Path::new(p))
            .map(|r| r.grant)
            .collect::<Vec<_>>()
    };
    assert_eq!(on("/project"), [Grant::Read], "{rules:?}");
    assert_eq!(on("/work/guest-merged"), [Grant::ReadWrite], "{rules:?}");
    assert_eq!(on("/proc/self/fd"), [Grant::Read], "{rules:?}");
    assert!(
        on("/work").is_empty() && on("/work/upper").is_empty(),
        "{rules:?}"
    );
    // A file server gets its one share, read-only when the guest may only read it.
    for read_only in [true, false] {
        let share = HostShare {
            path: "/project/copy".into(),
            read_only,
            overlay: None,
        };
        let m = Machine {
            kvm: false,
            dir,
            served: &[],
            snapshots: false,
        };
        let rules = rules_for(Process::FileServer, &m, Some(&share));
        let on_share: Vec<_> = rules.iter().filter(|r| r.path == share.path).collect();
        assert_eq!(on_share.len(), 1, "{rules:?}");
        let want = if read_only {
            Grant::Read
        } else {
            Grant::ReadWrite
        };
        assert_eq!(on_share[0].grant, want);
        assert!(
            rules
                .iter()
                .any(|r| r.path == dir && r.grant == Grant::MakeSockets)
        );
    }
}

/// The helper, or `None` (failing under the `microvm` feature) when it is not built.
fn helper() -> Option<PathBuf> {
    let init = std::env::var_os("CHOCK_GUEST_INIT").map_or_else(PathBuf::new, PathBuf::from);
    match super::default_helper(&init) {
        Ok(h) => Some(h),
        Err(e) => {
            requires(false, format_args!("{e}"));
            None
        }
    }
}

/// A machine spec whose kernel and initramfs are small files in `dir`: nothing boots, the
/// probe only reads them.
fn spec(dir: &Path, confine: PathBuf) -> MachineSpec {
    let vmlinux = dir.join("vmlinux");
    let initramfs = dir.join("initramfs");
    std::fs::write(&vmlinux, "kernel\n").unwrap();
    std::fs::write(&initramfs, "initramfs\n").unwrap();
    MachineSpec {
        kernel: GuestKernel {
            vmlinux,
            release: "test".into(),
            modules: Vec::new(),
            nine_p: false,
        },
        initramfs,
        accel: AccelChoice {
            accel: Accel::Tcg,
            why: "a test".into(),
        },
        memory_mib: 64,
        qemu: "/usr/bin/qemu-system-x86_64".into(),
        virtiofsd: "/usr/lib/qemu/virtiofsd".into(),
        snapshots: false,
        confine,
    }
}

/// Runs `cmd`, returning its status, stdout and stderr.
fn output(mut cmd: Command) -> (Option<i32>, String, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A file server's probe run to its end, its ids mapped as a server's are.
fn server_output(mut server: crate::machine::ServerCommand) -> (Option<i32>, String, String) {
    server
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = server.spawn().unwrap().wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A home-like directory for a test (not /tmp: the monitor's root has a /tmp of its own).
fn scratch() -> tempfile::TempDir {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    tempfile::Builder::new()
        .prefix(".chock-vm-confine-")
        .tempdir_in(home)
        .unwrap()
}

/// What the probe tries in the monitor's place; each line says whether it worked.
const MONITOR_PROBE: &str = r#"
cat /boot/vmlinux >/dev/null && echo kernel=read
echo up > /vm/console.log && echo console=written
ls / >/dev/null 2>&1 && echo root=listed || echo root=refused
(echo x > /tmp/probe) 2>/dev/null && echo tmp=written || echo tmp=refused
cat /vm/planted 2>/dev/null && echo vm=read || echo vm=refused
"#;

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (chock-confine built for musl)"
)]
fn the_monitors_confinement_refuses_what_is_not_on_its_list() {
    if !installed("/usr/bin/unshare") {
        return;
    }
    let Some(helper) = helper() else { return };
    let d = scratch();
    let spec = spec(d.path(), helper);
    let dir = d.path().join("machine");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("planted"), "a file the monitor does not need\n").unwrap();
    let cmd = crate::monitor::confined(
        &spec,
        &dir,
        &[],
        Path::new("/usr/bin/sh"),
        vec!["-c".into(), MONITOR_PROBE.into()],
    );
    let (status, out, err) = output(cmd);
    assert_eq!(status, Some(0), "{out}\n{err}");
    // What the machine needs works (so the probe did run in the monitor's root)...
    assert!(out.contains("kernel=read"), "{out}\n{err}");
    assert!(out.contains("console=written"), "{out}\n{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("console.log")).unwrap(),
        "up\n"
    );
    // ... and Landlock closes the rest, though the root's tmpfs and the machine's directory
    // belong to the monitor's own (mapped) user.
    assert!(out.contains("root=refused"), "{out}\n{err}");
    assert!(out.contains("tmp=refused"), "{out}\n{err}");
    assert!(out.contains("vm=refused"), "{out}\n{err}");
}

/// What the probe tries in a snapshot-capable monitor's place: `$1` the share it serves
/// read-write, `$2` a directory beside it, `$3` the overlay's merged directory (over `$4`, the
/// project, which is not in the root), `$5` a read-only share.
const SERVED_PROBE: &str = r#"
cat "$1/inside" > "$1/copy" && echo share=read-written
cat "$2/secret" 2>/dev/null && echo beside=read || echo beside=refused
mkdir "$2" 2>/dev/null && echo beside=made || echo beside=refused-make
ls "$(dirname "$1")" >/dev/null 2>&1 && echo parent=listed || echo parent=refused
cat "$3/kept" >/dev/null && rm "$3/gone" && echo y > "$3/new" && echo merged=used
ls "$4" >/dev/null 2>&1 && echo project=listed || echo project=refused
cat "$5/inside" >/dev/null && echo ro=read
(echo z > "$5/new") 2>/dev/null && echo ro=written || echo ro=refused
ls /proc/self/fd >/dev/null && echo fds=listed
ls /proc/1 >/dev/null 2>&1 && echo proc=listed || echo proc=refused
"#;

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (chock-confine built for musl)"
)]
fn a_snapshot_capable_monitor_reaches_its_9p_shares_and_not_their_siblings() {
    if !installed("/usr/bin/unshare") {
        return;
    }
    let Some(helper) = helper() else { return };
    let d = scratch();
    let mut spec = spec(d.path(), helper);
    spec.snapshots = true;
    let p = |n: &str| d.path().join(n);
    let (machine, share, beside, ro) = (p("machine"), p("share"), p("beside"), p("ro"));
    let (project, ws) = (p("project"), p("ws"));
    let (upper, work, merged) = (ws.join("upper"), ws.join("work"), ws.join("guest-merged"));
    for dir in [
        &machine, &share, &beside, &ro, &project, &ws, &upper, &work, &merged,
    ] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(share.join("inside"), "served\n").unwrap();
    std::fs::write(ro.join("inside"), "served\n").unwrap();
    std::fs::write(beside.join("secret"), "the project's other files\n").unwrap();
    std::fs::write(project.join("kept"), "kept\n").unwrap();
    std::fs::write(project.join("gone"), "deleted in the workspace\n").unwrap();
    let shares = [
        HostShare {
            path: share.clone(),
            read_only: false,
            overlay: None,
        },
        HostShare {
            path: merged.clone(),
            read_only: false,
            overlay: Some([project.clone(), upper.clone(), work.clone()]),
        },
        HostShare {
            path: ro.clone(),
            read_only: true,
            overlay: None,
        },
    ];
    let mut args = vec!["-c".into(), SERVED_PROBE.into(), "sh".into()];
    args.extend([&share, &beside, &merged, &project, &ro].map(|p| p.clone().into_os_string()));
    let cmd = crate::monitor::confined(&spec, &machine, &shares, Path::new("/usr/bin/sh"), args);
    let (status, out, err) = output(cmd);
    assert_eq!(status, Some(0), "{out}\n{err}");
    for want in [
        "share=read-written",
        "beside=refused",
        "beside=refused-make",
        "parent=refused",
        "merged=used",
        "project=refused",
        "ro=read",
        "ro=refused",
        "fds=listed",
        "proc=refused",
    ] {
        assert!(out.lines().any(|l| l == want), "{want}:\n{out}\n{err}");
    }
    assert_eq!(
        std::fs::read_to_string(share.join("copy")).unwrap(),
        "served\n"
    );
    // The overlay was the monitor's: the deletion is a whiteout in the upper directory, and the
    // project is untouched.
    assert!(project.join("gone").exists() && upper.join("gone").exists());
    assert!(upper.join("new").exists() && !project.join("new").exists());
    assert!(!ro.join("new").exists());
}

/// What the probe tries in a file server's place: `$1` its share, `$2` a directory beside it,
/// `$3` the machine's directory. (A file server has no /dev/null: the probe's noise goes to
/// its share.)
const SERVER_PROBE: &str = r#"
cat "$1/inside" > "$1/copy" && echo share=read
echo y > "$1/new" && echo share=written
cat "$2/secret" 2>"$1/err" && echo beside=read || echo beside=refused
(echo z > "$2/new") 2>"$1/err" && echo beside=written || echo beside=refused-write
ls "$3" >"$1/err" 2>&1 && echo machine=listed || echo machine=refused
"#;

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (chock-confine built for musl)"
)]
fn a_file_servers_confinement_reaches_its_share_and_nothing_else() {
    if !installed("/usr/bin/unshare") {
        return;
    }
    let Some(helper) = helper() else { return };
    let d = scratch();
    let spec = spec(d.path(), helper);
    let (machine, share, beside) = (
        d.path().join("machine"),
        d.path().join("share"),
        d.path().join("beside"),
    );
    for p in [&machine, &share, &beside] {
        std::fs::create_dir(p).unwrap();
    }
    std::fs::write(share.join("inside"), "served\n").unwrap();
    std::fs::write(beside.join("secret"), "the project's other files\n").unwrap();
    let host_share = HostShare {
        path: share.clone(),
        read_only: false,
        overlay: None,
    };
    let mut args = vec!["-c".into(), SERVER_PROBE.into(), "sh".into()];
    args.extend([&share, &beside, &machine].map(|p| p.clone().into_os_string()));
    let cmd = crate::machine::server_command(
        &spec,
        &host_share,
        &machine,
        Path::new("/usr/bin/sh"),
        args,
    )
    .unwrap();
    let (status, out, err) = server_output(cmd);
    assert_eq!(status, Some(0), "{out}\n{err}");
    assert!(out.contains("share=read"), "{out}\n{err}");
    assert!(out.contains("share=written"), "{out}\n{err}");
    assert!(out.contains("beside=refused"), "{out}\n{err}");
    assert!(out.contains("beside=refused-write"), "{out}\n{err}");
    assert!(out.contains("machine=refused"), "{out}\n{err}");
    assert!(!beside.join("new").exists());
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (chock-confine built for musl)"
)]
fn a_ruleset_that_cannot_be_applied_ends_the_helper_before_the_program() {
    let Some(helper) = helper() else { return };
    let d = scratch();
    let marker = d.path().join("ran");
    let mut cmd = Command::new(&helper);
    cmd.args(["--rule", "read:/no/such/place", "--", "/usr/bin/touch"])
        .arg(&marker);
    let (status, out, err) = output(cmd);
    assert_eq!(status, Some(3), "{out}\n{err}");
    assert!(err.contains("/no/such/place"), "{err}");
    assert!(err.contains("the program was not started"), "{err}");
    assert!(!marker.exists(), "the program ran without its ruleset");
}
