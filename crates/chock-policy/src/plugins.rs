//! `[plugins.NAME]`: the WebAssembly plugins a project configures, each pinned by the SHA-256 of its
//! bytes. The bytes themselves are read and checked by chock-plugin when a session starts; here the
//! table is parsed and checked on its own (a name fit for an action label, a relative path, a digest
//! of 64 lower-case hex digits, limits in range), every error naming the file, line and field.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::action::is_label_char;
use crate::error::{ErrorKind, Located, PolicyError};

/// Default wall-clock timeout of one plugin call.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Default memory cap of one plugin call (its linear memories and tables together).
pub const DEFAULT_PLUGIN_MEMORY_MB: u64 = 64;
/// Default fuel (about one unit per WebAssembly instruction) of one plugin call.
pub const DEFAULT_PLUGIN_FUEL: u64 = 2_000_000_000;
/// Default cap on what one plugin call may return.
pub const DEFAULT_PLUGIN_OUTPUT_KB: u64 = 256;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPlugin {
    path: Option<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    timeout_secs: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    fuel: Option<Spanned<u64>>,
    output_kb: Option<Spanned<u64>>,
}

pub(crate) type RawPlugins = BTreeMap<String, Spanned<RawPlugin>>;

/// One configured plugin, as chock.toml pins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// Its name: one action label (`plugin.<name>.tool.<tool>`).
    pub name: String,
    /// The component's file, relative to the project root, as written.
    pub path: PathBuf,
    /// The SHA-256 of the component's bytes, 64 lower-case hex digits.
    pub sha256: String,
    /// Wall-clock timeout of one call (`timeout_secs`, default 10).
    pub timeout: Duration,
    /// Memory cap of one call in bytes (`memory_mb`, default 64).
    pub memory_bytes: u64,
    /// Fuel of one call (`fuel`, default 2 000 000 000).
    pub fuel: u64,
    /// Cap on one call's output in bytes (`output_kb`, default 256).
    pub output_bytes: u64,
    /// Where the table is written (`chock.toml:12`), for errors about it.
    pub place: String,
}

fn number(
    loc: &Located<'_>,
    value: Option<&Spanned<u64>>,
    (min, max): (u64, u64),
    default: u64,
) -> Result<u64, PolicyError> {
    let Some(value) = value else {
        return Ok(default);
    };
    if !(min..=max).contains(value.get_ref()) {
        return Err(loc.error(
            value.span(),
            ErrorKind::Plugin(format!("must be between {min} and {max}")),
        ));
    }
    Ok(*value.get_ref())
}

/// Checks each `[plugins.NAME]` table.
pub(crate) fn parse(loc: &Located<'_>, raw: RawPlugins) -> Result<Vec<PluginConfig>, PolicyError> {
    let mut plugins = Vec::new();
    for (name, table) in raw {
        let span = table.span();
        if name.is_empty() || !name.chars().all(is_label_char) {
            return Err(loc.error(
                span,
                ErrorKind::Plugin(
                    "a plugin's name is one action label: lower-case letters, digits, `-` and `_`"
                        .into(),
                ),
            ));
        }
        let table_span = table.span();
        let table = table.into_inner();
        let missing = |field: &str| {
            loc.error(
                table_span.clone(),
                ErrorKind::Plugin(format!("plugins.{name} needs `{field}`")),
            )
        };
        let path = table.path.as_ref().ok_or_else(|| missing("path"))?;
        let written = PathBuf::from(path.get_ref());
        if path.get_ref().is_empty()
            || written.is_absolute()
            || written
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(loc.error(
                path.span(),
                ErrorKind::Plugin(format!(
                    "plugins.{name}.path must be a path inside the project, relative to its root, without `..`"
                )),
            ));
        }
        let sha256 = table.sha256.as_ref().ok_or_else(|| missing("sha256"))?;
        let digest = sha256.get_ref();
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(loc.error(
                sha256.span(),
                ErrorKind::Plugin(format!(
                    "plugins.{name}.sha256 must be the SHA-256 of the file: 64 lower-case hex digits (`sha256sum {}`)",
                    path.get_ref()
                )),
            ));
        }
        let timeout = number(
            loc,
            table.timeout_secs.as_ref(),
            (1, 600),
            DEFAULT_PLUGIN_TIMEOUT.as_secs(),
        )?;
        let memory_mb = number(
            loc,
            table.memory_mb.as_ref(),
            (1, 4096),
            DEFAULT_PLUGIN_MEMORY_MB,
        )?;
        let fuel = number(
            loc,
            table.fuel.as_ref(),
            (1, u64::MAX / 2),
            DEFAULT_PLUGIN_FUEL,
        )?;
        let output_kb = number(
            loc,
            table.output_kb.as_ref(),
            (1, 65_536),
            DEFAULT_PLUGIN_OUTPUT_KB,
        )?;
        plugins.push(PluginConfig {
            place: loc.place(span.start),
            name,
            path: written,
            sha256: digest.clone(),
            timeout: Duration::from_secs(timeout),
            memory_bytes: memory_mb << 20,
            fuel,
            output_bytes: output_kb << 10,
        });
    }
    Ok(plugins)
}
