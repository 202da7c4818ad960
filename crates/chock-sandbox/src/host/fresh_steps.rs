//! Planning a session call's own mounts (see `child/fresh.rs` for what they are and how the
//! call's init makes them): which steps of the session tree each call redoes, worked out on the
//! host once per session.

use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::child::fresh::{Cover, FreshKind, FreshOp, FreshRoot, FreshStep, MAX_CHILDREN};
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, Step, cstr};

fn mount_target(op: &Op) -> Option<&CStr> {
    match op {
        Op::Tmpfs { target, .. }
        | Op::Bind { target, .. }
        | Op::BindDeclared { target, .. }
        | Op::BindPolicy { target, .. }
        | Op::Overlay { target, .. }
        | Op::AttachOverlay { target, .. }
        | Op::Proc { target }
        | Op::Devpts { target } => Some(target),
        _ => None,
    }
}

fn made_path(op: &Op) -> Option<&CStr> {
    match op {
        Op::Mkdir { path, .. } | Op::Touch { path } | Op::CopyFile { target: path, .. } => {
            Some(path)
        }
        Op::Symlink { link, .. } => Some(link),
        _ => None,
    }
}

fn path_of(c: &CStr) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(c.to_bytes()))
}

fn strictly_under(p: &Path, root: &Path) -> bool {
    p != root && p.starts_with(root)
}

/// The fresh steps of every call of the session tree `tree`, whose plan's own fresh mounts are
/// `roots`. `None`: a covered mount has more than [`MAX_CHILDREN`] mounts below it.
pub(crate) fn steps(
    tree: &[Step],
    roots: &[FreshRoot],
) -> Result<Option<Vec<FreshStep>>, SandboxError> {
    // The layers a call's read overlays are made from are covered with the tree's /tmp and never
    // carried over.
    let targets: Vec<&Path> = tree
        .iter()
        .filter_map(|s| mount_target(&s.op))
        .map(path_of)
        .filter(|t| !crate::host::read_overlay::is_session_layer(t))
        .collect();
    let mut user: Vec<&FreshRoot> = roots.iter().collect();
    user.sort_by_key(|r| r.target.components().count());
    // Read overlays first: their layers are reachable only until /tmp is covered.
    let (read, other): (Vec<&FreshRoot>, Vec<&FreshRoot>) = user
        .into_iter()
        .partition(|r| r.kind == FreshKind::ReadOverlay);
    let mut covers: Vec<(PathBuf, Option<FreshKind>)> = read
        .iter()
        .map(|r| (r.target.clone(), Some(r.kind)))
        .collect();
    covers.push((PathBuf::from("/dev/shm"), Some(FreshKind::Tmpfs)));
    covers.push((PathBuf::from("/dev/pts"), None));
    covers.extend(other.iter().map(|r| (r.target.clone(), Some(r.kind))));
    let mut out = Vec::new();
    for (root, kind) in covers {
        let mount = match kind {
            Some(FreshKind::SharedOverlay) => Cover::SharedOverlay,
            Some(FreshKind::Tmpfs) => {
                Cover::Mount(last_op(tree, &root, |op| matches!(op, Op::Tmpfs { .. }))?)
            }
            Some(FreshKind::ReadOverlay) => Cover::Mount(last_op(tree, &root, |op| {
                matches!(op, Op::Overlay { readonly: true, .. })
            })?),
            None => Cover::Mount(last_op(tree, &root, |op| matches!(op, Op::Devpts { .. }))?),
        };
        let mut children: Vec<&Path> = Vec::new();
        for t in &targets {
            let topmost = strictly_under(t, &root)
                && !targets
                    .iter()
                    .any(|m| strictly_under(m, &root) && strictly_under(t, m));
            if topmost && !children.contains(t) {
                children.push(t);
            }
        }
        if children.len() > MAX_CHILDREN {
            return Ok(None);
        }
        let points: Vec<Op> = tree
            .iter()
            .filter(|s| {
                made_path(&s.op).is_some_and(|p| {
                    let p = path_of(p);
                    strictly_under(p, &root)
                        && !children.iter().any(|c| strictly_under(p, c))
                        && !crate::host::read_overlay::is_session_layer(p)
                })
            })
            .map(|s| s.op.clone())
            .collect();
        let layer = if kind == Some(FreshKind::SharedOverlay) {
            Layer::Workspace
        } else {
            Layer::Filesystem
        };
        let label = format!(
            "this call's own {} on {} ({} mounts carried over)",
            match kind {
                Some(FreshKind::SharedOverlay) => "clone of the shared overlay",
                Some(FreshKind::Tmpfs) => "tmpfs",
                Some(FreshKind::ReadOverlay) => "read-only overlay",
                None => "devpts",
            },
            root.display(),
            children.len()
        );
        out.push(FreshStep {
            op: FreshOp::Cover {
                target: cstr(root.as_os_str().as_bytes())?,
                mount,
                children: children
                    .iter()
                    .map(|c| cstr(c.as_os_str().as_bytes()))
                    .collect::<Result<_, _>>()?,
                points,
            },
            layer,
            label,
            optional: false,
        });
    }
    // /proc of the call's pid namespace over the tree's, then its read-only knobs again (the
    // tree's are on the tree's /proc and are not carried over).
    let proc_at = tree
        .iter()
        .position(|s| matches!(s.op, Op::Proc { .. }))
        .ok_or_else(|| SandboxError::Plan("the session tree has no /proc".into()))?;
    out.push(FreshStep {
        op: FreshOp::Cover {
            target: cstr("/proc")?,
            mount: Cover::Mount(tree[proc_at].op.clone()),
            children: Vec::new(),
            points: Vec::new(),
        },
        layer: Layer::Filesystem,
        label: "proc /proc (this call's pid namespace)".into(),
        optional: false,
    });
    for s in tree[proc_at + 1..].iter().take_while(|s| s.optional) {
        out.push(FreshStep {
            op: FreshOp::Plain(s.op.clone()),
            layer: s.layer,
            label: s.label.clone(),
            optional: true,
        });
    }
    Ok(Some(out))
}

fn last_op(tree: &[Step], root: &Path, kind: impl Fn(&Op) -> bool) -> Result<Op, SandboxError> {
    tree.iter()
        .rev()
        .find(|s| kind(&s.op) && mount_target(&s.op).map(path_of) == Some(root))
        .map(|s| s.op.clone())
        .ok_or_else(|| {
            SandboxError::Plan(format!(
                "the session tree has no mount on {}",
                root.display()
            ))
        })
}
