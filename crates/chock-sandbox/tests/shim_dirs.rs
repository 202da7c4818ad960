//! A shim directory ([`chock_sandbox::ShimDir`]): a directory of the tree shown with a host
//! layer's files over some of its own, in one read-only overlay however many files it hides;
//! the directory's other files read as they are; a target the tree lacks fails the call (rule 1).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_sandbox::{Plan, SandboxError, ShimDir, StdioMode, WorkspaceMount};

struct Host {
    _dir: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
}

/// `base/tools` holds `names` (each printing `real <name>`) and `keep`; `base/layer` holds
/// `names` printing `shim <name>`.
fn host(names: &[String]) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("proj");
    for d in ["proj", "tools", "layer"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    for n in names {
        std::fs::write(base.join("tools").join(n), format!("echo real {n}\n")).unwrap();
        std::fs::write(base.join("layer").join(n), format!("echo shim {n}\n")).unwrap();
    }
    std::fs::write(base.join("tools/keep"), "kept\n").unwrap();
    Host {
        _dir: dir,
        base,
        project,
    }
}

/// `script` in a call that sees `base` (a declared read path) with `layer` over `target`.
fn run(h: &Host, target: Option<&Path>, script: &str) -> Result<String, SandboxError> {
    let mut plan = Plan::builder(
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        WorkspaceMount::Bind {
            source: h.project.clone(),
        },
        h.project.clone(),
    )
    .extra_read(vec![h.base.clone()])
    .timeout(Some(Duration::from_secs(30)))
    .build();
    plan.shim_dirs = target
        .map(|t| ShimDir {
            layer: h.base.join("layer"),
            target: t.to_path_buf(),
        })
        .into_iter()
        .collect();
    let mut child = chock_sandbox::spawn(&plan, StdioMode::Piped)?;
    let mut out = String::new();
    child
        .take_stdout()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child.wait()?;
    Ok(out)
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("git-{i}")).collect()
}

#[test]
fn the_layer_hides_each_of_its_names_in_one_mount_however_many() {
    let mut counts = Vec::new();
    for n in [2, 60] {
        let h = host(&names(n));
        let tools = h.base.join("tools");
        let script = format!(
            "cd {} && sh git-0 && sh git-1 && cat keep && wc -l < /proc/self/mountinfo",
            tools.display()
        );
        let out = run(&h, Some(&tools), &script).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..3], ["shim git-0", "shim git-1", "kept"], "{out}");
        counts.push(lines[3].parse::<usize>().unwrap());
        // Without the layer the same call sees the real files, in one mount fewer.
        let out = run(&h, None, &script).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..3], ["real git-0", "real git-1", "kept"], "{out}");
        assert_eq!(
            lines[3].parse::<usize>().unwrap() + 1,
            counts[counts.len() - 1]
        );
    }
    assert_eq!(counts[0], counts[1], "60 names take the mounts 2 do");
}

#[test]
fn the_layer_is_read_only() {
    let h = host(&names(2));
    let tools = h.base.join("tools");
    let script = format!(
        "echo x > {0}/git-0; echo x > {0}/new; cat {0}/git-0",
        tools.display()
    );
    let out = run(&h, Some(&tools), &script).unwrap();
    assert_eq!(out, "echo shim git-0\n");
    assert!(!tools.join("new").exists());
    let layer = std::fs::read_to_string(h.base.join("layer/git-0")).unwrap();
    assert_eq!(layer, "echo shim git-0\n");
}

#[test]
fn a_target_the_tree_lacks_fails_the_call() {
    let h = host(&names(2));
    let missing = h.base.join("nowhere");
    match run(&h, Some(&missing), "echo ran") {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("`filesystem`") && text.contains("nowhere (shims)"),
                "{text}"
            );
        }
        Ok(out) => panic!("the call ran without its shim directory: {out}"),
    }
}
