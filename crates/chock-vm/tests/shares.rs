//! What a plan's guest is given to see (`chock_vm::shares_for`): the shims a plan shows (the git
//! shim over each git) are shared read-only by their directories, once, and nothing wider.

use std::path::{Path, PathBuf};

use chock_sandbox::{Plan, Shim, ShimDir, WorkspaceMount};
use chock_vm::{HostShare, shares_for};

fn plan(workspace: &Path) -> Plan {
    Plan::builder(
        vec!["true".into()],
        WorkspaceMount::Bind {
            source: workspace.to_path_buf(),
        },
        workspace.to_path_buf(),
    )
    .build()
}

#[test]
fn a_plans_shims_are_shared_read_only_by_their_one_directory() {
    let t = tempfile::tempdir().unwrap();
    let (ws, layers) = (t.path().join("ws"), t.path().join("git-shims"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(layers.join("0")).unwrap();
    std::fs::write(layers.join("chock-git"), "").unwrap();
    let mut p = plan(&ws);
    p.host_channel = true;
    p.shims = vec![Shim {
        source: layers.join("chock-git"),
        target: PathBuf::from("/usr/bin/git"),
    }];
    p.shim_dirs = vec![ShimDir {
        layer: layers.join("0"),
        target: PathBuf::from("/usr/lib/git-core"),
    }];
    let shares = shares_for(&p).expect("a plan with shims and a host channel runs in a guest");
    let shim_shares: Vec<&HostShare> = shares
        .iter()
        .filter(|s| s.path.starts_with(t.path()) && s.path != ws)
        .collect();
    assert_eq!(
        shim_shares,
        [&HostShare {
            path: layers.clone(),
            read_only: true,
            overlay: None,
        }]
    );
    // A shim under /usr is already shown by the /usr share: nothing more.
    p.shims[0].source = PathBuf::from("/usr/bin/true");
    p.shim_dirs.clear();
    let shares = shares_for(&p).unwrap();
    assert!(
        !shares.iter().any(|s| s.path.starts_with("/usr/bin")),
        "{shares:?}"
    );
}
