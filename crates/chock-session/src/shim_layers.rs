//! How a call is shown the git shim over every real git (docs/git.md, "The shim"): in a constant
//! handful of mounts, not one per git file.
//!
//! A source build of git, or Debian's, has a hundred and more hard links of one git in its exec
//! path (`git-upload-pack`, every builtin); one bind each cost a call about 145 mounts, built for
//! every call and copied into every call of a session sandbox. A directory holding two or more
//! of them is instead shown through one read-only overlay ([`chock_sandbox::ShimDir`]): its top
//! layer, a directory of the session's the host prepares once, holds the shim under each hidden
//! name (hard links of one copy); the tree's own directory lies below it, so every other file
//! there (`git-sh-setup`, the `mergetools`) reads as before. A git alone in its directory
//! (`/usr/bin/git`) stays one bind.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use chock_sandbox::{Shim, ShimDir};

/// What a plan gets to show the shim over every real git.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Shown {
    /// A bind of the shim over each git alone in its directory.
    pub(crate) files: Vec<Shim>,
    /// One overlay over each directory of several, and the binds that would hide the same gits
    /// (for a plan that mounts something at or below the directory, which an overlay would cover).
    pub(crate) dirs: Vec<(ShimDir, Vec<Shim>)>,
}

impl Shown {
    /// Gives `plan` the shim over every real git: a directory at or above which the plan mounts
    /// one of its own paths (a declared path under `/usr/local/bin`, say) gets its gits bound one
    /// by one, as an overlay there would cover that mount.
    pub(crate) fn apply(&self, plan: &mut chock_sandbox::Plan) {
        plan.shims = self.files.clone();
        plan.shim_dirs.clear();
        for (dir, binds) in &self.dirs {
            let own = [&plan.project_path, &plan.home];
            let covered = own
                .into_iter()
                .chain(&plan.extra_read)
                .chain(&plan.extra_write)
                .chain(plan.store_paths.iter().map(|s| &s.target))
                .any(|p| p.starts_with(&dir.target));
            if covered {
                plan.shims.extend(binds.iter().cloned());
            } else {
                plan.shim_dirs.push(dir.clone());
            }
        }
    }

    /// The same, its layers made under `from` and since moved to `to`.
    pub(crate) fn moved(mut self, from: &Path, to: &Path) -> Shown {
        for (dir, _) in &mut self.dirs {
            if let Ok(rest) = dir.layer.strip_prefix(from) {
                dir.layer = to.join(rest);
            }
        }
        self
    }
}

/// Shows `shim` over each of `masked` (the real gits). For each directory holding two or more,
/// a layer under `root` (made anew, the session's own) holds the shim under each of their names.
/// A layer that cannot be made (a full disk) leaves that directory's gits bound one by one, as
/// they were before layers: every git is hidden either way, only the call's cost differs. With
/// `own_copy` (a session whose calls run in a microVM guest) the binds show the copy of the shim
/// under `root` too, so everything the calls are shown of the shim lies in that one directory.
pub(crate) fn show(shim: &Path, masked: &[PathBuf], root: Option<&Path>, own_copy: bool) -> Shown {
    let mut by_dir: BTreeMap<&Path, Vec<&OsStr>> = BTreeMap::new();
    for m in masked {
        if let (Some(dir), Some(name)) = (m.parent(), m.file_name()) {
            by_dir.entry(dir).or_default().push(name);
        }
    }
    if let Some(root) = root {
        // Left by a session that ended without closing: its layers are made again.
        let _ = std::fs::remove_dir_all(root);
    }
    let mut shown = Shown::default();
    let mut program: Option<PathBuf> = None;
    let mut shim = shim.to_path_buf();
    if let (true, Some(root)) = (own_copy, root)
        && let Ok(copy) = own(&shim, root, &mut program)
    {
        shim = copy;
    }
    let shim = shim.as_path();
    for (i, (dir, names)) in by_dir.into_iter().enumerate() {
        let layer = match root {
            Some(root) if names.len() > 1 => layer(shim, root, i, &names, &mut program).ok(),
            _ => None,
        };
        let binds = names.iter().map(|name| Shim {
            source: shim.to_path_buf(),
            target: dir.join(name),
        });
        match layer {
            Some(layer) => {
                let target = dir.to_path_buf();
                shown
                    .dirs
                    .push((ShimDir { layer, target }, binds.collect()));
            }
            None => shown.files.extend(binds),
        }
    }
    shown
}

/// Layer `i` under `root`: the shim under each of `names`, each a hard link of one copy of it
/// (`program`, made at the first layer: a hard link of `shim` itself where the filesystem and
/// its owner allow, else a copy).
fn layer(
    shim: &Path,
    root: &Path,
    i: usize,
    names: &[&OsStr],
    program: &mut Option<PathBuf>,
) -> std::io::Result<PathBuf> {
    let program = own(shim, root, program)?;
    let layer = root.join(i.to_string());
    std::fs::DirBuilder::new().mode(0o755).create(&layer)?;
    for name in names {
        std::fs::hard_link(&program, layer.join(name))?;
    }
    Ok(layer)
}

/// The session's one copy of `shim` under `root` (`program`, made the first time: a hard link
/// of `shim` itself where the filesystem and its owner allow, else a copy).
fn own(shim: &Path, root: &Path, program: &mut Option<PathBuf>) -> std::io::Result<PathBuf> {
    if let Some(p) = program {
        return Ok(p.clone());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)?;
    let p = root.join(crate::git_shim::SHIM_BINARY);
    if std::fs::hard_link(shim, &p).is_err() {
        std::fs::copy(shim, &p)?;
    }
    Ok(program.insert(p).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_several_gits_is_one_layer_and_a_lone_git_one_bind() {
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("shim");
        std::fs::write(&shim, "#!/bin/sh\n").unwrap();
        let root = dir.path().join("layers");
        std::fs::create_dir_all(root.join("stale")).unwrap();
        let masked: Vec<PathBuf> = ["/usr/bin/git", "/usr/lib/git-core/git"]
            .into_iter()
            .map(PathBuf::from)
            .chain((0..50).map(|i| PathBuf::from(format!("/usr/lib/git-core/git-{i}"))))
            .collect();
        let shown = show(&shim, &masked, Some(&root), false);
        assert_eq!(shown.files.len(), 1);
        assert_eq!(shown.files[0].target, Path::new("/usr/bin/git"));
        assert_eq!(shown.dirs.len(), 1);
        let (ShimDir { layer, target }, binds) = &shown.dirs[0];
        assert_eq!(binds.len(), 51);
        assert_eq!(target, Path::new("/usr/lib/git-core"));
        let mut names: Vec<String> = std::fs::read_dir(layer)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 51);
        assert!(names.iter().all(|n| n.starts_with("git")));
        for n in &names {
            assert_eq!(std::fs::read(layer.join(n)).unwrap(), b"#!/bin/sh\n");
        }
        assert!(!root.join("stale").exists(), "a stale layer is gone");
        // A plan with a path of its own below the directory: its gits are bound instead.
        let mut plan = chock_sandbox::Plan::builder(
            vec!["true".into()],
            chock_sandbox::WorkspaceMount::Bind {
                source: "/tmp".into(),
            },
            "/p".into(),
        )
        .build_with_env(&[]);
        shown.apply(&mut plan);
        assert_eq!((plan.shims.len(), plan.shim_dirs.len()), (1, 1));
        plan.extra_read.push("/usr/lib/git-core/templates".into());
        shown.apply(&mut plan);
        assert_eq!((plan.shims.len(), plan.shim_dirs.len()), (52, 0));
        // No directory for layers: every git bound, as before.
        let shown = show(&shim, &masked, None, false);
        assert_eq!((shown.files.len(), shown.dirs.len()), (52, 0));
    }
}
