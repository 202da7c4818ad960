//! The tree's order and its refusals, checked on the host (no namespaces needed).

use super::*;
use crate::wire::plan::Plan;

#[test]
fn tree_puts_parents_first_and_policy_last() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("proj");
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::write(project.join("chock.toml"), "").unwrap();
    let project = project.canonicalize().unwrap();
    let plan = Plan::builder(
        vec!["true".into()],
        WorkspaceMount::Bind { source: copy },
        project.clone(),
    )
    .home(PathBuf::from("/home/someone"))
    .policy_file(Some(project.join("chock.toml")))
    .build_with_env(&[]);
    let steps = build(&plan, None, None).unwrap();
    let labels: Vec<&str> = steps.iter().map(|s| s.label.as_str()).collect();
    let pos = |needle: &str| {
        labels
            .iter()
            .position(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("{needle} in {labels:?}"))
    };
    assert!(pos("tmpfs /home/someone") < pos("rw bind"));
    let policy = format!("ro bind {}", project.join("chock.toml").display());
    assert!(
        pos("rw bind") < pos(&policy),
        "the policy bind lies over the workspace"
    );
    assert!(
        labels
            .iter()
            .any(|l| *l == format!("ro bind {}", project.join("chock.toml").display()))
    );
    assert!(pos("proc /proc") < pos("detach the host root"));
    assert_eq!(labels.last(), Some(&"root read-only"));
}

#[test]
fn a_policy_file_must_be_a_regular_file_inside_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("proj");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    std::fs::write(base.join("secret"), "x").unwrap();
    let layer_of = |policy: &Path| match policy_source(policy, &project) {
        Err(SandboxError::Layer { layer, reason, .. }) => Some((layer, reason)),
        Err(e) => panic!("{e}"),
        Ok(_) => None,
    };
    // A symlink to a host file: refused, naming the symlink.
    std::os::unix::fs::symlink(base.join("secret"), project.join("chock.toml")).unwrap();
    let (layer, reason) = layer_of(&project.join("chock.toml")).unwrap();
    assert_eq!(layer, Layer::PolicyFile);
    assert!(reason.contains("symlink"), "{reason}");
    // A directory reached through a symlink that leaves the project: refused.
    std::os::unix::fs::symlink(&base, project.join("out")).unwrap();
    let (_, reason) = layer_of(&project.join("out").join("secret")).unwrap();
    assert!(reason.contains("not inside the project"), "{reason}");
    // Not a regular file: refused.
    let (_, reason) = layer_of(&project.join("sub")).unwrap();
    assert!(reason.contains("not a regular file"), "{reason}");
    // The real thing: accepted, with its inode.
    std::fs::remove_file(project.join("chock.toml")).unwrap();
    std::fs::write(project.join("chock.toml"), "").unwrap();
    let (source, _, ino) = policy_source(&project.join("chock.toml"), &project).unwrap();
    assert_eq!(source, project.join("chock.toml"));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(ino, std::fs::metadata(&source).unwrap().ino());
}

#[test]
fn a_mount_over_dev_is_refused() {
    let plan = Plan::builder(
        vec!["true".into()],
        WorkspaceMount::Bind {
            source: "/tmp".into(),
        },
        "/p".into(),
    )
    .extra_read(vec!["/dev/shm".into()])
    .build_with_env(&[]);
    assert!(
        build(&plan, None, None)
            .unwrap_err()
            .to_string()
            .contains("/dev")
    );
}

#[test]
fn a_project_at_the_home_itself_gets_no_home_tmpfs() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap();
    let plan = Plan::builder(
        vec!["true".into()],
        WorkspaceMount::Bind {
            source: home.clone(),
        },
        home.clone(),
    )
    .home(home.clone())
    .build_with_env(&[]);
    let labels: Vec<String> = build(&plan, None, None)
        .unwrap()
        .into_iter()
        .map(|s| s.label)
        .collect();
    assert!(labels.contains(&format!("rw bind {}", home.display())));
    assert!(
        !labels
            .iter()
            .any(|l| l.starts_with(&format!("tmpfs {}", home.display()))),
        "{labels:?}"
    );
}

#[test]
fn a_shim_directory_is_one_read_only_overlay_and_covers_no_other_mount() {
    use crate::wire::plan::{Shim, ShimDir};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (layer, read) = (base.join("layer"), base.join("read"));
    std::fs::create_dir_all(read.join("sub")).unwrap();
    let plan = |target: &Path, shims: Vec<Shim>| {
        let mut plan = Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Bind {
                source: "/tmp".into(),
            },
            "/p".into(),
        )
        .extra_read(vec![read.clone()])
        .shims(shims)
        .build_with_env(&[]);
        plan.shim_dirs = vec![ShimDir {
            layer: layer.clone(),
            target: target.to_path_buf(),
        }];
        plan
    };
    let steps = build(&plan(Path::new("/usr/libexec/x"), Vec::new()), None, None).unwrap();
    let overlays: Vec<&Step> = steps
        .iter()
        .filter(|s| s.label.ends_with("(shims)"))
        .collect();
    assert_eq!(overlays.len(), 1);
    let expected = format!("lowerdir=/oldroot{}:/usr/libexec/x", layer.display());
    assert!(
        matches!(&overlays[0].op, Op::Overlay { target, data, readonly: true }
            if target.to_bytes() == b"/usr/libexec/x" && data.to_bytes() == expected.as_bytes()),
        "{:?}",
        overlays[0].op
    );
    // Made after the tree it lies over, before /proc.
    let at = |label: &str| steps.iter().position(|s| s.label == label).unwrap();
    let shims = steps
        .iter()
        .position(|s| s.label.ends_with("(shims)"))
        .unwrap();
    assert!(at(&format!("ro overlay {}", read.display())) < shims);
    assert!(shims < at("proc /proc (this call's pid namespace)"));
    // A declared path below the target, or a shim file there, would be covered: refused.
    for (target, shims) in [
        (read.clone(), Vec::new()),
        (base.clone(), Vec::new()),
        (
            PathBuf::from("/usr/libexec/x"),
            vec![Shim {
                source: "/bin/true".into(),
                target: "/usr/libexec/x/git".into(),
            }],
        ),
    ] {
        let error = build(&plan(&target, shims), None, None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("is mounted there"), "{error}");
    }
    let error = build(&plan(Path::new("/proc/x"), Vec::new()), None, None)
        .unwrap_err()
        .to_string();
    assert!(error.contains("outside /proc"), "{error}");
}
