//! `chock policy show`: the `[sandbox]` a session of this project would run under, on this host,
//! with what each `toolchains` name expanded to and what is never shown.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chock_policy::Policy;

use crate::say::say;

/// A path as the person wrote it: `~/` for one in the home.
fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

fn list(paths: &[PathBuf], home: Option<&Path>) -> String {
    if paths.is_empty() {
        return "(none)".into();
    }
    paths
        .iter()
        .map(|p| shown(p, home))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn show(policy: &Policy) -> anyhow::Result<ExitCode> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let home = home.as_deref();
    let file = |f: Option<&Path>| f.map_or("(none)".to_string(), |p| p.display().to_string());
    say!("policy file:  {}", file(policy.project_file()));
    say!("org bundle:   {}", file(policy.org_file()));
    let sandbox = policy.sandbox();
    say!("[sandbox]");
    say!("  read:  {}", list(&sandbox.read, home));
    say!("  write: {}", list(&sandbox.write, home));
    let env = if sandbox.env.is_empty() {
        "(none)".to_string()
    } else {
        sandbox.env.join(" ")
    };
    say!("  env:   {env}");
    for t in &sandbox.toolchains {
        let what = chock_policy::toolchains::profile(&t.name);
        say!("toolchain {}: {}", t.name, what.map_or("", |p| p.what));
        say!("  from:  {}", list(&t.from, home));
        say!("  found: {}", list(&t.found, home));
        say!("  read:  {}", list(&t.read, home));
        for (path, why) in t.write.iter().zip(&t.write_why) {
            match t.set_env.iter().find(|(_, dir)| dir == path) {
                Some((var, _)) => say!(
                    "  write: {} (this project's own copy, as ${var}: {why})",
                    shown(path, home)
                ),
                None => say!(
                    "  write: {} (shared with the host: {why})",
                    shown(path, home)
                ),
            }
        }
        say!("  env:   {}", t.env.join(" "));
        if let Some(p) = what.filter(|p| !p.in_project.is_empty()) {
            say!(
                "  kept in the project (the session's own copy): {}",
                p.in_project.join(" ")
            );
        }
    }
    let masked: Vec<String> = chock_sandbox::HOME_CREDENTIALS
        .iter()
        .map(|c| format!("~/{c}"))
        .collect();
    say!(
        "never shown, even inside a shown directory: {}",
        masked.join(" ")
    );
    Ok(ExitCode::SUCCESS)
}
