//! The loaded policy: shipped defaults, the org bundle, the project's chock.toml and the session ratchet.
//!
//! Resolution for an action, in order:
//! 1. The project's most specific matching rule, and the org bundle's most specific matching rule.
//!    If both match, the stricter answer wins (a project never loosens the org). If one matches, it
//!    decides.
//! 2. If neither matches: the shipped default's most specific matching rule, else `ask`.
//! 3. The ratchet: the strictest matching entry, if stricter than the answer so far.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::action::Action;
use crate::decision::Decision;
use crate::error::{ErrorKind, Located, PolicyError};
use crate::file::{self, ParsedFile, Role};
use crate::host_paths::HostPaths;
use crate::limits::{BudgetConfig, LimitsConfig, SubagentsConfig};
use crate::ratchet::{Ratchet, RatchetError};
use crate::sandbox::SandboxConfig;
use crate::sources::{
    Presence, Source, Sources, chock_dirs_from_env, org_bundle_path, project_file_path,
    read_source, refuse_foreign_link,
};
use crate::table::{Rule, RuleTable};

/// The shipped defaults, reviewed in one file.
pub const SHIPPED_DEFAULTS: &str = include_str!("defaults.toml");
/// The name the shipped defaults carry in messages.
pub const SHIPPED_DEFAULTS_NAME: &str = "<shipped defaults>";

/// What decided a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// A rule in the project's chock.toml.
    Project {
        /// The chock.toml.
        file: PathBuf,
        /// The rule's line in it.
        line: usize,
        /// The rule's action pattern.
        pattern: String,
    },
    /// A rule in the org bundle.
    Org {
        /// The bundle's file.
        file: PathBuf,
        /// The rule's line in it.
        line: usize,
        /// The rule's action pattern.
        pattern: String,
    },
    /// An entry the session added to its ratchet.
    Ratchet {
        /// The pattern the session narrowed.
        pattern: String,
    },
    /// A row of the shipped defaults.
    ShippedDefault {
        /// The row's action pattern.
        pattern: String,
        /// Why the row ships so, where the catalogue says.
        why: Option<String>,
    },
    /// Nothing matched: the answer is `ask`.
    NoRule,
}

impl fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecidedBy::Project {
                file,
                line,
                pattern,
            } => write!(f, "{}:{line} (rule `{pattern}`)", file.display()),
            DecidedBy::Org {
                file,
                line,
                pattern,
            } => {
                write!(f, "org bundle {}:{line} (rule `{pattern}`)", file.display())
            }
            DecidedBy::Ratchet { pattern } => write!(f, "ratchet (restriction `{pattern}`)"),
            DecidedBy::ShippedDefault { pattern, .. } => write!(f, "shipped default `{pattern}`"),
            DecidedBy::NoRule => f.write_str("no rule and no shipped default"),
        }
    }
}

/// The answer for one action and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What to do with the act.
    pub decision: Decision,
    /// Which layer and rule said so, for the log and for the refusal the model reads.
    pub decided_by: DecidedBy,
}

/// The policy a session runs under. Read before the sandbox exists; the ratchet is its only mutable part.
#[derive(Debug, Clone)]
pub struct Policy {
    project: RuleTable,
    org: RuleTable,
    defaults: RuleTable,
    ratchet: Ratchet,
    sandbox: SandboxConfig,
    limits: LimitsConfig,
    subagents: SubagentsConfig,
    budget: BudgetConfig,
    plugins: Vec<crate::plugins::PluginConfig>,
    project_file: Option<PathBuf>,
    org_file: Option<PathBuf>,
    mcp_servers: Vec<crate::mcp::ServerDef>,
    host_paths: HostPaths,
}

/// The shipped defaults, parsed once.
pub fn shipped_defaults() -> Result<&'static RuleTable, PolicyError> {
    static PARSED: OnceLock<Result<RuleTable, PolicyError>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            file::parse(
                Path::new(SHIPPED_DEFAULTS_NAME),
                SHIPPED_DEFAULTS,
                Role::Shipped,
                &HostPaths::default(),
            )
            .map(|parsed| parsed.rules)
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Policy {
    /// Reads `<project_dir>/chock.toml` (if present) and the org bundle (`$CHOCK_ORG_POLICY`, which
    /// must exist when set, else `/etc/chock/org.toml` if present), and checks both.
    pub fn load(project_dir: &Path) -> Result<Policy, PolicyError> {
        let absolute = project_dir
            .canonicalize()
            .unwrap_or_else(|_| project_dir.to_path_buf());
        let project_file = project_file_path(project_dir);
        refuse_foreign_link(&project_file, &absolute)?;
        let project = read_source(&project_file, Presence::Optional)?;
        let (org_path, presence) = org_bundle_path();
        let org = read_source(&org_path, presence)?;
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        // The one place the person's config.toml enters the policy, for every caller (a
        // session, `chock exec`, `chock policy show`, the daemon).
        let user = match crate::user_config::user_config_path() {
            Some(path) => read_source(&path, Presence::Optional)?,
            None => None,
        };
        Policy::from_sources(Sources {
            project,
            org,
            project_dir: Some(absolute),
            home,
            chock_dirs: chock_dirs_from_env(),
            user,
        })
    }

    /// Checks and combines the given sources. Every load error is a [`PolicyError`].
    pub fn from_sources(sources: Sources) -> Result<Policy, PolicyError> {
        let defaults = shipped_defaults()?.clone();
        let mut ctx = HostPaths::with_own(sources.home.clone(), sources.chock_dirs.clone());
        ctx.project_dir.clone_from(&sources.project_dir);
        for source in [&sources.project, &sources.org].into_iter().flatten() {
            let absolute = source
                .path
                .canonicalize()
                .unwrap_or_else(|_| source.path.clone());
            ctx.policy_files.push(absolute);
        }
        let org = match &sources.org {
            Some(src) => file::parse(&src.path, &src.text, Role::Org, &ctx)?,
            None => ParsedFile::default(),
        };
        ctx.forbidden.clone_from(&org.forbidden);
        let mut project = match &sources.project {
            Some(src) => file::parse(&src.path, &src.text, Role::Project, &ctx)?,
            None => ParsedFile::default(),
        };
        if let Some(user) = &sources.user {
            crate::user_config::apply_user_toolchains(user, &ctx, &mut project.sandbox)?;
        }
        if let Some(src) = &sources.project {
            check_org_conflicts(
                &Located {
                    file: &src.path,
                    text: &src.text,
                },
                &project,
                &org.rules,
            )?;
        }
        let mut limits = LimitsConfig::default();
        apply_numbers(
            &mut limits.fields_mut(),
            &project.limits,
            &org.limits,
            sources.project.as_ref(),
        )?;
        let mut subagents = SubagentsConfig::default();
        apply_numbers(
            &mut subagents.fields_mut(),
            &project.subagents,
            &org.subagents,
            sources.project.as_ref(),
        )?;
        Ok(Policy {
            project: project.rules,
            org: org.rules,
            defaults,
            ratchet: Ratchet::default(),
            sandbox: project.sandbox,
            limits,
            subagents,
            budget: project.budget.stricter(org.budget),
            plugins: project.plugins,
            project_file: sources.project.map(|s| s.path),
            org_file: sources.org.map(|s| s.path),
            mcp_servers: project.mcp,
            host_paths: ctx,
        })
    }

    /// The MCP servers the project's chock.toml configures (`[mcp.servers.NAME]`), checked. None
    /// of them starts before the person trusts its exact definition (chock-mcp).
    pub fn mcp_servers(&self) -> &[crate::mcp::ServerDef] {
        &self.mcp_servers
    }

    /// The checker every host path a table declares goes through, with this load's context
    /// (the home, the project, the policy files, the org bundle's `forbid` list, Chock's own
    /// directories and binaries): an MCP server's `read` and `cache` are checked with it again
    /// each time the server starts.
    pub fn host_paths(&self) -> &HostPaths {
        &self.host_paths
    }

    /// Decides one action (see the module documentation for the order).
    pub fn decide(&self, action: &Action) -> Verdict {
        let project = self.project.most_specific(action);
        let org = self.org.most_specific(action);
        let mut verdict = match (project, org) {
            (Some(p), Some(o)) if p.decision.is_stricter_than(o.decision) => project_verdict(p),
            (_, Some(o)) => org_verdict(o),
            (Some(p), None) => project_verdict(p),
            (None, None) => match self.defaults.most_specific(action) {
                Some(rule) => Verdict {
                    decision: rule.decision,
                    decided_by: DecidedBy::ShippedDefault {
                        pattern: rule.pattern.to_string(),
                        why: rule.why.clone(),
                    },
                },
                None => Verdict {
                    decision: Decision::Ask,
                    decided_by: DecidedBy::NoRule,
                },
            },
        };
        if let Some((pattern, decision)) = self.ratchet.strictest(action)
            && decision.is_stricter_than(verdict.decision)
        {
            verdict = Verdict {
                decision,
                decided_by: DecidedBy::Ratchet {
                    pattern: pattern.to_string(),
                },
            };
        }
        verdict
    }

    /// Narrows the session's ratchet. Widening is refused: ask `ratchet.widen_action` instead.
    pub fn restrict(&mut self, pattern: &str, decision: Decision) -> Result<(), RatchetError> {
        self.ratchet.restrict(pattern, decision)
    }

    /// Adds a restriction inherited from the session that spawned this one: it binds like any
    /// narrowing, and no widening removes it.
    pub fn inherit(&mut self, pattern: &str, decision: Decision) -> Result<(), RatchetError> {
        self.ratchet.inherit(pattern, decision)
    }

    /// Removes ratchet entries inside `pattern`. Call this ONLY after `decide(ratchet.widen_action)`
    /// was answered allow (by the table or by a person); this crate cannot check that answer.
    pub fn widen(
        &mut self,
        pattern: &str,
    ) -> Result<Vec<(crate::Pattern, Decision)>, RatchetError> {
        self.ratchet.widen(pattern)
    }

    /// The session ratchet.
    pub fn ratchet(&self) -> &Ratchet {
        &self.ratchet
    }

    /// The validated `[sandbox]` table.
    pub fn sandbox(&self) -> &SandboxConfig {
        &self.sandbox
    }

    /// The `[limits]` in force (defaults, lowered to the org's ceilings).
    pub fn limits(&self) -> &LimitsConfig {
        &self.limits
    }

    /// The project's `[plugins.NAME]` tables, by name.
    pub fn plugins(&self) -> &[crate::plugins::PluginConfig] {
        &self.plugins
    }

    /// The `[subagents]` bounds in force.
    pub fn subagents(&self) -> &SubagentsConfig {
        &self.subagents
    }

    /// The `[budget]` in force (the project's, lowered to the org's ceiling).
    pub fn budget(&self) -> &BudgetConfig {
        &self.budget
    }

    /// The project's chock.toml, when it has one.
    pub fn project_file(&self) -> Option<&Path> {
        self.project_file.as_deref()
    }

    /// The org bundle, when there is one.
    pub fn org_file(&self) -> Option<&Path> {
        self.org_file.as_deref()
    }

    /// The project's rules.
    pub fn project_rules(&self) -> &RuleTable {
        &self.project
    }

    /// The org bundle's rules.
    pub fn org_rules(&self) -> &RuleTable {
        &self.org
    }
}

fn project_verdict(rule: &Rule) -> Verdict {
    Verdict {
        decision: rule.decision,
        decided_by: DecidedBy::Project {
            file: rule.file.clone(),
            line: rule.line,
            pattern: rule.pattern.to_string(),
        },
    }
}

fn org_verdict(rule: &Rule) -> Verdict {
    Verdict {
        decision: rule.decision,
        decided_by: DecidedBy::Org {
            file: rule.file.clone(),
            line: rule.line,
            pattern: rule.pattern.to_string(),
        },
    }
}

/// A project rule conflicts with the org bundle when the org rule that covers the rule's whole set
/// (the most specific org rule containing it) is stricter. Org rules strictly inside a broad project
/// rule are not conflicts: the project rule still decides the rest of its set, and `decide` applies
/// the org's stricter answer where it speaks.
fn check_org_conflicts(
    loc: &Located<'_>,
    project: &ParsedFile,
    org: &RuleTable,
) -> Result<(), PolicyError> {
    for (rule, span) in project.rules.rules().iter().zip(&project.rule_spans) {
        if let Some(org_rule) = org.covering(&rule.pattern)
            && org_rule.decision.is_stricter_than(rule.decision)
        {
            return Err(loc.error(
                span.clone(),
                ErrorKind::OrgConflict {
                    org_rule: format!("{} (`{}`)", org_rule.place(), org_rule.pattern),
                    org_decision: org_rule.decision.to_string(),
                    decision: rule.decision.to_string(),
                },
            ));
        }
    }
    Ok(())
}

/// Applies project values over defaults, then the org's ceilings: a default above a ceiling is lowered
/// to it; a project value above a ceiling is an error naming both places.
fn apply_numbers(
    fields: &mut [(&'static str, &mut u64)],
    project: &[(&'static str, file::Written)],
    org: &[(&'static str, file::Written)],
    project_source: Option<&Source>,
) -> Result<(), PolicyError> {
    for (name, value) in fields.iter_mut() {
        let ceiling = org.iter().find(|(n, _)| n == name).map(|(_, w)| w);
        let written = project.iter().find(|(n, _)| n == name).map(|(_, w)| w);
        if let Some(w) = written {
            if let (Some(c), Some(src)) = (ceiling, project_source)
                && w.value > c.value
            {
                return Err(PolicyError {
                    file: src.path.clone(),
                    line: w.line,
                    column: w.column,
                    kind: Box::new(ErrorKind::Limit(format!(
                        "`{name}` = {} is above the org bundle's ceiling {} at {}",
                        w.value, c.value, c.place
                    ))),
                    text: w.value.to_string(),
                });
            }
            **value = w.value;
        } else if let Some(c) = ceiling {
            **value = (**value).min(c.value);
        }
    }
    Ok(())
}
