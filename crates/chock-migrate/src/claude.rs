//! Claude Code: `settings.json` (user, project, local), `.mcp.json`, and `~/.claude.json`.
//!
//! A permission rule is `Tool` or `Tool(specifier)`. Carried: `WebFetch(domain:HOST)` (a host
//! reversed, `*.` becoming the trailing `.*`), bare `WebFetch`, `WebSearch`, and `mcp__server` /
//! `mcp__server__tool`. Refused: a rule over command text or paths, `defaultMode`, hooks, plugins.

use chock_policy::{Decision, reverse_host};
use serde_json::Value;

use crate::mcp::{names, parse_object, read_mcp_json, servers, string, strings};
use crate::{Input, MigrateError, Migration, Options, foreign, format_error};

pub(crate) fn read(
    input: &Input,
    options: &Options,
    found: &mut Migration,
) -> Result<(), MigrateError> {
    let file_name = input
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match file_name {
        ".mcp.json" => read_mcp_json(input, "Claude Code", found),
        ".claude.json" => read_state(input, options, found),
        _ => read_settings(input, options, found),
    }
}

/// `~/.claude.json` is Claude Code's own state; only its `mcpServers` (user scope) and each
/// `projects.<path>.mcpServers` (local scope) are configuration.
fn read_state(input: &Input, options: &Options, found: &mut Migration) -> Result<(), MigrateError> {
    let root = parse_object(input)?;
    if let Some(v) = root.get("mcpServers") {
        servers(input, v, "mcpServers", found)?;
    }
    // Only this project's entry: the others configure other projects.
    let this = options.project.as_deref().and_then(|p| p.to_str());
    if let (Some(Value::Object(projects)), Some(this)) = (root.get("projects"), this)
        && let Some(v) = projects.get(this).and_then(|p| p.get("mcpServers"))
    {
        servers(input, v, &format!("projects.{this}.mcpServers"), found)?;
    }
    Ok(())
}

fn read_settings(
    input: &Input,
    options: &Options,
    found: &mut Migration,
) -> Result<(), MigrateError> {
    let root = parse_object(input)?;
    for (key, value) in &root {
        match key.as_str() {
            "$schema" => {}
            "permissions" => permissions(input, value, options, found)?,
            "hooks" => found.refuse(&input.path, key, "a hook runs a program on the host outside every sandbox; it has no equivalent"),
            "enabledPlugins" => found.refuse(&input.path, key, "a plugin has no equivalent (Chock's plugins are WebAssembly components, docs/plugins.md)"),
            "env" => found.refuse(
                &input.path,
                key,
                format!(
                    "variables set for every session have no equivalent; names only: {}",
                    names(input, value, key)?.join(", ")
                ),
            ),
            _ => found.refuse(&input.path, key, "carries into no field of chock.toml"),
        }
    }
    Ok(())
}

fn permissions(
    input: &Input,
    value: &Value,
    options: &Options,
    found: &mut Migration,
) -> Result<(), MigrateError> {
    let Value::Object(map) = value else {
        return Err(format_error(&input.path, "permissions is not an object"));
    };
    for (key, v) in map {
        let at = format!("permissions.{key}");
        match key.as_str() {
            "allow" | "ask" | "deny" => {
                for rule in strings(input, v, &at)? {
                    one_rule(input, key, &rule, options, found);
                }
            }
            "defaultMode" => found.refuse(
                &input.path,
                format!("{at} = {}", string(input, v, &at)?),
                "a stance over the whole session has no equivalent: every act is decided by its own row",
            ),
            _ => found.refuse(&input.path, at, "carries into no field of chock.toml"),
        }
    }
    Ok(())
}

fn one_rule(input: &Input, list: &str, rule: &str, options: &Options, found: &mut Migration) {
    let item = format!("permissions.{list}: {rule}");
    let why = format!("Claude Code {list} `{rule}`");
    let decision = foreign(list == "deny");
    let (tool, spec) = match rule.split_once('(') {
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(spec) => (tool, Some(spec)),
            None => {
                found.refuse(&input.path, item, "not a rule Claude Code documents");
                return;
            }
        },
        None => (rule, None),
    };
    match (tool, spec) {
        ("WebFetch", Some(spec)) => {
            let Some(host) = spec.strip_prefix("domain:") else {
                found.refuse(&input.path, item, "a fetch rule over something other than a domain has no equivalent");
                return;
            };
            let (bare, wildcard) = match host.strip_prefix("*.") {
                Some(rest) => (rest, true),
                None => (host, false),
            };
            let Ok(reversed) = reverse_host(bare) else {
                found.refuse(&input.path, item, format!("the host `{host}` cannot be read exactly"));
                return;
            };
            let action = if wildcard {
                format!("net.fetch.{reversed}.*")
            } else {
                format!("net.fetch.{reversed}")
            };
            let decision = if list == "allow" && options.carry_net_fetch {
                Decision::Allow
            } else {
                decision
            };
            found.row(&input.path, action, decision, why);
        }
        ("WebFetch", None) => found.row(&input.path, "net.fetch.*".into(), decision, why),
        ("WebSearch", None) => found.row(&input.path, "web.search".into(), decision, why),
        (tool, None) if tool.starts_with("mcp__") => {
            let rest = &tool["mcp__".len()..];
            let action = match rest.split_once("__") {
                None | Some((_, "*")) => format!("mcp.{}.tool.*", rest.split("__").next().unwrap_or(rest)),
                Some((server, name)) => format!("mcp.{server}.tool.{name}"),
            };
            found.row(&input.path, action, decision, why);
        }
        ("Bash", _) => found.refuse(&input.path, item, "a rule over command text has no equivalent: a program is decided by its exec.* name, whatever its arguments"),
        ("Read" | "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "Glob" | "Grep" | "LS", _) => found.refuse(&input.path, item, "a rule over file paths has no equivalent: a call sees the sandbox's workspace copy, and [sandbox] paths are declared, not allowed"),
        ("Skill", _) => found.refuse(&input.path, item, "a skill has no equivalent"),
        ("SlashCommand", _) => found.refuse(&input.path, item, "a slash command has no equivalent"),
        _ => found.refuse(&input.path, item, "no action here matches this tool"),
    }
}
