//! The one checker for every host path a table declares for a confined process: `[sandbox]`
//! read and write paths, an MCP server's `read` and `cache` (from chock.toml or config.toml), and
//! any bind added later. Each is a hole in the sandbox, so each is held to the same rules against
//! the same context ([`HostPaths`]): not the whole machine or home, nothing the sandbox builds
//! itself, none of Chock's own directories (stored keys, the seal key, the logs), nothing the org
//! bundle forbids, no policy file, no write path over the real project or Chock's binaries, no
//! symlink as the declared path itself, no socket, and nothing under another declared write path
//! (where a confined process could swap it for a link). The check runs when a table is loaded and
//! again each time a process that binds the path starts; the sandbox then opens each path without
//! following a symlink when it binds it (chock-sandbox), so one swapped in after the check fails
//! the call instead of redirecting it.

use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

/// Whether a declared path is bound read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Bound read-only.
    Read,
    /// Bound read-write: its contents outlive the call.
    Write,
}

/// One path a table declares, with the field that declares it (`sandbox.write`,
/// `mcp.servers.npm.cache`), for errors and for the nesting check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredPath {
    /// The path, expanded and absolute.
    pub path: PathBuf,
    /// How it is bound.
    pub access: Access,
    /// The field declaring it.
    pub field: String,
}

/// What a host path check needs to know about the host. Built once per policy load
/// ([`crate::Policy::host_paths`]) so every table is checked against the same directories.
#[derive(Debug, Clone, Default)]
pub struct HostPaths {
    /// `$HOME`, for `~/` and for refusing the whole home directory.
    pub(crate) home: Option<PathBuf>,
    /// The real project directory (absolute when known).
    pub(crate) project_dir: Option<PathBuf>,
    /// The policy files being loaded (the project's chock.toml, the org bundle).
    pub(crate) policy_files: Vec<PathBuf>,
    /// Paths the org bundle forbids, each with the `file:line` of its entry.
    pub(crate) forbidden: Vec<(PathBuf, String)>,
    /// Chock's own directories on the host (config, data, state): stored API keys, the seal key,
    /// the session logs and the provider configuration. None of them may be seen from inside.
    pub(crate) chock_dirs: Vec<PathBuf>,
    /// The real directory of Chock's own binaries (`chock`, `chock-full`): readable (nothing in
    /// it is secret), never writable, or one call could replace the program the person runs
    /// next, unconfined.
    pub(crate) binaries: Vec<PathBuf>,
}

/// `path` and, when it exists and differs, where it really leads: a host path given through a
/// symlink (`$HOME` on a symlinked /home, a forbidden `~/.ssh` that links elsewhere) must be refused
/// under either name.
pub(crate) fn with_real(path: PathBuf) -> Vec<PathBuf> {
    match path.canonicalize() {
        Ok(real) if real != path => vec![path, real],
        _ => vec![path],
    }
}

/// Where every symlink met while resolving `path` lies (each link's own location, its parent
/// already resolved), in the order met, then where the resolution ends (a path whose last
/// components do not exist yet ends below the last one that does). A path whose resolution passes through a directory a
/// confined process can write is that process's to redirect, even when the link it put there
/// leads out again and neither the name written nor the final real path shows it.
pub(crate) fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    /// As the kernel's limit on links followed in one resolution.
    const MAX_LINKS: usize = 40;
    let mut met = Vec::new();
    let mut at = PathBuf::from("/");
    let mut rest: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    while let Some(part) = rest.pop() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) => at = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                at.pop();
            }
            Some(Component::Normal(_)) => {
                let next = at.join(&part);
                match std::fs::read_link(&next) {
                    Ok(target) if met.len() < MAX_LINKS => {
                        met.push(next);
                        rest.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| c.as_os_str().to_os_string()),
                        );
                    }
                    _ => at = next,
                }
            }
            _ => {}
        }
    }
    // Where it leads, found so far even when its end does not exist yet (then `canonicalize`
    // says nothing, and a confined process may be the one to make it).
    met.push(at);
    met
}

/// The real directory of the running binary (`/proc/self/exe`'s, symlinks resolved): where
/// `chock` and `chock-full` are installed side by side.
pub fn binaries_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    exe.parent().map(Path::to_path_buf)
}

/// Every directory no declared write path may overlap because of Chock's own binaries: the real
/// one ([`binaries_dir`]) and the one the person ran `chock` from (its `argv[0]`, which `chock`
/// hands on to `chock-full`: found on `$PATH` as a shell finds it, or a path), under both its
/// names. Run through a link (`~/.local/bin/chock`), that directory holds the link, and a call
/// that could write there would swap in a program the person runs next, unconfined.
pub fn binaries_dirs() -> Vec<PathBuf> {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    binaries_dirs_for(&arg0, std::env::var_os("PATH").as_deref(), &cwd)
}

/// [`binaries_dirs`] for a given `argv[0]`, `$PATH` and working directory.
pub(crate) fn binaries_dirs_for(
    arg0: &std::ffi::OsStr,
    path_var: Option<&std::ffi::OsStr>,
    cwd: &Path,
) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut dirs: Vec<PathBuf> = binaries_dir().into_iter().collect();
    let ran = if arg0.as_bytes().contains(&b'/') {
        Some(cwd.join(arg0))
    } else if arg0.is_empty() {
        None
    } else {
        path_var.and_then(|p| {
            std::env::split_paths(p)
                .filter(|d| d.is_absolute())
                .map(|d| d.join(arg0))
                .find(|f| f.is_file())
        })
    };
    let from = ran.and_then(|f| f.parent().map(Path::to_path_buf));
    for dir in from.into_iter().flat_map(with_real) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// Expands `~/`, requires an absolute path, and refuses `..` and `.` components.
pub(crate) fn expand(raw: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    if raw == "~" {
        return Err("is the whole home directory".into());
    }
    let path = if let Some(rest) = raw.strip_prefix("~/") {
        let Some(home) = home else {
            return Err("starts with `~/` but $HOME is not set".into());
        };
        home.join(rest)
    } else if raw.starts_with('~') {
        return Err("only `~/` is expanded (not `~user`)".into());
    } else {
        PathBuf::from(raw)
    };
    if !path.is_absolute() {
        return Err("must be absolute or start with `~/`".into());
    }
    let mut clean = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::RootDir => {}
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err("holds `.` or `..`: write the path it means".into());
            }
        }
    }
    Ok(clean)
}

impl HostPaths {
    /// The context known without a project or an org bundle: `$HOME`, Chock's own directories
    /// and its binaries. For tables read outside a policy load (config.toml's MCP servers): the
    /// full check runs again, with the project and the org bundle, when the server starts.
    pub fn for_host() -> HostPaths {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        HostPaths::with_own(home, crate::sources::chock_dirs_from_env())
    }

    /// The context of a `home` and the Chock directories its environment names (`chock_dirs`):
    /// those and the default ones under `home`, each under both its names, and the binaries'
    /// directories. The project, policy files and forbid list are the caller's to add.
    pub(crate) fn with_own(home: Option<PathBuf>, mut chock_dirs: Vec<PathBuf>) -> HostPaths {
        chock_dirs.extend(
            home.iter()
                .flat_map(|h| crate::sources::default_chock_dirs(h)),
        );
        HostPaths {
            home,
            chock_dirs: chock_dirs.into_iter().flat_map(with_real).collect(),
            binaries: binaries_dirs(),
            ..HostPaths::default()
        }
    }

    /// Expands a path as written (`~/` against this context's home).
    pub fn expand(&self, raw: &str) -> Result<PathBuf, String> {
        expand(raw, self.home.as_deref())
    }

    /// Checks one expanded path on its own; the error says why, without the path (the caller
    /// names it with its field).
    pub fn check(&self, path: &Path, access: Access) -> Result<(), String> {
        self.check_lexical(path, access)?;
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && meta.file_type().is_symlink()
        {
            let to = std::fs::read_link(path)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default();
            return Err(format!(
                "is a symlink{to}: declare the path it leads to; a declared path is bound \
                 without following links"
            ));
        }
        // A parent may be a link (a home on a symlinked /home): check where it really leads too.
        if let Ok(real) = path.canonicalize() {
            if real != path {
                self.check_lexical(&real, access)
                    .map_err(|why| format!("leads to {} which {why}", real.display()))?;
            }
            self.check_identity(&real, access)?;
            if std::fs::metadata(&real).is_ok_and(|m| m.file_type().is_socket()) {
                return Err(
                    "is a socket: a socket would let the sandbox talk to a host process".into(),
                );
            }
        }
        Ok(())
    }

    /// The org bundle's `forbid` list and Chock's own directories compared by identity (device
    /// and inode of the path and of each directory above it), not only by name: a host bind
    /// mount (`/mnt/home` showing `/home`) or a case-folding directory names the same directory
    /// under a path no name comparison matches, and the bind would show it all the same.
    fn check_identity(&self, real: &Path, access: Access) -> Result<(), String> {
        let declared = identities(real);
        let Some(&own) = declared.first() else {
            return Ok(());
        };
        let protected = self
            .forbidden
            .iter()
            .map(|(p, place)| (p, format!("which the org bundle forbids at {place}")))
            .chain(self.chock_dirs.iter().map(|p| {
                (
                    p,
                    "Chock's own directory, which nothing inside the sandbox may see".to_string(),
                )
            }));
        // Written: nor the real project, Chock's binaries or a policy file.
        let written = (access == Access::Write).then(|| {
            self.project_dir
                .iter()
                .map(|p| {
                    (
                        p,
                        "the real project, changed only through a reviewed apply".into(),
                    )
                })
                .chain(
                    self.binaries
                        .iter()
                        .map(|p| (p, "where Chock's own binaries are".to_string())),
                )
                .chain(
                    self.policy_files
                        .iter()
                        .map(|p| (p, "a policy file, which must stay read-only".to_string())),
                )
        });
        let protected = protected.chain(written.into_iter().flatten());
        for (path, why) in protected {
            let theirs = identities(path);
            let Some(&top) = theirs.first() else {
                continue;
            };
            // Inside the protected directory, or containing it, under whatever name.
            if declared.contains(&top) || theirs.contains(&own) {
                return Err(format!(
                    "is or overlaps {} under another name (a bind mount or a case-folding                      directory), {why}",
                    path.display()
                ));
            }
        }
        Ok(())
    }

    fn check_lexical(&self, path: &Path, access: Access) -> Result<(), String> {
        if path == Path::new("/") {
            return Err("is the whole filesystem".into());
        }
        for system in ["/proc", "/sys", "/dev"] {
            if path.starts_with(system) {
                return Err(format!(
                    "is under {system}, which the sandbox builds itself"
                ));
            }
        }
        if let Some(home) = &self.home {
            for home in with_real(home.clone()) {
                if home.starts_with(path) {
                    return Err(format!(
                        "is or contains the home directory {}",
                        home.display()
                    ));
                }
            }
        }
        for dir in &self.chock_dirs {
            if overlaps(dir, path) {
                return Err(format!(
                    "overlaps Chock's own directory {} (stored keys, the seal key, session logs, \
                     provider configuration, the daemon's socket), which nothing inside the \
                     sandbox may see",
                    dir.display()
                ));
            }
        }
        if access == Access::Write
            && let Some(dir) = self.binaries.iter().find(|dir| overlaps(dir, path))
        {
            return Err(format!(
                "overlaps {}, where Chock's own binaries are: a call could replace the program \
                 you run next, outside any sandbox",
                dir.display()
            ));
        }
        for file in &self.policy_files {
            if file == path {
                return Err("is a policy file, which the sandbox binds read-only itself".into());
            }
            if access == Access::Write && file.starts_with(path) {
                return Err(format!(
                    "contains the policy file {}, which must stay read-only",
                    file.display()
                ));
            }
        }
        if access == Access::Write
            && let Some(project) = &self.project_dir
            && overlaps(project, path)
        {
            return Err(format!(
                "overlaps the real project {}, which is changed only through a reviewed apply",
                project.display()
            ));
        }
        for (forbidden, place) in &self.forbidden {
            if overlaps(forbidden, path) {
                return Err(format!(
                    "overlaps {}, which the org bundle forbids at {place}",
                    forbidden.display()
                ));
            }
        }
        Ok(())
    }

    /// Checks every declared path of one process (or one table) together: each on its own, then
    /// none under another's write path. On failure, the index of the offending entry and why.
    pub fn check_all(&self, declared: &[DeclaredPath]) -> Result<(), (usize, String)> {
        for (i, d) in declared.iter().enumerate() {
            self.check(&d.path, d.access).map_err(|why| (i, why))?;
        }
        check_nesting(declared)
    }
}

/// The (device, inode) of `path` and of every directory above it, the path's own first; empty
/// when it does not exist.
fn identities(path: &Path) -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(own) = std::fs::metadata(path) else {
        return Vec::new();
    };
    let mut ids = vec![(own.dev(), own.ino())];
    ids.extend(
        path.ancestors()
            .skip(1)
            .filter_map(|a| std::fs::metadata(a).ok())
            .map(|m| (m.dev(), m.ino())),
    );
    ids
}

/// Whether one path contains the other.
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// A declared path lying under another declared write path is refused, by the names written and
/// by where they really lead, and by every link met on the way there (`links_on_the_way`): a
/// confined process can write there, so it could replace that path
/// (or a directory above it) with a symlink to anywhere on the host (`~/.ssh`), and the next
/// process would bind the link's target.
pub fn check_nesting(declared: &[DeclaredPath]) -> Result<(), (usize, String)> {
    let writes: Vec<&DeclaredPath> = declared
        .iter()
        .filter(|d| d.access == Access::Write)
        .collect();
    for (i, d) in declared.iter().enumerate() {
        if let Some(why) = under_write_path(d, &writes) {
            return Err((i, why));
        }
    }
    Ok(())
}

/// Why `d` lies under one of `writes` (strictly: a path is not under itself), if it does.
pub fn under_write_path(d: &DeclaredPath, writes: &[&DeclaredPath]) -> Option<String> {
    let names = with_real(d.path.clone());
    let links = links_on_the_way(&d.path);
    writes.iter().find_map(|outer| {
        let outer_names = with_real(outer.path.clone());
        let nested = names
            .iter()
            .chain(&links)
            .any(|name| outer_names.iter().any(|w| name.starts_with(w) && name != w));
        nested.then(|| {
            format!(
                "lies under the write path {} ({}), where a confined process could replace it \
                 with a link to anywhere on the host; declare only the outer path",
                outer.path.display(),
                outer.field
            )
        })
    })
}

/// The first place a confined process sees (`seen`: each with its words, "the project", "its read
/// path") that contains one of `writes` or lies inside one, compared by the names written and by
/// where they really lead: the words and path of that place, and the write path. A process given a
/// view of what another process writes runs what that one left there (an MCP server's `npx`
/// cache that the agent's `npm install` also writes).
pub fn sees_a_write_path<'a>(
    seen: &'a [(&'a str, PathBuf)],
    writes: &'a [PathBuf],
) -> Option<(&'a str, &'a Path, &'a Path)> {
    writes.iter().find_map(|write| {
        let write_names = with_real(write.clone());
        seen.iter().find_map(|(what, place)| {
            let through = links_on_the_way(place);
            let clash = with_real(place.clone())
                .iter()
                .any(|p| write_names.iter().any(|w| overlaps(p, w)))
                || through
                    .iter()
                    .any(|l| write_names.iter().any(|w| l.starts_with(w) && l != w));
            clash.then_some((*what, place.as_path(), write.as_path()))
        })
    })
}

#[cfg(test)]
mod tests;
