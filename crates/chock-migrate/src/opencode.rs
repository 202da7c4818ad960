//! OpenCode: `opencode.json`. `permission` maps a tool to `"allow" | "ask" | "deny"` or (for
//! `bash` and others) to an object of command patterns; `mcp` maps a name to
//! `{type: "local", command: [..], environment}` or `{type: "remote", url, headers}`.

use serde_json::Value;

use crate::mcp::{names, parse_object, push_server, string, strings};
use crate::{Input, MigrateError, Migration, Server, foreign, format_error};

pub(crate) fn read(input: &Input, found: &mut Migration) -> Result<(), MigrateError> {
    let root = parse_object(input)?;
    for (key, value) in &root {
        match key.as_str() {
            "$schema" => {}
            "permission" => permission(input, value, found)?,
            "mcp" => mcp(input, value, found)?,
            "plugin" => found.refuse(&input.path, key, "a plugin has no equivalent"),
            "command" => found.refuse(&input.path, key, "a slash command has no equivalent"),
            _ => found.refuse(&input.path, key, "carries into no field of chock.toml"),
        }
    }
    Ok(())
}

fn permission(input: &Input, value: &Value, found: &mut Migration) -> Result<(), MigrateError> {
    let Value::Object(map) = value else {
        return Err(format_error(&input.path, "permission is not an object"));
    };
    for (tool, v) in map {
        let at = format!("permission.{tool}");
        let Value::String(verdict) = v else {
            found.refuse(
                &input.path,
                at,
                "a rule over command text or paths has no equivalent",
            );
            continue;
        };
        let why = format!("OpenCode permission.{tool} = \"{verdict}\"");
        let action = match tool.as_str() {
            "webfetch" => "net.fetch.*",
            "websearch" => "web.search",
            _ => {
                found.refuse(
                    &input.path,
                    format!("{at} = \"{verdict}\""),
                    "no action here matches this tool",
                );
                continue;
            }
        };
        match verdict.as_str() {
            "allow" | "ask" | "deny" => {
                found.row(&input.path, action.into(), foreign(verdict == "deny"), why)
            }
            _ => {
                return Err(format_error(
                    &input.path,
                    format!("{at}: `{verdict}` is not allow, ask or deny"),
                ));
            }
        }
    }
    Ok(())
}

fn mcp(input: &Input, value: &Value, found: &mut Migration) -> Result<(), MigrateError> {
    let Value::Object(map) = value else {
        return Err(format_error(&input.path, "mcp is not an object"));
    };
    for (name, def) in map {
        let Value::Object(def) = def else {
            return Err(format_error(
                &input.path,
                format!("mcp.{name} is not an object"),
            ));
        };
        let mut server = Server {
            name: name.clone(),
            from: input.path.clone(),
            ..Server::default()
        };
        for (key, v) in def {
            let at = format!("mcp.{name}.{key}");
            match key.as_str() {
                "type" => {}
                "command" => {
                    let mut words = strings(input, v, &at)?.into_iter();
                    server.command = words.next();
                    server.args = words.collect();
                }
                "url" => server.url = Some(string(input, v, &at)?),
                "environment" => server.env = names(input, v, &at)?,
                "headers" => found.refuse(
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
