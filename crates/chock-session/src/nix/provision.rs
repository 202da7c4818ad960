//! A program the agent asks for: built or fetched by `nix build` on the host, under a deadline
//! and the session's interrupt, its closure added to every later call's mounts and its `bin`
//! directory to their PATH. The act (`nix.build`) is decided and logged by the caller first.

use std::path::PathBuf;
use std::time::Duration;

use super::{NixError, check_closure, closure_of, run};
use crate::Session;

/// One program the session was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioned {
    /// What was asked for (`nixpkgs#ripgrep`, `path:/src/tool#default`).
    pub installable: String,
    /// The store paths it built to.
    pub outputs: Vec<PathBuf>,
    /// Every store path of their closure.
    pub closure: Vec<PathBuf>,
}

/// Refuses what nix would read as something other than one installable.
pub fn check_installable(installable: &str) -> Result<(), String> {
    if installable.is_empty() || installable.len() > 1024 {
        return Err("an installable is 1 to 1024 characters".into());
    }
    if installable.starts_with('-') {
        return Err("an installable does not start with `-`".into());
    }
    if installable
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("an installable holds no space or control character".into());
    }
    Ok(())
}

/// The output paths of `nix build --json`.
fn outputs(json: &[u8]) -> Result<Vec<PathBuf>, NixError> {
    let bad = |why: String| NixError::Output {
        what: "nix build".into(),
        why,
    };
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
    let built = value.as_array().ok_or_else(|| bad("not a list".into()))?;
    let paths: Vec<PathBuf> = built
        .iter()
        .filter_map(|b| b["outputs"].as_object())
        .flat_map(|o| o.values().filter_map(|p| p.as_str().map(PathBuf::from)))
        .collect();
    if paths.is_empty() {
        return Err(bad("no output paths".into()));
    }
    Ok(paths)
}

impl Session {
    /// Builds or fetches `installable` with nix on the host for the call `call_id` (an interrupt
    /// of that call kills nix and every process below it), within `timeout` capped by
    /// `[limits] timeout_secs`, sending nix's progress lines to `progress`. Its closure goes
    /// through the host path checker and is then shown to every later call. The caller has
    /// decided and logged the act (`nix.build`).
    pub fn provision(
        &self,
        installable: &str,
        call_id: &str,
        timeout: Option<Duration>,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<Provisioned, NixError> {
        check_installable(installable).map_err(|why| NixError::Output {
            what: format!("`{installable}`"),
            why,
        })?;
        let cap = Duration::from_secs(self.policy.limits().timeout_secs);
        let deadline = timeout.map_or(cap, |t| t.min(cap));
        let nix = self.nix.nix(deadline)?.clone();
        let dir = self.log.dir().join("nix");
        std::fs::create_dir_all(&dir).map_err(|e| NixError::Output {
            what: "the session's nix directory".into(),
            why: format!("{}: {e}", dir.display()),
        })?;
        let n = self.nix.provisioned().len() + 1;
        let link = dir.join(format!("provisioned-{n}"));
        let args: Vec<String> = vec![
            "build".into(),
            "--json".into(),
            "--no-write-lock-file".into(),
            "--out-link".into(),
            link.display().to_string(),
            "--".into(),
            installable.to_string(),
        ];
        let running = self.running.clone();
        let out = run::run(
            &nix.program,
            &args,
            &format!("building `{installable}`"),
            deadline,
            progress,
            &|kill| running.register(call_id, chock_sandbox::Killer::new(kill)),
        )?;
        let outputs = outputs(&out.stdout)?;
        let closure = closure_of(&nix, &outputs, deadline)?;
        check_closure(&nix, &self.policy, &closure)?;
        let given = Provisioned {
            installable: installable.to_string(),
            outputs,
            closure,
        };
        self.nix
            .provisioned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(given.clone());
        Ok(given)
    }

    /// Whether the session can build anything with nix: a `nix` on the host's PATH.
    pub fn has_nix(&self) -> bool {
        super::find_nix().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installable_is_one_word_that_is_not_a_flag() {
        assert!(check_installable("nixpkgs#ripgrep").is_ok());
        assert!(check_installable("path:/src/x#default").is_ok());
        for bad in ["", "--impure", "-x", "a b", "a\nb"] {
            assert!(check_installable(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn build_outputs_are_read() {
        let json = br#"[{"drvPath":"/nix/store/a.drv","outputs":{"out":"/nix/store/b-x","dev":"/nix/store/c-x-dev"}}]"#;
        let mut got = outputs(json).unwrap();
        got.sort();
        assert_eq!(
            got,
            vec![
                PathBuf::from("/nix/store/b-x"),
                PathBuf::from("/nix/store/c-x-dev")
            ]
        );
        assert!(outputs(b"[]").is_err());
    }
}
