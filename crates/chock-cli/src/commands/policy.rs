//! `chock policy`: ask the table about one act, validate a table, or list what it can name.
//!
//! Nothing here runs an act: `check` only reports what the table would answer. Bad input (a table
//! that does not load, an action name this build does not define) exits 2.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chock_policy::{Action, DecidedBy, Policy, Presence, Sources, catalogue};

use crate::exit::{BAD_INPUT, Exit};
use crate::say::say;

/// `chock policy …`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print the decision for ACTION and what decided it (a rule's file:line, the org bundle, the
    /// ratchet or the shipped default).
    Check {
        /// A concrete action name, e.g. `git.push` or `net.fetch.com.github.api`.
        action: String,
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
    /// Validate a policy table and the org bundle above it; nothing runs.
    Lint {
        /// The table to check (default ./chock.toml).
        file: Option<PathBuf>,
        /// Check FILE as an org bundle instead of a project table.
        #[arg(long)]
        org: bool,
    },
    /// List every action name this build defines, with why it exists.
    Catalogue,
    /// Print the shipped defaults: what is decided when no rule matches.
    Defaults,
    /// Print the `[sandbox]` in force on this host: its paths, what each `toolchains` name
    /// expanded to, and the credentials no call is shown.
    Show {
        /// The project whose chock.toml is read.
        #[arg(long, default_value = ".")]
        project: PathBuf,
    },
}

pub fn run(cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PolicyCommand::Check { action, project } => check(&action, &project),
        PolicyCommand::Lint { file, org } => lint(file.as_deref(), org),
        PolicyCommand::Show { project } => {
            let policy = Policy::load(&project).map_err(bad_input)?;
            super::policy_show::show(&policy)
        }
        PolicyCommand::Catalogue => {
            for entry in catalogue::CATALOGUE {
                match entry.state {
                    catalogue::State::Asked => say!("{:<30} {}", entry.template, entry.why),
                    catalogue::State::Pending(why) => say!(
                        "{:<30} {} (pending: {why}; nothing asks it yet)",
                        entry.template,
                        entry.why
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Defaults => {
            let defaults = chock_policy::shipped_defaults().map_err(bad_input)?;
            for rule in defaults.rules() {
                say!(
                    "{:<24} {:<6} {}",
                    rule.pattern,
                    rule.decision,
                    rule.why.as_deref().unwrap_or("")
                );
            }
            say!(
                "(no default: net.fetch.*, net.connect.*, exec.unparsed and anything unlisted are asked)"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn bad_input(err: impl std::fmt::Display) -> anyhow::Error {
    Exit::new(BAD_INPUT, err.to_string()).into()
}

fn check(name: &str, project: &Path) -> anyhow::Result<ExitCode> {
    let action = Action::parse(name).map_err(|e| bad_input(format!("`{name}`: {e}")))?;
    let Some(entry) = catalogue::entry_for(&action) else {
        return Err(bad_input(format!(
            "`{name}` is not an action this build defines (see `chock policy catalogue`)"
        )));
    };
    if !project.is_dir() {
        return Err(bad_input(format!(
            "--project {}: not a directory",
            project.display()
        )));
    }
    let policy = Policy::load(project).map_err(bad_input)?;
    let verdict = policy.decide(&action);
    say!("action:     {action}");
    say!("decision:   {}", verdict.decision);
    say!("decided by: {}", verdict.decided_by);
    let why = match &verdict.decided_by {
        DecidedBy::ShippedDefault { why, .. } => why.clone(),
        DecidedBy::Project { line, pattern, .. } => {
            rule_why(policy.project_rules(), *line, pattern)
        }
        DecidedBy::Org { line, pattern, .. } => rule_why(policy.org_rules(), *line, pattern),
        DecidedBy::Ratchet { .. } | DecidedBy::NoRule => None,
    };
    if let Some(why) = why {
        say!("why:        {why}");
    }
    if let catalogue::State::Pending(pending) = entry.state {
        say!("note:       nothing asks {action} yet ({pending}): this answer is never given");
    }
    if let Some(means) = catalogue::allow_means(entry) {
        say!("note:       {means}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The `why` written beside the rule on `line` with `pattern`, if any (several inline rules may
/// share one line, so the line alone does not name a rule).
fn rule_why(rules: &chock_policy::RuleTable, line: usize, pattern: &str) -> Option<String> {
    rules
        .rules()
        .iter()
        .find(|r| r.line == line && r.pattern.as_str() == pattern)
        .and_then(|r| r.why.clone())
}

fn lint(file: Option<&Path>, as_org: bool) -> anyhow::Result<ExitCode> {
    let path = file.map_or_else(
        || PathBuf::from(chock_policy::PROJECT_FILE),
        Path::to_path_buf,
    );
    let Some(source) = chock_policy::read_source(&path, Presence::Required).map_err(bad_input)?
    else {
        return Err(bad_input(format!("{}: no such file", path.display())));
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let sources = if as_org {
        Sources {
            org: Some(source),
            home,
            chock_dirs: chock_policy::chock_dirs_from_env(),
            ..Sources::default()
        }
    } else {
        let (org_path, presence) = chock_policy::org_bundle_path();
        let org = chock_policy::read_source(&org_path, presence).map_err(bad_input)?;
        let dir = project_dir_of(&path);
        Sources {
            project: Some(source),
            org,
            project_dir: Some(dir),
            home,
            chock_dirs: chock_policy::chock_dirs_from_env(),
            user: None,
        }
    };
    let policy = Policy::from_sources(sources).map_err(bad_input)?;
    let (kind, table) = if as_org {
        ("org bundle", policy.org_rules())
    } else {
        ("project table", policy.project_rules())
    };
    let rules = table.rules().len();
    let plural = if rules == 1 { "" } else { "s" };
    say!("{}: ok ({kind}, {rules} rule{plural})", path.display());
    for rule in table.rules() {
        if let Some(warning) = no_effect(&rule.pattern) {
            say!(
                "warning: {}: rule `{}` {warning}",
                rule.place(),
                rule.pattern
            );
        }
        if rule.decision == chock_policy::Decision::Allow
            && let Some(means) = allow_means(&rule.pattern)
        {
            say!(
                "note: {}: rule `{}` = allow: {means}",
                rule.place(),
                rule.pattern
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why a rule on `pattern` can decide no act today, if it cannot: every catalogue name it matches is
/// pending (reserved for a caller not built yet). Load already refuses a pattern matching no name.
fn no_effect(pattern: &chock_policy::Pattern) -> Option<String> {
    let matched = catalogue::entries_matched_by(pattern);
    if matched.is_empty() || !catalogue::asked_entries_matched_by(pattern).is_empty() {
        return None;
    }
    let mut reasons: Vec<&str> = Vec::new();
    for entry in &matched {
        if let catalogue::State::Pending(why) = entry.state
            && !reasons.contains(&why)
        {
            reasons.push(why);
        }
    }
    let reasons = reasons.join("; ");
    Some(match matched.as_slice() {
        [one] => format!(
            "matches {}, which nothing asks yet ({reasons}): this rule has no effect",
            one.template
        ),
        many => format!(
            "matches only names nothing asks yet ({} names, {}; {reasons}): this rule has no effect",
            many.len(),
            many.iter()
                .take(3)
                .map(|e| e.template)
                .collect::<Vec<_>>()
                .join(", ")
                + ", …"
        ),
    })
}

/// What an `allow` on `pattern` does when it is not "goes ahead unasked": every name the pattern
/// can match says the same ([`catalogue::allow_means`]; `secret.password.*`, not `*`).
fn allow_means(pattern: &chock_policy::Pattern) -> Option<&'static str> {
    let matched = catalogue::entries_matched_by(pattern);
    let first = catalogue::allow_means(matched.first()?)?;
    matched
        .iter()
        .all(|e| catalogue::allow_means(e) == Some(first))
        .then_some(first)
}

/// The absolute directory holding a table, for refusing write paths into the real project.
fn project_dir_of(file: &Path) -> PathBuf {
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    parent
        .canonicalize()
        .unwrap_or_else(|_| parent.to_path_buf())
}
