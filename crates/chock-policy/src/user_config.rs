//! The person's own toolchains: `[sandbox] toolchains` in `$XDG_CONFIG_HOME/chock/config.toml`.
//!
//! A person who uses Rust in every project may list it once in their own configuration rather
//! than in each chock.toml. The list is read by the host when the policy is loaded (before any
//! sandbox exists, rule 2), from a file in Chock's configuration directory, which no `[sandbox]`
//! path may reach: the agent can neither write it nor widen what it names. Each name goes through
//! the same profile expansion and the same [`HostPaths`] checks as a project's, and the union of
//! both lists is what the sandbox shows; each expansion says which file named it.
//!
//! Only `[sandbox] toolchains` is policy in config.toml: the rest of the file (providers, prices)
//! is the agent's and is read by it. A `[sandbox]` here may hold nothing else, so a path or an
//! environment name a person meant as policy is refused rather than silently ignored.

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::error::{ErrorKind, Located, PolicyError};
use crate::host_paths::{HostPaths, check_nesting};
use crate::sandbox::SandboxConfig;
use crate::sources::Source;

/// The file's name in Chock's configuration directory.
pub const USER_CONFIG_FILE: &str = "config.toml";

/// Where the person's configuration is (`$XDG_CONFIG_HOME/chock/config.toml`, else
/// `~/.config/chock/config.toml`), as chock-dirs resolves it for the agent too; None without a home.
pub fn user_config_path() -> Option<PathBuf> {
    chock_dirs::config_root()
        .ok()
        .map(|dir| dir.join(USER_CONFIG_FILE))
}

/// The part of config.toml that is policy. Other tables are the agent's and are not read here.
#[derive(Debug, Deserialize)]
struct RawUser {
    sandbox: Option<RawUserSandbox>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUserSandbox {
    toolchains: Option<Spanned<Vec<Spanned<String>>>>,
}

/// Expands the toolchains `user` names into `sandbox` (after the project's, whose same names and
/// paths win), checking every path with `ctx` and the merged paths' nesting. Errors name
/// config.toml, its line and the field.
pub(crate) fn apply_user_toolchains(
    user: &Source,
    ctx: &HostPaths,
    sandbox: &mut SandboxConfig,
) -> Result<(), PolicyError> {
    let loc = Located {
        file: &user.path,
        text: &user.text,
    };
    let raw: RawUser = toml::from_str(&user.text).map_err(|err| {
        let span = err.span().unwrap_or(0..0);
        let message = err.message().trim();
        let message = if message.starts_with("unknown field") {
            format!("{message}: only `toolchains` is read from [sandbox] in config.toml")
        } else {
            message.to_owned()
        };
        loc.error(span, ErrorKind::Toml(message))
    })?;
    let Some(list) = raw.sandbox.and_then(|s| s.toolchains) else {
        return Ok(());
    };
    let (read_before, write_before) = (sandbox.read.len(), sandbox.write.len());
    let (mut read_spans, mut write_spans): (Vec<Range<usize>>, Vec<Range<usize>>) =
        (vec![0..0; read_before], vec![0..0; write_before]);
    let host = crate::toolchains::Host {
        home: ctx.home.as_deref(),
        var: &crate::toolchains::process_var,
        project: ctx.project_dir.as_deref(),
    };
    let spans = (&mut read_spans, &mut write_spans);
    crate::toolchains::apply(&loc, list.into_inner(), ctx, &host, sandbox, spans)?;
    read_spans.append(&mut write_spans);
    check_nesting(&sandbox.declared()).map_err(|(at, why)| {
        loc.error(
            read_spans.get(at).cloned().unwrap_or(0..0),
            ErrorKind::SandboxPath(why),
        )
    })
}
