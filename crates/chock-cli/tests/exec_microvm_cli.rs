//! `chock exec` in a project whose chock.toml says `[sandbox] isolation = "microvm"`: the real
//! binary, a real guest (QEMU, the guest kernel, chock-guest built for musl). The command runs
//! under the guest's kernel, its output and exit code come back, and a guest that cannot start
//! fails the command, naming what is missing, with no fallback to the host's sandbox.

mod run_support;

use std::path::PathBuf;
use std::process::Output;

use run_support::{World, text};

/// The target directory this test binary was built in.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("exe");
    exe.ancestors().nth(3).expect("target").to_path_buf()
}

/// The guest's kernel directory and init, as CI names them or in this build tree; `None` (a
/// failure under the feature, in CI) when something the guest needs is missing.
fn guest_parts() -> Option<(PathBuf, PathBuf)> {
    let init = std::env::var_os("CHOCK_GUEST_INIT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("x86_64-unknown-linux-musl/debug/chock-guest"));
    let kernel = std::env::var_os("CHOCK_VM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("chock-vm-kernel"));
    let present = chock_test_support::installed("/usr/bin/qemu-system-x86_64")
        && chock_test_support::installed(&init)
        && chock_test_support::installed(kernel.join("vmlinux"));
    present.then_some((kernel, init))
}

/// `chock exec -- command` in `w`, with the guest's kernel directory `kernel`. The world clears
/// the environment: where the kernel and the init are is passed on by name.
fn exec_in_guest(w: &World, kernel: &PathBuf, init: &PathBuf, command: &[&str]) -> Output {
    let mut args = vec!["exec", "--"];
    args.extend_from_slice(command);
    w.command(&args)
        .env("CHOCK_VM_DIR", kernel)
        .env("CHOCK_GUEST_INIT", init)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run chock")
}

fn microvm_project() -> World {
    let w = World::new();
    w.write("chock.toml", "[sandbox]\nisolation = \"microvm\"\n");
    w.write("hello.txt", "hello from the project\n");
    w
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel, chock-guest built for musl)"
)]
fn exec_in_a_microvm_project_runs_the_command_in_the_guest() {
    let Some((kernel, init)) = guest_parts() else {
        return;
    };
    let w = microvm_project();
    let out = exec_in_guest(
        &w,
        &kernel,
        &init,
        &[
            "sh",
            "-c",
            "uname -r; cat /proc/cmdline; cat hello.txt; echo to-stderr >&2; exit 7",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // The command's own exit code and both its streams come back.
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{stderr}");
    assert!(stderr.contains("to-stderr"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}\n{stderr}");
    // It ran under the guest's kernel, booted with the guest's command line, not the host's.
    let guest_release = std::fs::read_to_string(kernel.join("release")).expect("release");
    let host_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    assert_eq!(lines[0], guest_release.trim());
    assert_ne!(
        lines[0],
        host_release.trim(),
        "the command ran under the host's kernel"
    );
    let host_cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    assert_ne!(lines[1], host_cmdline.trim());
    assert!(lines[1].contains("rdinit=/init"), "{}", lines[1]);
    assert!(lines[1].contains(chock_vm_cmdline_marker()), "{}", lines[1]);
    // In the project's workspace, shared into the guest.
    assert_eq!(lines[2], "hello from the project");
}

/// A word of the guest kernel's command line the host's has not: Landlock first among the
/// security modules, as chock-vm boots it.
fn chock_vm_cmdline_marker() -> &'static str {
    "lsm=landlock,"
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel, chock-guest built for musl)"
)]
fn exec_in_a_microvm_project_whose_guest_cannot_start_fails_naming_what_is_missing() {
    let Some((_, init)) = guest_parts() else {
        return;
    };
    let w = microvm_project();
    let empty = w.base.join("no-kernel-here");
    std::fs::create_dir_all(&empty).expect("dir");
    let out = exec_in_guest(&w, &empty, &init, &["echo", "ran-on-the-host"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    // No fallback: the command did not run anywhere.
    assert!(!stdout.contains("ran-on-the-host"), "{stdout}");
    // The error names the setting, the missing file and where it was looked for.
    assert!(stderr.contains("isolation = \"microvm\""), "{stderr}");
    assert!(stderr.contains("vmlinux"), "{stderr}");
    assert!(stderr.contains(&empty.display().to_string()), "{stderr}");
    assert!(stderr.contains("chock vm kernel"), "{stderr}");
}
