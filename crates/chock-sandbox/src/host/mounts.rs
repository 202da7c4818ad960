//! The fresh root of a call: which mounts, in which order (built on the host, from the plan), and
//! the system calls that make each one (run in the call's init, inside its user and mount
//! namespaces).
//!
//! The sequence: make every mount private; mount a tmpfs on /tmp and pivot into it, so the old root
//! sits at /oldroot and every source is reached as `/oldroot/<path>` (no source can be shadowed by the
//! new tree); build the tree; mount a fresh /proc while the old one is still attached (the kernel only
//! lets a user namespace mount procfs where one is already fully visible); detach /oldroot; make the
//! new root read-only.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::wire::error::{Layer, SandboxError};
pub(crate) use crate::wire::mount_ops::{Op, Step, cstr, under_old_root};

pub(crate) mod builder;
use crate::wire::plan::{Plan, WorkspaceMount};
pub(crate) use builder::Builder;

/// Resolves symlinks in a host path, so that its source is reachable under /oldroot (an absolute
/// symlink would otherwise resolve against the new root while the tree is built).
fn canonical(what: &str, p: &Path) -> Result<PathBuf, SandboxError> {
    p.canonicalize()
        .map_err(|e| SandboxError::Plan(format!("{what} {}: {e}", p.display())))
}

/// A declared path's source: refused when the path is itself a symlink (the policy refuses one
/// when it is loaded, so one now was swapped in since), else resolved, so its bind can then be
/// opened without following any link (`Op::BindDeclared`).
fn declared_source(what: &str, p: &Path) -> Result<PathBuf, SandboxError> {
    if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SandboxError::Plan(format!(
            "{what} {} is a symlink: a declared path is never bound through a link (was it \
             swapped since the policy was read?)",
            p.display()
        )));
    }
    canonical(what, p)
}

/// The mount steps for `plan`, in order. `shared_fd` is the descriptor of the session's overlay when
/// the plan shares one (`None` only to describe the steps, never to run them); `sockets` is the
/// session's socket index (`None`: the declared paths are walked for sockets now).
pub(crate) fn build(
    plan: &Plan,
    shared_fd: Option<libc::c_int>,
    sockets: Option<&crate::SocketIndex>,
) -> Result<Vec<Step>, SandboxError> {
    Ok(build_tree(plan, shared_fd, sockets, false)?.0)
}

/// The steps of a session sandbox's tree (see `session_sandbox.rs`), and the mounts of it each call
/// replaces with fresh ones of its own: the plan's tmpfs mounts (`/tmp`, the home) and a shared
/// overlay workspace, which the tree holds as an empty placeholder (the instance is the call's).
pub(crate) fn build_session(
    plan: &Plan,
    sockets: &crate::SocketIndex,
) -> Result<(Vec<Step>, Vec<crate::child::fresh::FreshRoot>), SandboxError> {
    build_tree(plan, None, Some(sockets), true)
}

fn build_tree(
    plan: &Plan,
    shared_fd: Option<libc::c_int>,
    sockets: Option<&crate::SocketIndex>,
    session: bool,
) -> Result<(Vec<Step>, Vec<crate::child::fresh::FreshRoot>), SandboxError> {
    use crate::child::fresh::{FreshKind, FreshRoot};
    if session && plan.own_overlay == crate::wire::plan::OwnOverlay::InMemory {
        return Err(SandboxError::Plan(
            "a session sandbox's calls share the session's tree; none has an in-memory upper of its own"
                .into(),
        ));
    }
    let mut fresh = Vec::new();
    let fs = Layer::Filesystem;
    let mut b = Builder {
        steps: Vec::new(),
        made: BTreeSet::new(),
    };
    b.push(
        Op::MakePrivate,
        Layer::MountNamespace,
        "make every mount private".into(),
    );
    b.push(
        Op::EnterNewRoot,
        fs,
        "tmpfs root, host root at /oldroot".into(),
    );

    crate::host::base_set::system_and_dev(&mut b, plan)?;

    // The call's own mounts, parents before children.
    let mut user: Vec<(PathBuf, UserMount)> = Vec::new();
    user.push((PathBuf::from("/tmp"), UserMount::Tmpfs { mode: 0o1777 }));
    // Every declared path as bound (resolved): the credentials inside one are masked.
    let mut shown: Vec<PathBuf> = Vec::new();
    for p in &plan.extra_read {
        let c = declared_source("extra read path", p)?;
        shown.push(c.clone());
        // A directory is shown through an overlay of its own (socket_mask.rs says why); a file
        // is bound, and checked for being a socket itself.
        let m = if c.is_dir() {
            UserMount::ReadOverlay { lower: c.clone() }
        } else {
            UserMount::Bind {
                source: c.clone(),
                readonly: true,
                layer: fs,
            }
        };
        user.push((c, m));
    }
    // Store paths are immutable once valid (the store makes them read-only), so each is a plain
    // read-only bind, opened without following a link like a declared path, and not walked for
    // sockets: a closure is thousands of paths.
    for s in &plan.store_paths {
        let source = declared_source("store path", &s.source)?;
        user.push((s.target.clone(), UserMount::StoreBind { source }));
    }
    for p in &plan.extra_write {
        let c = declared_source("extra write path", p)?;
        shown.push(c.clone());
        user.push((
            c.clone(),
            UserMount::Bind {
                source: c,
                readonly: false,
                layer: fs,
            },
        ));
    }
    match &plan.workspace {
        WorkspaceMount::Bind { source } => {
            let source = canonical("workspace", source)?;
            user.push((
                plan.project_path.clone(),
                UserMount::Bind {
                    source,
                    readonly: false,
                    layer: Layer::Workspace,
                },
            ));
        }
        WorkspaceMount::ReadOnly { source } => {
            let source = canonical("workspace", source)?;
            // Checked again with symlinks resolved: no write path reaches into the real project.
            if let Some((p, _)) = user.iter().find(|(p, m)| {
                matches!(
                    m,
                    UserMount::Bind {
                        readonly: false,
                        ..
                    }
                ) && p.starts_with(&source)
            }) {
                return Err(SandboxError::Plan(format!(
                    "write path {} is inside the project {}, which this call sees read-only",
                    p.display(),
                    source.display()
                )));
            }
            user.push((
                plan.project_path.clone(),
                UserMount::ReadOverlay { lower: source },
            ));
        }
        WorkspaceMount::Overlay { lower, upper, .. } if plan.shared_overlay => {
            user.push((
                plan.project_path.clone(),
                UserMount::SharedOverlay {
                    lower: canonical("overlay lower", lower)?,
                    upper: canonical("overlay upper", upper)?,
                    fd: shared_fd.unwrap_or(-1),
                },
            ));
        }
        WorkspaceMount::Overlay { lower, upper, work } => {
            // An in-memory upper layer is made in the call; the paths of the workspace's own are
            // not used, and not made.
            let layer = |what, p: &PathBuf| match plan.own_overlay {
                crate::wire::plan::OwnOverlay::InMemory => Ok(p.clone()),
                _ => canonical(what, p),
            };
            let (lower, upper, work) = (
                canonical("overlay lower", lower)?,
                layer("overlay upper", upper)?,
                layer("overlay work", work)?,
            );
            user.push((
                plan.project_path.clone(),
                UserMount::Overlay { lower, upper, work },
            ));
        }
    }
    if let Some(policy) = &plan.policy_file {
        let (source, dev, ino) = policy_source(policy, &plan.project_path)?;
        user.push((policy.clone(), UserMount::Policy { source, dev, ino }));
    }
    // The home tmpfs, unless the home already is (or lies inside) another mount: a project at
    // `~` itself, or a home under /tmp (then it is only a directory in that tmpfs).
    match user
        .iter()
        .filter(|(t, _)| plan.home.starts_with(t))
        .max_by_key(|(t, _)| t.components().count())
    {
        None => user.push((plan.home.clone(), UserMount::Tmpfs { mode: 0o700 })),
        Some((t, UserMount::Tmpfs { .. })) if *t != plan.home => {
            user.push((plan.home.clone(), UserMount::Dir))
        }
        Some(_) => {}
    }
    for (target, _) in &user {
        if forbidden_target(target) {
            return Err(SandboxError::Plan(format!(
                "{} cannot be mounted into a sandbox (it is /, or under /proc, /sys or /dev)",
                target.display()
            )));
        }
    }
    user.sort_by_key(|(t, _)| t.components().count());
    for (i, (t, _)) in user.iter().enumerate() {
        if user[..i].iter().any(|(o, _)| o == t) {
            return Err(SandboxError::Plan(format!(
                "{} is mounted twice",
                t.display()
            )));
        }
    }
    let targets: Vec<PathBuf> = user.iter().map(|(t, _)| t.clone()).collect();
    let declared: Vec<PathBuf> = user
        .iter()
        .filter(|(_, m)| {
            matches!(
                m,
                UserMount::Bind {
                    layer: Layer::Filesystem,
                    ..
                }
            )
        })
        .map(|(t, _)| t.clone())
        .collect();
    let mut read_layers = crate::host::read_overlay::Layers::new(session);
    for (target, m) in user {
        match m {
            UserMount::Dir => b.mkdirs(&target, fs)?,
            UserMount::StoreBind { source } => b.bind_declared(&source, &target, true)?,
            UserMount::ReadOverlay { lower } => {
                read_layers.push(&mut b, &lower, &target)?;
                if session {
                    fresh.push(FreshRoot {
                        target: target.clone(),
                        kind: FreshKind::ReadOverlay,
                    });
                }
            }
            UserMount::Tmpfs { mode } => {
                b.tmpfs(&target, mode, plan.limits.tmp_size_bytes, fs)?;
                fresh.push(FreshRoot {
                    target: target.clone(),
                    kind: FreshKind::Tmpfs,
                });
            }
            UserMount::SharedOverlay { .. } if session => {
                // A placeholder for the call's own clone of the instance; the mount points of
                // what lies over the workspace (the policy file) are made in it.
                b.tmpfs(&target, 0o755, 1 << 20, Layer::Workspace)?;
                fresh.push(FreshRoot {
                    target: target.clone(),
                    kind: FreshKind::SharedOverlay,
                });
            }
            // A declared path (the only binds of this layer): through a descriptor.
            UserMount::Bind {
                source,
                readonly,
                layer: Layer::Filesystem,
            } => b.bind_declared(&source, &target, readonly)?,
            UserMount::Bind {
                source,
                readonly,
                layer,
            } => b.bind(&source, &target, readonly, layer)?,
            UserMount::Policy { source, dev, ino } => {
                b.mount_point(&target, false, Layer::PolicyFile)?;
                let op = Op::BindPolicy {
                    source: under_old_root(&source)?,
                    target: cstr(target.as_os_str().as_bytes())?,
                    dev,
                    ino,
                };
                b.push(
                    op,
                    Layer::PolicyFile,
                    format!("ro bind {}", target.display()),
                );
            }
            UserMount::Overlay { lower, upper, work } => {
                crate::host::own_overlay::push(&mut b, plan, &target, (&lower, &upper, &work))?;
            }
            UserMount::SharedOverlay { lower, upper, fd } => {
                b.mkdirs(&target, Layer::Workspace)?;
                let label = format!(
                    "overlay {} (the session's shared instance; lower {}, upper {})",
                    target.display(),
                    lower.display(),
                    upper.display()
                );
                let op = Op::AttachOverlay {
                    fd,
                    target: cstr(target.as_os_str().as_bytes())?,
                };
                b.push(op, Layer::Workspace, label);
            }
        }
    }

    crate::host::socket_index::push_masks(&mut b, &declared, &targets, sockets)?;
    let credentials = crate::host::credential_mask::credentials_of(plan);
    crate::host::credential_mask::push_masks(&mut b, &credentials, &shown)?;
    for shim in &plan.shims {
        if !shim.target.is_absolute() || forbidden_target(&shim.target) {
            return Err(SandboxError::Plan(format!(
                "shim target {} must be an absolute path outside /proc, /sys and /dev",
                shim.target.display()
            )));
        }
        b.shim(&shim.source, &shim.target)?;
    }
    let mounted: Vec<&Path> = targets
        .iter()
        .chain(plan.shims.iter().map(|s| &s.target))
        .map(PathBuf::as_path)
        .collect();
    for dir in &plan.shim_dirs {
        check_shim_dir(dir, &mounted)?;
        b.shim_dir(&dir.layer, &dir.target)?;
    }
    crate::host::base_set::proc(&mut b)?;
    b.push(Op::DropOldRoot, fs, "detach the host root".into());
    b.push(
        Op::RemountReadonly { target: cstr("/")? },
        fs,
        "root read-only".into(),
    );
    Ok((b.steps, fresh))
}

enum UserMount {
    Tmpfs {
        mode: u32,
    },
    /// A declared read directory, through a read-only overlay of its own (`read_overlay.rs`).
    ReadOverlay {
        lower: PathBuf,
    },
    /// A directory inside an earlier tmpfs.
    Dir,
    /// A nix store path, read-only at its store path (`Plan::store_paths`).
    StoreBind {
        source: PathBuf,
    },
    Bind {
        source: PathBuf,
        readonly: bool,
        layer: Layer,
    },
    Overlay {
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
    },
    SharedOverlay {
        lower: PathBuf,
        upper: PathBuf,
        fd: libc::c_int,
    },
    Policy {
        source: PathBuf,
        dev: u64,
        ino: u64,
    },
}

/// The host file to bind as the policy, checked before anything is built: the path's last
/// component must be a regular file, not a symlink (`lstat`), and its directory, with symlinks
/// resolved, must lie inside the project. Returns the resolved path and the file's device and inode,
/// which the init checks again on the descriptor it binds. Anything else fails the call: binding a
/// link's target would put any host file the user can read into the sandbox as `chock.toml`.
fn policy_source(policy: &Path, project: &Path) -> Result<(PathBuf, u64, u64), SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |reason: String| SandboxError::Layer {
        layer: Layer::PolicyFile,
        reason,
        hint: crate::host::hints::POLICY_FILE_HINT.into(),
    };
    let name = policy
        .file_name()
        .ok_or_else(|| refuse(format!("{} names no file", policy.display())))?;
    let dir = match policy.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => project,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| refuse(format!("{}: {e}", dir.display())))?;
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    if !dir.starts_with(&project) {
        return Err(refuse(format!(
            "{} is not inside the project {} (its directory resolves to {})",
            policy.display(),
            project.display(),
            dir.display()
        )));
    }
    let source = dir.join(name);
    let meta = std::fs::symlink_metadata(&source)
        .map_err(|e| refuse(format!("{}: {e}", source.display())))?;
    if meta.file_type().is_symlink() {
        return Err(refuse(format!(
            "{} is a symlink; the sandbox binds only a regular file inside the project",
            policy.display()
        )));
    }
    if !meta.is_file() {
        return Err(refuse(format!(
            "{} is not a regular file",
            policy.display()
        )));
    }
    Ok((source, meta.dev(), meta.ino()))
}

/// A shim directory's layer and target must be absolute, its target outside /proc, /sys and /dev,
/// and no other mount of the call may lie at or below its target: the overlay would cover it (and
/// a call of a session sandbox could no longer tell the two apart).
fn check_shim_dir(dir: &crate::wire::plan::ShimDir, mounted: &[&Path]) -> Result<(), SandboxError> {
    let target = &dir.target;
    if !dir.layer.is_absolute() || !target.is_absolute() || forbidden_target(target) {
        return Err(SandboxError::Plan(format!(
            "shim directory {} over {}: both must be absolute paths, the second outside /proc, \
             /sys and /dev",
            dir.layer.display(),
            target.display()
        )));
    }
    if let Some(t) = mounted.iter().find(|t| t.starts_with(target)) {
        return Err(SandboxError::Plan(format!(
            "shim directory {} cannot lie over {}: {} is mounted there",
            dir.layer.display(),
            target.display(),
            t.display()
        )));
    }
    Ok(())
}

fn forbidden_target(p: &Path) -> bool {
    p == Path::new("/") || ["/proc", "/sys", "/dev"].iter().any(|d| p.starts_with(d))
}

#[cfg(test)]
mod tests;
