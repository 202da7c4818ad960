//! The builder of a call's mount steps: each helper appends the steps of one kind of mount (a
//! directory chain, a tmpfs, a bind, a small file copied) and remembers which paths the tree
//! already made, so that `build_tree` (mounts.rs) reads as the list of what is mounted where.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, Step, cstr, old_root_path, under_old_root};

pub(crate) struct Builder {
    pub(crate) steps: Vec<Step>,
    pub(crate) made: BTreeSet<PathBuf>,
}

impl Builder {
    pub(crate) fn push(&mut self, op: Op, layer: Layer, label: String) {
        self.steps.push(Step {
            op,
            layer,
            label,
            optional: false,
        });
    }

    /// Mkdir steps for `dir` and every missing ancestor.
    pub(crate) fn mkdirs(&mut self, dir: &Path, layer: Layer) -> Result<(), SandboxError> {
        let mut acc = PathBuf::from("/");
        for c in dir.components() {
            if let Component::Normal(n) = c {
                acc.push(n);
                if self.made.insert(acc.clone()) {
                    let path = cstr(acc.as_os_str().as_bytes())?;
                    self.push(
                        Op::Mkdir { path, mode: 0o755 },
                        layer,
                        format!("mkdir {}", acc.display()),
                    );
                }
            }
        }
        Ok(())
    }

    /// A mount point for `target`: a directory, or an empty file when `source_is_dir` is false.
    pub(crate) fn mount_point(
        &mut self,
        target: &Path,
        source_is_dir: bool,
        layer: Layer,
    ) -> Result<(), SandboxError> {
        if source_is_dir {
            self.mkdirs(target, layer)
        } else {
            if let Some(parent) = target.parent() {
                self.mkdirs(parent, layer)?;
            }
            if self.made.insert(target.to_path_buf()) {
                let path = cstr(target.as_os_str().as_bytes())?;
                self.push(
                    Op::Touch { path },
                    layer,
                    format!("create {}", target.display()),
                );
            }
            Ok(())
        }
    }

    pub(crate) fn bind(
        &mut self,
        source: &Path,
        target: &Path,
        readonly: bool,
        layer: Layer,
    ) -> Result<(), SandboxError> {
        self.bind_as(source, target, readonly, layer, Bound::ByPath)
    }

    /// A host program bound read-only over a file the tree already has (`Plan::shims`): no
    /// mount point is made, so a target missing from the tree fails the step (rule 1) instead
    /// of a file being created where nothing was to hide.
    pub(crate) fn shim(&mut self, source: &Path, target: &Path) -> Result<(), SandboxError> {
        let label = format!(
            "ro bind {} -> {} (shim)",
            source.display(),
            target.display()
        );
        let op = Op::Bind {
            source: under_old_root(source)?,
            target: cstr(target.as_os_str().as_bytes())?,
            readonly: true,
            devices: false,
        };
        self.push(op, Layer::Filesystem, label);
        Ok(())
    }

    /// Host programs shown over files of a directory the tree already has (`Plan::shim_dirs`):
    /// one read-only overlay whose upper lower layer is the host's `layer` (a program under each
    /// name it hides) and whose bottom layer is the tree's own `target`, so hiding any number of
    /// the directory's files is one mount. A target missing from the tree fails the step (rule 1).
    pub(crate) fn shim_dir(&mut self, layer: &Path, target: &Path) -> Result<(), SandboxError> {
        let mut data = b"lowerdir=".to_vec();
        escape_layer(&mut data, &old_root_path(layer));
        data.push(b':');
        escape_layer(&mut data, target);
        let op = Op::Overlay {
            target: cstr(target.as_os_str().as_bytes())?,
            data: cstr(data)?,
            readonly: true,
        };
        let label = format!(
            "ro overlay {} over {} (shims)",
            layer.display(),
            target.display()
        );
        self.push(op, Layer::Filesystem, label);
        Ok(())
    }

    /// A bind of a path a table declared: through a descriptor opened without following any
    /// link ([`Op::BindDeclared`]).
    pub(crate) fn bind_declared(
        &mut self,
        source: &Path,
        target: &Path,
        readonly: bool,
    ) -> Result<(), SandboxError> {
        self.bind_as(source, target, readonly, Layer::Filesystem, Bound::Declared)
    }

    fn bind_as(
        &mut self,
        source: &Path,
        target: &Path,
        readonly: bool,
        layer: Layer,
        how: Bound,
    ) -> Result<(), SandboxError> {
        let is_dir = source.is_dir();
        self.mount_point(target, is_dir, layer)?;
        let label = match (readonly, source == target) {
            (true, true) => format!("ro bind {}", target.display()),
            (false, true) => format!("rw bind {}", target.display()),
            (true, false) => format!("ro bind {} -> {}", source.display(), target.display()),
            (false, false) => format!("rw bind {} -> {}", source.display(), target.display()),
        };
        let (source, target) = (
            under_old_root(source)?,
            cstr(target.as_os_str().as_bytes())?,
        );
        let op = match how {
            Bound::ByPath => Op::Bind {
                source,
                target,
                readonly,
                devices: false,
            },
            Bound::Declared => Op::BindDeclared {
                source,
                target,
                readonly,
            },
        };
        self.push(op, layer, label);
        Ok(())
    }

    pub(crate) fn tmpfs(
        &mut self,
        target: &Path,
        mode: u32,
        size: u64,
        layer: Layer,
    ) -> Result<(), SandboxError> {
        self.mkdirs(target, layer)?;
        let data = cstr(format!("mode={mode:o},size={size}"))?;
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        let op = Op::Tmpfs {
            target: cstr(target.as_os_str().as_bytes())?,
            data,
            flags,
        };
        self.push(
            op,
            layer,
            format!("tmpfs {} (size {})", target.display(), human_size(size)),
        );
        Ok(())
    }

    /// Recreates a host symlink, copies a small regular file into the fresh root, or binds the
    /// host entry read-only.
    ///
    /// A world-readable regular file of at most [`COPY_MAX_BYTES`] (the base set's `/etc` files)
    /// is copied (see [`Op::CopyFile`]): the call sees it as it was when its tree was built,
    /// read-only like the rest of the root. Only a file anyone may read: the init copies it as the
    /// call's user, where a bind shows an unreadable file as it is.
    pub(crate) fn copy_entry(&mut self, host: &Path, layer: Layer) -> Result<(), SandboxError> {
        let Ok(meta) = std::fs::symlink_metadata(host) else {
            return Ok(());
        };
        let small_file = meta.is_file() && meta.len() <= COPY_MAX_BYTES && meta.mode() & 0o004 != 0;
        if meta.file_type().is_symlink() {
            let text = std::fs::read_link(host)
                .map_err(|e| SandboxError::host(format!("readlink {}", host.display()), e))?;
            if let Some(parent) = host.parent() {
                self.mkdirs(parent, layer)?;
            }
            self.made.insert(host.to_path_buf());
            let op = Op::Symlink {
                text: cstr(text.as_os_str().as_bytes())?,
                link: cstr(host.as_os_str().as_bytes())?,
            };
            self.push(
                op,
                layer,
                format!("symlink {} -> {}", host.display(), text.display()),
            );
            Ok(())
        } else if small_file {
            if let Some(parent) = host.parent() {
                self.mkdirs(parent, layer)?;
            }
            if !self.made.insert(host.to_path_buf()) {
                return Err(SandboxError::Plan(format!(
                    "{} is in the tree twice",
                    host.display()
                )));
            }
            let op = Op::CopyFile {
                source: under_old_root(host)?,
                target: cstr(host.as_os_str().as_bytes())?,
            };
            self.push(
                op,
                layer,
                format!("copy {} (read-only root)", host.display()),
            );
            Ok(())
        } else if meta.is_dir() || meta.is_file() {
            self.bind(host, host, true, layer)
        } else {
            Ok(())
        }
    }
}

/// How a bind names its source.
#[derive(Clone, Copy)]
enum Bound {
    /// By its path (the base set, the workspace: the host's own files).
    ByPath,
    /// Through a descriptor opened without following links (a declared path).
    Declared,
}

/// The largest host file [`Builder::copy_entry`] copies rather than binds.
const COPY_MAX_BYTES: u64 = 256 << 10;

/// Appends `path` as a layer of an overlay's options: `\\`, `:` (the layer separator) and `,`
/// (the option separator) escaped with a backslash, so any path can be a layer.
pub(crate) fn escape_layer(out: &mut Vec<u8>, path: &Path) {
    for &c in path.as_os_str().as_bytes() {
        if matches!(c, b'\\' | b':' | b',') {
            out.push(b'\\');
        }
        out.push(c);
    }
}

pub(crate) fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}
