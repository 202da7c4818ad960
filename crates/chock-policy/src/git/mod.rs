//! The git classifier: one git invocation in, one act `git.<sub>` out, as reviewed data and a pure
//! function.
//!
//! The shim that would run this inside the sandbox is not built yet (docs/git.md); this is the part it
//! needs first. The argv, the environment and the repository's configuration are read the way git itself
//! reads them (`man git`, `git help config`), so none of git's own indirections — global options, `-c`,
//! `--config-env`, `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`, aliases, a swapped `--exec-path` —
//! can make one act look like another. What cannot be read with certainty is `git.unknown`, which the
//! shipped defaults ask about.
//!
//! The function never reads a file: the caller passes the configuration as git would read it (the
//! entries of `git config --list`, in order, for the repository [`locate`] names).

mod config;
mod options;
mod remote;
mod sub;
#[cfg(test)]
mod tests;
mod url;

pub use config::{Config, ConfigError};
pub use remote::{Direction, Target, default_remote, resolve as resolve_remote};
pub use url::{RemoteUrl, Scheme, UrlError};

use crate::action::Action;

/// One git invocation, as the shim would see it.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// The arguments after `git` itself.
    pub args: Vec<String>,
    /// The environment git runs with.
    pub env: Vec<(String, String)>,
    /// The repository's configuration as git reads it (system, global, local, worktree), in order:
    /// `(key, value)`, a key without `=` in `git config --list` having no value.
    pub config: Vec<(String, Option<String>)>,
    /// The branch `HEAD` names, if any: it picks the default remote of a fetch or push.
    pub branch: Option<String>,
    /// Names `x` for which a `git-x` program exists on `PATH` or in git's exec path: git runs such a
    /// program before it looks for an alias, so the shim must say which exist.
    pub path_commands: Vec<String>,
}

/// Where git will look for the repository: every `-C`, `--git-dir`, `--work-tree`, `--namespace` and
/// `GIT_DIR`/`GIT_WORK_TREE`/`GIT_COMMON_DIR`, so the caller reads the configuration of that one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// Each `-C <path>`, in order (each is relative to the one before).
    pub chdir: Vec<String>,
    /// `--git-dir` or `GIT_DIR`.
    pub git_dir: Option<String>,
    /// `--work-tree` or `GIT_WORK_TREE`.
    pub work_tree: Option<String>,
    /// `GIT_COMMON_DIR`: where the shared configuration is read from.
    pub common_dir: Option<String>,
    /// `--namespace` or `GIT_NAMESPACE`.
    pub namespace: Option<String>,
}

/// What one invocation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// `git.<sub>`, always a catalogue name.
    pub action: Action,
    /// For `git.unknown`: why the invocation could not be classified, naming the option or key.
    pub reason: Option<String>,
    /// The git command that runs, after alias expansion (`push`), if one was found.
    pub command: Option<String>,
    /// The command's arguments after alias expansion.
    pub args: Vec<String>,
    /// Which repository git will use.
    pub location: Location,
    /// For an act that reaches another host: where, as git would resolve it.
    pub target: Option<Target>,
}

/// Where git will look for the repository, from the global options and the environment alone. The
/// caller reads that repository's configuration and then calls [`classify`].
pub fn locate(args: &[String], env: &[(String, String)]) -> Location {
    let mut location = options::env_location(env);
    let _ = options::parse_globals(args, env, &mut location, &mut Vec::new());
    location
}

/// Classifies one invocation. Never fails: what it cannot read is `git.unknown` with a reason.
pub fn classify(inv: &Invocation) -> Classified {
    let mut location = options::env_location(&inv.env);
    match classify_inner(inv, &mut location) {
        Ok(mut classified) => {
            classified.location = location;
            classified
        }
        Err(reason) => Classified {
            action: act("unknown"),
            reason: Some(reason),
            command: None,
            args: Vec::new(),
            location,
            target: None,
        },
    }
}

/// The act for a subcommand label, which the tests hold to the catalogue.
fn act(sub: &str) -> Action {
    Action::git(sub).unwrap_or_else(|_| Action::git("unknown").expect("a valid name"))
}

/// How many aliases may expand into one another before the invocation is refused as a loop.
const ALIAS_DEPTH: usize = 16;

fn classify_inner(inv: &Invocation, location: &mut Location) -> Result<Classified, String> {
    options::check_env(&inv.env)?;
    let mut cli_config = Vec::new();
    let globals = options::parse_globals(&inv.args, &inv.env, location, &mut cli_config)?;
    let mut rest: Vec<String> = match globals {
        options::Globals::Info => {
            return Ok(done(act("help"), None, Vec::new(), None));
        }
        options::Globals::Command(rest) => rest,
    };
    let mut config = Config::layered(&inv.config, &inv.env, &cli_config)?;
    let mut seen = Vec::new();
    loop {
        let Some(name) = rest.first().cloned() else {
            // `git` alone prints its usage.
            return Ok(done(act("help"), None, Vec::new(), None));
        };
        if sub::is_git_command(&name) {
            let args = rest[1..].to_vec();
            config.check_programs()?;
            let (sub, target) = sub::classify_command(&name, &args, &config, inv)?;
            return Ok(done(act(&sub), Some(name), args, target));
        }
        if inv.path_commands.contains(&name) {
            return Err(format!(
                "`git {name}` runs the program git-{name} found on PATH"
            ));
        }
        let Some(expansion) = config.alias(&name) else {
            return Err(format!(
                "`{name}` is not a git command this build classifies"
            ));
        };
        if seen.contains(&name) || seen.len() >= ALIAS_DEPTH {
            return Err(format!("alias `{name}` expands into itself"));
        }
        seen.push(name.clone());
        if let Some(shell) = expansion.strip_prefix('!') {
            return Err(format!("alias `{name}` runs a shell command: `{shell}`"));
        }
        let words = config::split_alias(&expansion)
            .ok_or_else(|| format!("alias `{name}`: unbalanced quotes in `{expansion}`"))?;
        // An alias may begin with global options (`-c`, `-p`); git refuses one that changes where the
        // repository is, and so does this.
        let mut alias_location = Location::default();
        let mut alias_config = Vec::new();
        let globals =
            options::parse_globals(&words, &inv.env, &mut alias_location, &mut alias_config)?;
        if alias_location != Location::default() {
            return Err(format!("alias `{name}` changes which repository git uses"));
        }
        config.push_cli(&alias_config)?;
        let options::Globals::Command(mut expanded) = globals else {
            return Err(format!("alias `{name}` names no command"));
        };
        expanded.extend(rest.drain(1..));
        rest = expanded;
    }
}

fn done(
    action: Action,
    command: Option<String>,
    args: Vec<String>,
    target: Option<Target>,
) -> Classified {
    Classified {
        action,
        reason: None,
        command,
        args,
        location: Location::default(),
        target,
    }
}
