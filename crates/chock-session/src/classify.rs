//! Which `exec.*` action a command is: where its program would be found inside the sandbox, decided
//! lexically on the host before anything runs.

use std::path::{Component, Path, PathBuf};

use chock_policy::{Action, ExecClass};

/// Directories the sandbox binds from the host's system (read-only).
const SYSTEM_PREFIXES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Characters that mean the word was meant for a shell (expansions, globs, quoting, operators):
/// no class can be trusted for such a program name.
const SHELL_CHARS: &[char] = &[
    '$', '`', '*', '?', '[', ']', '{', '}', '~', ';', '|', '&', '<', '>', '(', ')', '\\', '"',
    '\'', ' ', '\t', '\n',
];

/// What the classifier knows about the sandbox a command would run in.
#[derive(Debug, Clone)]
pub struct ExecContext<'a> {
    /// The project's path (the workspace is mounted there).
    pub project: &'a Path,
    /// Directories whose content is also part of the workspace view (the overlay's upper layer).
    pub workspace_layers: &'a [PathBuf],
    /// Declared extra read and write paths.
    pub extra: &'a [PathBuf],
    /// The store paths of the dev shell's closure (`exec.devshell.*`; any other store path is
    /// `exec.nix.store.*`).
    pub devshell: &'a [PathBuf],
    /// Where the store's paths lie on the host, when it is not `/nix/store` itself.
    pub store: Option<&'a Path>,
    /// The sandbox's PATH.
    pub path: &'a str,
    /// The working directory inside the sandbox.
    pub cwd: &'a Path,
}

/// Where a program was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// `exec.<class>.<program>`, the class by where the program was found; `exec.unparsed` when
    /// that cannot be told.
    pub action: Action,
    /// The path the program resolved to, when it did.
    pub resolved: Option<PathBuf>,
}

fn unparsed() -> Classified {
    Classified {
        action: Action::exec_unparsed(),
        resolved: None,
    }
}

fn has_parent_dir(p: &Path) -> bool {
    p.components().any(|c| matches!(c, Component::ParentDir))
}

/// Removes `.` components (lexically; `..` is refused before this).
fn normalise(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

impl ExecContext<'_> {
    fn class_of(&self, path: &Path) -> Option<ExecClass> {
        if path.starts_with(self.project) {
            return Some(ExecClass::Workspace);
        }
        if let Some(store_path) = crate::nix::store_path_of(path) {
            return Some(if self.devshell.contains(&store_path) {
                ExecClass::Devshell
            } else {
                ExecClass::NixStore
            });
        }
        if self.extra.iter().any(|e| path.starts_with(e)) {
            return Some(ExecClass::Extra);
        }
        if SYSTEM_PREFIXES.iter().any(|s| path.starts_with(s)) {
            return Some(ExecClass::System);
        }
        None
    }

    /// Whether `path` (inside the sandbox) names an existing file, looking at the host paths the
    /// sandbox shows there.
    fn exists(&self, path: &Path, class: ExecClass) -> bool {
        if class == ExecClass::Workspace {
            let rel = path.strip_prefix(self.project).unwrap_or(path);
            return self.project.join(rel).is_file()
                || self.workspace_layers.iter().any(|l| l.join(rel).is_file());
        }
        if let (Some(store), Ok(rel)) = (self.store, path.strip_prefix(chock_sandbox::STORE_DIR))
            && matches!(class, ExecClass::Devshell | ExecClass::NixStore)
        {
            return store.join(rel).is_file();
        }
        path.is_file()
    }

    fn classified(&self, path: PathBuf, class: ExecClass) -> Classified {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match Action::exec(class, &name) {
            Ok(action) => Classified {
                action,
                resolved: Some(path),
            },
            Err(_) => unparsed(),
        }
    }

    /// The action for running `argv0`.
    pub fn classify(&self, argv0: &str) -> Classified {
        if argv0.is_empty() || argv0.contains(SHELL_CHARS) {
            return unparsed();
        }
        let p = Path::new(argv0);
        if argv0.contains('/') {
            if has_parent_dir(p) {
                return unparsed();
            }
            let abs = normalise(&if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.cwd.join(p)
            });
            return match self.class_of(&abs) {
                Some(class) => self.classified(abs, class),
                None => unparsed(),
            };
        }
        for dir in self.path.split(':') {
            let dir = Path::new(dir);
            if !dir.is_absolute() || has_parent_dir(dir) {
                continue; // a relative PATH entry depends on the cwd: skip it, as execvp would differ
            }
            let candidate = normalise(&dir.join(argv0));
            let Some(class) = self.class_of(&candidate) else {
                continue;
            };
            if self.exists(&candidate, class) {
                return self.classified(candidate, class);
            }
        }
        unparsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx<'a>(project: &'a Path, extra: &'a [PathBuf], path: &'a str) -> ExecContext<'a> {
        ExecContext {
            project,
            workspace_layers: &[],
            extra,
            devshell: &[],
            store: None,
            path,
            cwd: project,
        }
    }

    #[test]
    fn system_programs_by_path_lookup() {
        let project = Path::new("/nonexistent/project");
        let c = ctx(project, &[], "/usr/local/bin:/usr/bin:/bin");
        assert_eq!(c.classify("sh").action.as_str(), "exec.system.sh");
        assert_eq!(c.classify("/bin/sh").action.as_str(), "exec.system.sh");
    }

    #[test]
    fn workspace_and_extra() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("p");
        let tools = dir.path().join("tools");
        std::fs::create_dir_all(project.join("scripts")).unwrap();
        std::fs::create_dir_all(tools.join("bin")).unwrap();
        std::fs::write(project.join("scripts/test.sh"), "").unwrap();
        std::fs::write(tools.join("bin/cargo"), "").unwrap();
        let extra = vec![tools.clone()];
        let path = format!("{}:/usr/bin", tools.join("bin").display());
        let c = ctx(&project, &extra, &path);
        assert_eq!(
            c.classify("./scripts/test.sh").action.as_str(),
            "exec.workspace.test.sh"
        );
        assert_eq!(c.classify("cargo").action.as_str(), "exec.extra.cargo");
        assert_eq!(
            c.classify("/nix/store/abc-hello/bin/hello").action.as_str(),
            "exec.nix.store.hello"
        );
    }

    #[test]
    fn what_cannot_be_resolved_lexically_is_unparsed() {
        let project = Path::new("/p");
        let c = ctx(project, &[], "/usr/bin");
        for word in [
            "../x",
            "/usr/bin/../../tmp/x",
            "$HOME/x",
            "`id`",
            "a b",
            "",
            "no-such-program-here",
            "/opt/x",
        ] {
            assert_eq!(c.classify(word).action.as_str(), "exec.unparsed", "{word}");
        }
    }
}
