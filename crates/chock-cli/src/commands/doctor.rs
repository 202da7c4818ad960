//! `chock doctor`: every sandbox layer tried for real in a throwaway child, one row per layer.

use std::process::ExitCode;

use crate::exit;
use crate::say::say;

/// Arguments of `chock doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "main hands every command its arguments by value"
)]
pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let DoctorArgs { json } = args;
    let mut rows = chock_sandbox::doctor::probe_all();
    rows.push(nix_row(chock_session::find_nix()));
    rows.push(chock_vm::doctor::row());
    let all_required_on = rows.iter().all(|r| r.on || !r.required);
    if json {
        let doc = serde_json::json!({ "ok": all_required_on, "layers": rows });
        crate::say::json_pretty(&doc)?;
    } else {
        let width = rows.iter().map(|r| r.layer.len()).max().unwrap_or(0);
        for r in &rows {
            let state = match (r.on, r.required) {
                (true, _) => "on ",
                (false, true) => "OFF",
                (false, false) => "off",
            };
            let kind = if r.required { "" } else { " (not required)" };
            say!("{state}  {:width$}  {}{kind}", r.layer, r.detail);
        }
        if all_required_on {
            say!("every required layer is on");
        } else {
            say!("a required layer is off: chock will refuse to run commands");
        }
    }
    Ok(ExitCode::from(if all_required_on {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

/// Whether Nix is there: not a layer, and never required; without it a project's flake.nix dev
/// shell is not bound and `provision_program` is not offered (docs/nix.md).
fn nix_row(nix: Option<std::path::PathBuf>) -> chock_sandbox::doctor::LayerReport {
    let (on, detail) = match nix {
        Some(path) => (
            true,
            format!(
                "{}: a project's flake.nix dev shell is bound into its calls; provision_program is offered",
                path.display()
            ),
        ),
        None => (
            false,
            "no `nix` on PATH: a project's flake.nix dev shell is not bound and provision_program is \
             not offered"
                .to_string(),
        ),
    };
    chock_sandbox::doctor::LayerReport {
        layer: "nix".into(),
        required: false,
        on,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_without_nix_gets_an_optional_row_that_says_so() {
        let row = nix_row(None);
        assert!(!row.on && !row.required);
        assert!(row.detail.contains("no `nix` on PATH"), "{}", row.detail);
        assert!(nix_row(Some("/usr/bin/nix".into())).on);
    }
}
