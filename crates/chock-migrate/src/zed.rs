//! Zed: `settings.json` (JSON with comments). `context_servers` carried (a command as a string or
//! the older `{path, args, env}` object, or a `url`); `agent.tool_permissions` holds regular
//! expressions over tool input and stances, all refused, as is `agent.always_allow_tool_actions`.

use serde_json::{Map, Value};

use crate::mcp::{names, push_server, string, strings};
use crate::{Input, MigrateError, Migration, Server, format_error, jsonc};

pub(crate) fn read(input: &Input, found: &mut Migration) -> Result<(), MigrateError> {
    let text = std::str::from_utf8(&input.bytes).map_err(|e| format_error(&input.path, e))?;
    let root: Map<String, Value> =
        serde_json::from_str(&jsonc::strip(text)).map_err(|e| format_error(&input.path, e))?;
    if let Some(v) = root.get("context_servers") {
        servers(input, v, found)?;
    }
    if let Some(Value::Object(agent)) = root.get("agent") {
        for (key, v) in agent {
            match key.as_str() {
                "always_allow_tool_actions" => found.refuse(
                    &input.path,
                    format!("agent.{key} = {v}"),
                    "a stance over the whole session has no equivalent",
                ),
                "tool_permissions" => tool_permissions(input, v, found),
                _ => {}
            }
        }
    }
    Ok(())
}

fn tool_permissions(input: &Input, v: &Value, found: &mut Migration) {
    let Value::Object(map) = v else { return };
    if let Some(default) = map.get("default") {
        found.refuse(
            &input.path,
            format!("agent.tool_permissions.default = {default}"),
            "a stance over the whole session has no equivalent",
        );
    }
    let Some(Value::Object(tools)) = map.get("tools") else {
        return;
    };
    for (tool, rules) in tools {
        let Value::Object(rules) = rules else {
            continue;
        };
        for (list, patterns) in rules {
            let at = format!("agent.tool_permissions.tools.{tool}.{list}");
            if list == "default" {
                found.refuse(
                    &input.path,
                    format!("{at} = {patterns}"),
                    "a stance over a whole tool has no equivalent",
                );
                continue;
            }
            let Value::Array(items) = patterns else {
                continue;
            };
            for item in items {
                let pattern = item.get("pattern").and_then(Value::as_str).unwrap_or("?");
                found.refuse(
                    &input.path,
                    format!("{at}: {pattern}"),
                    "a regular expression over a tool's input has no equivalent",
                );
            }
        }
    }
}

fn servers(input: &Input, value: &Value, found: &mut Migration) -> Result<(), MigrateError> {
    let Value::Object(map) = value else {
        return Err(format_error(
            &input.path,
            "context_servers is not an object",
        ));
    };
    for (name, def) in map {
        let Value::Object(def) = def else {
            return Err(format_error(
                &input.path,
                format!("context_servers.{name} is not an object"),
            ));
        };
        let mut server = Server {
            name: name.clone(),
            from: input.path.clone(),
            ..Server::default()
        };
        for (key, v) in def {
            let at = format!("context_servers.{name}.{key}");
            match (key.as_str(), v) {
                ("command", Value::Object(cmd)) => {
                    for (k, v) in cmd {
                        let at = format!("{at}.{k}");
                        match k.as_str() {
                            "path" => server.command = Some(string(input, v, &at)?),
                            "args" => server.args = strings(input, v, &at)?,
                            "env" if v.is_null() => {}
                            "env" => server.env = names(input, v, &at)?,
                            _ => found.refuse(
                                &input.path,
                                at,
                                "carries into no field of [mcp.servers]",
                            ),
                        }
                    }
                }
                ("command", v) => server.command = Some(string(input, v, &at)?),
                ("args", v) => server.args = strings(input, v, &at)?,
                ("env", Value::Null) | ("source", _) | ("enabled", _) => {}
                ("env", v) => server.env = names(input, v, &at)?,
                ("url", v) => server.url = Some(string(input, v, &at)?),
                ("headers", v) => found.refuse(
                    &input.path,
                    at,
                    format!(
                        "headers are not sent to a server here; names only: {}",
                        names(input, v, key)?.join(", ")
                    ),
                ),
                _ => found.refuse(&input.path, at, "carries into no field of [mcp.servers]"),
            }
        }
        push_server(found, server);
    }
    Ok(())
}
