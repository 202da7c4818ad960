//! The `mcpServers` object Claude Code (`.mcp.json`, `~/.claude.json`) and oh-my-pi (`mcp.json`)
//! share: a name to `{command, args, env}` (stdio) or `{type: "http"|"sse", url, headers}`.
//! Environment variables carry their names only; header values are never read.

use serde_json::{Map, Value};

use crate::{Input, MigrateError, Migration, Server, format_error};

/// Reads a file whose top level holds `mcpServers` (every other key is refused by name).
pub(crate) fn read_mcp_json(
    input: &Input,
    harness: &str,
    found: &mut Migration,
) -> Result<(), MigrateError> {
    let root = parse_object(input)?;
    for (key, value) in &root {
        match key.as_str() {
            "mcpServers" => servers(input, value, "mcpServers", found)?,
            "$schema" => {}
            "disabledServers" => found.refuse(
                &input.path,
                key,
                format!("{harness}'s list of switched-off servers has no equivalent: a server here starts only once trusted"),
            ),
            _ => found.refuse(&input.path, key, "carries into no field of chock.toml"),
        }
    }
    Ok(())
}

pub(crate) fn parse_object(input: &Input) -> Result<Map<String, Value>, MigrateError> {
    let text = std::str::from_utf8(&input.bytes).map_err(|e| format_error(&input.path, e))?;
    match serde_json::from_str::<Value>(text).map_err(|e| format_error(&input.path, e))? {
        Value::Object(map) => Ok(map),
        _ => Err(format_error(
            &input.path,
            "the top level is not a JSON object",
        )),
    }
}

/// Reads one `mcpServers`-shaped object found at `field`.
pub(crate) fn servers(
    input: &Input,
    value: &Value,
    field: &str,
    found: &mut Migration,
) -> Result<(), MigrateError> {
    let Value::Object(map) = value else {
        return Err(format_error(
            &input.path,
            format!("{field} is not an object"),
        ));
    };
    for (name, def) in map {
        let Value::Object(def) = def else {
            return Err(format_error(
                &input.path,
                format!("{field}.{name} is not an object"),
            ));
        };
        let mut server = Server {
            name: name.clone(),
            from: input.path.clone(),
            ..Server::default()
        };
        let mut kind = None;
        for (key, v) in def {
            let at = format!("{field}.{name}.{key}");
            match key.as_str() {
                "command" => server.command = Some(string(input, v, &at)?),
                "args" => server.args = strings(input, v, &at)?,
                "url" => server.url = Some(string(input, v, &at)?),
                "type" => kind = Some(string(input, v, &at)?),
                "env" => server.env = names(input, v, &at)?,
                "headers" => found.refuse(
                    &input.path,
                    at,
                    format!(
                        "headers are not sent to a server here; their values were not read (names: {})",
                        names(input, v, key)?.join(", ")
                    ),
                ),
                _ => found.refuse(&input.path, at, "carries into no field of [mcp.servers]"),
            }
        }
        match kind.as_deref() {
            None | Some("stdio") | Some("http") | Some("streamable-http") => {}
            Some("sse") => server.transport = Some("sse".into()),
            Some(other) => {
                found.refuse(
                    &input.path,
                    format!("{field}.{name}"),
                    format!("a server of type `{other}` has no equivalent"),
                );
                continue;
            }
        }
        push_server(found, server);
    }
    Ok(())
}

/// Adds `server` unless a server of that name was already read (the first is kept).
pub(crate) fn push_server(found: &mut Migration, server: Server) {
    if let Some(first) = found.servers.iter().find(|s| s.name == server.name) {
        let first = first.from.display().to_string();
        found.refuse(
            &server.from,
            format!("server `{}`", server.name),
            format!("a server of that name was already read from {first}; the first is kept"),
        );
        return;
    }
    found.servers.push(server);
}

pub(crate) fn string(input: &Input, v: &Value, at: &str) -> Result<String, MigrateError> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format_error(&input.path, format!("{at} is not a string")))
}

pub(crate) fn strings(input: &Input, v: &Value, at: &str) -> Result<Vec<String>, MigrateError> {
    let Value::Array(items) = v else {
        return Err(format_error(&input.path, format!("{at} is not an array")));
    };
    items.iter().map(|i| string(input, i, at)).collect()
}

/// The keys of an object of variables; the values are never looked at.
pub(crate) fn names(input: &Input, v: &Value, at: &str) -> Result<Vec<String>, MigrateError> {
    let Value::Object(map) = v else {
        return Err(format_error(&input.path, format!("{at} is not an object")));
    };
    Ok(map.keys().cloned().collect())
}
