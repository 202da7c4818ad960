//! Codex: `config.toml`, `[mcp_servers.NAME]` (`command`, `args`, `env`, or `url`) carried;
//! `sandbox_mode` and `approval_policy` are stances over the whole session and refused.

use toml::Value;

use crate::mcp::push_server;
use crate::{Input, MigrateError, Migration, Server, format_error};

pub(crate) fn read(input: &Input, found: &mut Migration) -> Result<(), MigrateError> {
    let text = std::str::from_utf8(&input.bytes).map_err(|e| format_error(&input.path, e))?;
    let root: toml::Table = text.parse().map_err(|e| format_error(&input.path, e))?;
    for (key, value) in &root {
        match key.as_str() {
            "mcp_servers" => servers(input, value, found)?,
            "sandbox_mode" | "approval_policy" => found.refuse(
                &input.path,
                format!("{key} = {value}"),
                "a stance over the whole session has no equivalent: every act is decided by its own row, in a sandbox that is always on",
            ),
            _ => found.refuse(&input.path, key, "carries into no field of chock.toml"),
        }
    }
    Ok(())
}

fn servers(input: &Input, value: &Value, found: &mut Migration) -> Result<(), MigrateError> {
    let Value::Table(map) = value else {
        return Err(format_error(&input.path, "mcp_servers is not a table"));
    };
    for (name, def) in map {
        let Value::Table(def) = def else {
            return Err(format_error(
                &input.path,
                format!("mcp_servers.{name} is not a table"),
            ));
        };
        let mut server = Server {
            name: name.clone(),
            from: input.path.clone(),
            ..Server::default()
        };
        for (key, v) in def {
            let at = format!("mcp_servers.{name}.{key}");
            let bad = || format_error(&input.path, format!("{at} has the wrong type"));
            match key.as_str() {
                "command" => server.command = Some(v.as_str().ok_or_else(bad)?.to_owned()),
                "url" => server.url = Some(v.as_str().ok_or_else(bad)?.to_owned()),
                "args" => {
                    server.args = v
                        .as_array()
                        .ok_or_else(bad)?
                        .iter()
                        .map(|a| a.as_str().map(str::to_owned).ok_or_else(bad))
                        .collect::<Result<_, _>>()?;
                }
                "env" => server.env = v.as_table().ok_or_else(bad)?.keys().cloned().collect(),
                _ => found.refuse(&input.path, at, "carries into no field of [mcp.servers]"),
            }
        }
        push_server(found, server);
    }
    Ok(())
}
