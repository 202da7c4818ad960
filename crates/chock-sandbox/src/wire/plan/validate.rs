//! The checks of a plan made before any kernel is touched: absolute paths without `..`, nothing
//! the overlay option syntax would misread, an argv that is not empty, and the combinations of
//! workspace and overlay that can be built.

use std::path::Path;

use super::{OwnOverlay, Plan, STORE_DIR, WorkspaceMount};
use crate::wire::error::SandboxError;

impl Plan {
    /// Checks what can be checked without touching the kernel: absolute paths, no `..`, no path
    /// that the overlay option syntax would misread, an argv that is not empty.
    pub fn validate(&self) -> Result<(), SandboxError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SandboxError::Plan("argv is empty".into()));
        }
        if self.argv.iter().any(|a| a.contains('\0')) {
            return Err(SandboxError::Plan("an argument contains a NUL byte".into()));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(SandboxError::Plan(format!(
                    "environment variable `{k}` is malformed"
                )));
            }
        }
        let mut paths: Vec<(&str, &Path)> = vec![
            ("cwd", &self.cwd),
            ("home", &self.home),
            ("project_path", &self.project_path),
        ];
        if self.shared_overlay && !matches!(self.workspace, WorkspaceMount::Overlay { .. }) {
            return Err(SandboxError::Plan(
                "a shared overlay needs an overlay workspace, not a bind".into(),
            ));
        }
        match &self.workspace {
            WorkspaceMount::Bind { source } => paths.push(("workspace source", source)),
            WorkspaceMount::ReadOnly { source } => {
                paths.push(("workspace source", source));
                // The real project is never writable from inside, not even a part of it.
                if let Some(p) = self
                    .extra_write
                    .iter()
                    .find(|p| p.starts_with(&self.project_path) || p.starts_with(source))
                {
                    return Err(SandboxError::Plan(format!(
                        "write path {} is inside the project {}, which this call sees read-only",
                        p.display(),
                        self.project_path.display()
                    )));
                }
            }
            WorkspaceMount::Overlay { lower, upper, work } => {
                for (what, p) in [
                    ("overlay lower", lower),
                    ("overlay upper", upper),
                    ("overlay work", work),
                ] {
                    paths.push((what, p));
                }
            }
        }
        if let Some(p) = &self.policy_file {
            paths.push(("policy_file", p));
            if !p.starts_with(&self.project_path) {
                return Err(SandboxError::Plan(format!(
                    "policy file {} is not inside the project {}",
                    p.display(),
                    self.project_path.display()
                )));
            }
        }
        for p in &self.extra_read {
            paths.push(("extra read path", p));
        }
        for p in &self.extra_write {
            paths.push(("extra write path", p));
        }
        for s in &self.store_paths {
            paths.push(("store path source", &s.source));
            paths.push(("store path", &s.target));
            // Directly under the store: the bind must never cover the store itself or land
            // anywhere else in the tree.
            if s.target.parent() != Some(Path::new(STORE_DIR)) {
                return Err(SandboxError::Plan(format!(
                    "store path {} is not directly under {STORE_DIR}",
                    s.target.display()
                )));
            }
        }
        for (what, p) in paths {
            if !p.is_absolute() {
                return Err(SandboxError::Plan(format!(
                    "{what} {} is not absolute",
                    p.display()
                )));
            }
            if p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(SandboxError::Plan(format!(
                    "{what} {} contains `..`",
                    p.display()
                )));
            }
            if p.as_os_str().as_encoded_bytes().contains(&0) {
                return Err(SandboxError::Plan(format!("{what} contains a NUL byte")));
            }
            if p == Path::new("/") {
                return Err(SandboxError::Plan(format!("{what} is `/`")));
            }
        }
        if self.own_overlay == OwnOverlay::InMemory
            && (self.shared_overlay || !matches!(self.workspace, WorkspaceMount::Overlay { .. }))
        {
            return Err(SandboxError::Plan(
                "own_overlay = in_memory needs an overlay workspace the call mounts itself".into(),
            ));
        }
        if self.limits.tmp_size_bytes == 0 {
            return Err(SandboxError::Plan("limits.tmp_size_bytes is 0".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::StorePath;
    use super::*;

    #[test]
    fn validate_refuses_relative_and_dotdot_paths() {
        let mut plan = Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Bind {
                source: "/s".into(),
            },
            "/p".into(),
        )
        .build_with_env(&[]);
        assert!(plan.validate().is_ok());
        plan.extra_read = vec!["rel".into()];
        assert!(
            plan.validate()
                .unwrap_err()
                .to_string()
                .contains("not absolute")
        );
        plan.extra_read = vec!["/a/../b".into()];
        assert!(plan.validate().unwrap_err().to_string().contains(".."));
        plan.extra_read = vec![];
        // A store path is bound directly under the store, never over it or elsewhere.
        for (target, ok) in [
            ("/nix/store/abc-x", true),
            ("/nix/store", false),
            ("/nix/store/abc-x/bin", false),
            ("/etc/abc-x", false),
        ] {
            plan.store_paths = vec![StorePath {
                source: "/s/nix/store/abc-x".into(),
                target: target.into(),
            }];
            assert_eq!(plan.validate().is_ok(), ok, "{target}");
        }
        plan.store_paths = vec![];
        plan.policy_file = Some("/elsewhere/chock.toml".into());
        assert!(
            plan.validate()
                .unwrap_err()
                .to_string()
                .contains("not inside the project")
        );
    }
}
