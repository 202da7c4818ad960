//! The generated `chock.toml` and the report.

use std::fmt::Write as _;

use crate::Migration;

fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The file's text: a header naming `version`, `date` and every file read with its SHA-256, then
/// the rows and the servers.
pub fn render(found: &Migration, from: &str, version: &str, date: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by chock migrate --from {from} (Chock {version}) on {date}."
    );
    let _ = writeln!(
        out,
        "# Read, with the SHA-256 of each file's bytes as read:"
    );
    for c in &found.carried {
        let _ = writeln!(out, "#   {}  sha256:{}", c.path.display(), c.sha256);
    }
    let _ = writeln!(
        out,
        "# A foreign allow is written as ask. Servers start only after `chock mcp trust NAME`."
    );
    for row in &found.rows {
        let _ = writeln!(out);
        let _ = writeln!(out, "[[rule]]");
        let _ = writeln!(out, "action = {}", quote(&row.action));
        let _ = writeln!(out, "decision = {}", quote(row.decision.as_str()));
        let _ = writeln!(out, "why = {}", quote(&row.why));
    }
    for s in &found.servers {
        let _ = writeln!(out);
        let _ = writeln!(out, "# from {}", s.from.display());
        let _ = writeln!(out, "[mcp.servers.{}]", s.name);
        if let Some(command) = &s.command {
            let _ = writeln!(out, "command = {}", quote(command));
            if !s.args.is_empty() {
                let _ = writeln!(out, "args = {}", list(&s.args));
            }
        }
        if let Some(url) = &s.url {
            let _ = writeln!(out, "url = {}", quote(url));
        }
        if let Some(t) = &s.transport {
            let _ = writeln!(out, "transport = {}", quote(t));
        }
        if !s.env.is_empty() {
            let _ = writeln!(out, "env = {}", list(&s.env));
        }
    }
    out
}

/// What a person reads: every file under "carried", then the rows, the servers and the refusals.
pub fn report(found: &Migration) -> String {
    let mut out = String::from("carried:\n");
    for c in &found.carried {
        let _ = writeln!(out, "  {}  sha256:{}", c.path.display(), c.sha256);
    }
    let _ = writeln!(out, "rows: {}", found.rows.len());
    for r in &found.rows {
        let _ = writeln!(out, "  {} = {}  ({})", r.action, r.decision, r.why);
    }
    let _ = writeln!(
        out,
        "servers (each needs `chock mcp trust NAME`): {}",
        found.servers.len()
    );
    for s in &found.servers {
        let _ = writeln!(out, "  {}", s.name);
    }
    let _ = writeln!(out, "refused: {}", found.refused.len());
    for r in &found.refused {
        let _ = writeln!(out, "  {}: {}: {}", r.file.display(), r.item, r.reason);
    }
    out
}
