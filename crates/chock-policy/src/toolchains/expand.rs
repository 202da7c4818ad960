//! Expanding `[sandbox] toolchains` against this host, at load: where each stack's programs are,
//! which of a profile's directories exist, and every resulting path through [`HostPaths`].

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::{ExpandedToolchain, Place, Profile, profile, profile_names};
use crate::error::{ErrorKind, Located, PolicyError};
use crate::host_paths::{Access, HostPaths};
use crate::sandbox::{SandboxConfig, check_env_name};

/// Directories every call sees already (chock-sandbox's base set): a program found there, or a
/// profile directory inside one, adds nothing.
const SHOWN_ANYWAY: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What expansion reads of the host: its home and its environment (the process's, or a test's).
pub(crate) struct Host<'a> {
    pub home: Option<&'a Path>,
    pub var: &'a dyn Fn(&str) -> Option<OsString>,
    /// The real project directory, for its own copy of a per-project cache.
    pub project: Option<&'a Path>,
}

impl Host<'_> {
    fn place(&self, place: &Place) -> Option<PathBuf> {
        let from_env = place
            .env
            .and_then(|name| (self.var)(name))
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let base = match from_env {
            Some(p) => p,
            None if place.default.starts_with('/') => PathBuf::from(place.default),
            None => self.home?.join(place.default),
        };
        Some(if place.sub.is_empty() {
            base
        } else {
            base.join(place.sub)
        })
    }

    /// This project's own copy of the cache `name` (`$XDG_CACHE_HOME`, else `~/.cache`, then
    /// [`super::project_cache_dir`]).
    fn project_cache(&self, name: &str) -> Option<PathBuf> {
        let project = self.project?;
        let cache_home = (self.var)("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| self.home.map(|h| h.join(".cache")))?;
        Some(super::project_cache_dir(&cache_home, project).join(name))
    }

    /// Where `program` is on the host's `PATH`, as a shell finds it.
    pub(crate) fn which(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = (self.var)("PATH")?;
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|f| {
                std::fs::metadata(f)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }
}

fn shown_anyway(p: &Path) -> bool {
    SHOWN_ANYWAY.iter().any(|d| p.starts_with(d))
}

/// What `profile` opens on this host (nothing checked yet). Err: none of its programs is here.
pub(crate) fn expand(profile: &Profile, host: &Host<'_>) -> Result<ExpandedToolchain, String> {
    let found: Vec<PathBuf> = profile
        .programs
        .iter()
        .filter_map(|p| host.which(p))
        .collect();
    if found.is_empty() {
        return Err(format!(
            "toolchain `{}` is not on this host: none of {} is on $PATH (install it, or remove \
             \"{}\" from sandbox.toolchains)",
            profile.name,
            profile
                .programs
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", "),
            profile.name
        ));
    }
    let mut out = ExpandedToolchain {
        name: profile.name.to_string(),
        found: found.clone(),
        ..ExpandedToolchain::default()
    };
    let add_read = |p: PathBuf, out: &mut ExpandedToolchain| {
        if !shown_anyway(&p) && !out.read.iter().any(|r| p.starts_with(r)) && p.is_dir() {
            out.read.push(p);
        }
    };
    for place in profile.read {
        if let Some(p) = host.place(place) {
            add_read(p, &mut out);
        }
    }
    for program in &found {
        let real = program.canonicalize().unwrap_or_else(|_| program.clone());
        let mut dirs = vec![program.parent(), real.parent()];
        if profile.program_root {
            dirs.push(real.parent().and_then(Path::parent));
        }
        for dir in dirs.into_iter().flatten() {
            add_read(dir.to_path_buf(), &mut out);
        }
    }
    for cache in profile.caches {
        let own = match (cache.per_project, cache.place.env) {
            // Without a project or a cache home there is no copy to give: the cache is not
            // shown at all (the tool writes into the call's throwaway home), never shared.
            (Some(name), Some(var)) => match host.project_cache(name) {
                Some(dir) => Some((var, dir)),
                None => continue,
            },
            _ => None,
        };
        let Some(p) = own
            .as_ref()
            .map(|(_, dir)| dir.clone())
            .or_else(|| host.place(&cache.place))
        else {
            continue;
        };
        if let Some((var, dir)) = own {
            out.set_env.push((var.to_string(), dir));
        }
        out.write.push(p);
        out.write_why.push(cache.why);
    }
    out.env = profile.env.iter().map(|s| s.to_string()).collect();
    Ok(out)
}

/// Expands a `toolchains` list (a project's `[sandbox]`, or the person's config.toml) into
/// `sandbox` (after the hand-written paths and names already there, which win over a profile's
/// same path), checking every path with `ctx`. Each expansion records `loc`'s file as naming it.
/// Each added path's span (the toolchain's entry) goes to `read_spans` / `write_spans`, for the
/// nesting check's error.
pub(crate) fn apply(
    loc: &Located<'_>,
    list: Vec<Spanned<String>>,
    ctx: &HostPaths,
    host: &Host<'_>,
    sandbox: &mut SandboxConfig,
    spans: (&mut Vec<Range<usize>>, &mut Vec<Range<usize>>),
) -> Result<(), PolicyError> {
    let (read_spans, write_spans) = spans;
    for item in list {
        let span = item.span();
        let bad = |why: String| loc.error(span.clone(), ErrorKind::Toolchain(why));
        let name = item.get_ref();
        if let Some(t) = sandbox.toolchains.iter_mut().find(|t| &t.name == name) {
            // Named by both files (or twice): expanded once, every file that named it said.
            if !t.from.iter().any(|f| f == loc.file) {
                t.from.push(loc.file.to_path_buf());
            }
            continue;
        }
        let Some(profile) = profile(name) else {
            return Err(bad(format!(
                "sandbox.toolchains: `{name}` is not a shipped toolchain (known: {})",
                profile_names().join(", ")
            )));
        };
        let mut expanded =
            expand(profile, host).map_err(|e| bad(format!("sandbox.toolchains: {e}")))?;
        let taken = |p: &PathBuf, s: &SandboxConfig| s.read.contains(p) || s.write.contains(p);
        expanded.read.retain(|p| !taken(p, sandbox));
        let (write, why): (Vec<PathBuf>, Vec<&'static str>) = expanded
            .write
            .iter()
            .cloned()
            .zip(expanded.write_why.iter().copied())
            .filter(|(p, _)| !taken(p, sandbox))
            .unzip();
        (expanded.write, expanded.write_why) = (write, why);
        for (paths, access) in [
            (&expanded.read, Access::Read),
            (&expanded.write, Access::Write),
        ] {
            for p in paths {
                ctx.check(p, access).map_err(|why| {
                    bad(format!(
                        "sandbox.toolchains: `{name}` expands to {} ({}), which {why}",
                        p.display(),
                        if access == Access::Read {
                            "read"
                        } else {
                            "write"
                        }
                    ))
                })?;
            }
        }
        for env in &expanded.env {
            check_env_name(env).map_err(|why| bad(format!("sandbox.toolchains: {why}")))?;
        }
        // Only a cache every check passed is made on the host (so the first session's downloads
        // persist): private, as the tool would make it.
        for p in expanded.write.iter().filter(|p| !p.exists()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(p)
                .map_err(|e| {
                    bad(format!(
                        "sandbox.toolchains: cannot make the cache {}: {e}",
                        p.display()
                    ))
                })?;
        }
        read_spans.extend(expanded.read.iter().map(|_| span.clone()));
        write_spans.extend(expanded.write.iter().map(|_| span.clone()));
        sandbox.read.extend(expanded.read.iter().cloned());
        sandbox.write.extend(expanded.write.iter().cloned());
        for env in &expanded.env {
            if !sandbox.env.contains(env) {
                sandbox.env.push(env.clone());
            }
        }
        expanded.from.push(loc.file.to_path_buf());
        for (var, dir) in &expanded.set_env {
            if expanded.write.contains(dir) {
                sandbox.set_env.retain(|(n, _)| n != var);
                sandbox.set_env.push((var.clone(), dir.clone()));
            }
        }
        sandbox.toolchains.push(expanded);
    }
    Ok(())
}

/// The host as the process sees it: `$HOME` from `ctx` and the process's environment.
pub(crate) fn process_var(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

#[cfg(test)]
mod tests;
