//! The net under every reader: a row this build would not act on, a server the policy parser would
//! refuse, or two rows the table would call ambiguous are moved into the refusals here, so a reader
//! added later cannot write an inert row or a file that does not load.

use chock_policy::{Action, Pattern, catalogue, check_passed_env};

use crate::{Migration, Refusal};

/// Moves into `found.refused` every row whose action no code of this build asks (or that is not a
/// well-formed pattern), the less strict of two rows on one pattern, and every server (or server
/// variable name) chock.toml would refuse.
pub fn vet(found: &mut Migration) {
    let rows = std::mem::take(&mut found.rows);
    for row in rows {
        let defined = Pattern::parse(&row.action)
            .map(|p| !catalogue::asked_entries_matched_by(&p).is_empty())
            .unwrap_or(false);
        if !defined {
            found.refused.push(Refusal {
                file: row.file.clone(),
                item: format!("{} ({})", row.action, row.why),
                reason: "no action this build acts on matches it".into(),
            });
            continue;
        }
        match found.rows.iter_mut().find(|r| r.action == row.action) {
            None => found.rows.push(row),
            Some(kept) if kept.decision == row.decision => {}
            Some(kept) => {
                let (kept_now, dropped) = if row.decision.is_stricter_than(kept.decision) {
                    (row.clone(), std::mem::replace(kept, row))
                } else {
                    (kept.clone(), row)
                };
                found.refused.push(Refusal {
                    file: dropped.file,
                    item: format!("{} ({})", dropped.action, dropped.why),
                    reason: format!(
                        "the same action is read as {} elsewhere ({}); the stricter row is kept",
                        kept_now.decision, kept_now.why
                    ),
                });
            }
        }
    }
    let servers = std::mem::take(&mut found.servers);
    for mut server in servers {
        let problem = if Action::mcp_network(&server.name).is_err() {
            Some("a server's name here is one label: letters, digits, `_`, `-`, `+`".to_owned())
        } else if server.command.is_some() == server.url.is_some() {
            Some("a server needs a command or a url, not both".to_owned())
        } else {
            None
        };
        if let Some(reason) = problem {
            found.refused.push(Refusal {
                file: server.from.clone(),
                item: format!("server `{}`", server.name),
                reason,
            });
            continue;
        }
        let env = std::mem::take(&mut server.env);
        for name in env {
            match check_passed_env(&name, &[]) {
                Ok(()) => server.env.push(name),
                Err(reason) => found.refused.push(Refusal {
                    file: server.from.clone(),
                    item: format!("server `{}` variable `{name}`", server.name),
                    reason,
                }),
            }
        }
        found.servers.push(server);
    }
}
