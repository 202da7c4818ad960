//! Reading one policy file (chock.toml, the org bundle, or the shipped defaults) into checked parts.
//!
//! The same parser reads all three, so the shipped defaults are held to every rule a project is.
//! Unknown fields are refused everywhere: a misspelt key that was silently ignored would look like a
//! rule that is in force.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::catalogue;
use crate::decision::Decision;
use crate::error::{ErrorKind, Located, PolicyError};
use crate::host_paths::{Access, HostPaths, check_nesting, with_real};
use crate::limits::{BudgetConfig, LimitsConfig, SubagentsConfig};
use crate::pattern::Pattern;
use crate::sandbox::{self, SandboxConfig};
use crate::table::{Rule, RuleTable};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<RawRule>,
    sandbox: Option<RawSandbox>,
    limits: Option<RawLimits>,
    subagents: Option<RawSubagents>,
    budget: Option<RawBudget>,
    mcp: Option<Spanned<crate::mcp::McpSection>>,
    plugins: Option<crate::plugins::RawPlugins>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    usd: Option<Spanned<f64>>,
    tokens: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    action: Spanned<String>,
    decision: Spanned<String>,
    why: Option<String>,
}

type SpannedList = Option<Spanned<Vec<Spanned<String>>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    read: SpannedList,
    write: SpannedList,
    env: SpannedList,
    forbid: SpannedList,
    /// Shipped profiles to expand (`toolchains.rs`).
    toolchains: SpannedList,
    /// What confines each call: `process` or `microvm` (docs/microvm.md).
    isolation: Option<Spanned<String>>,
    /// Whether a microVM session snapshots its guest after each completed turn (docs/microvm.md).
    snapshots: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    timeout_secs: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    pids: Option<Spanned<u64>>,
    cpu_percent: Option<Spanned<u64>>,
    file_size_mb: Option<Spanned<u64>>,
    open_files: Option<Spanned<u64>>,
    tmp_size_mb: Option<Spanned<u64>>,
}

impl RawLimits {
    fn by_name(&self, name: &str) -> Option<&Spanned<u64>> {
        match name {
            "timeout_secs" => self.timeout_secs.as_ref(),
            "memory_mb" => self.memory_mb.as_ref(),
            "pids" => self.pids.as_ref(),
            "cpu_percent" => self.cpu_percent.as_ref(),
            "file_size_mb" => self.file_size_mb.as_ref(),
            "open_files" => self.open_files.as_ref(),
            "tmp_size_mb" => self.tmp_size_mb.as_ref(),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubagents {
    max_depth: Option<Spanned<u64>>,
    max_width: Option<Spanned<u64>>,
}

impl RawSubagents {
    fn by_name(&self, name: &str) -> Option<&Spanned<u64>> {
        match name {
            "max_depth" => self.max_depth.as_ref(),
            "max_width" => self.max_width.as_ref(),
            _ => None,
        }
    }
}

/// Which layer a file is: it decides which tables the file may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The shipped defaults: rules only.
    Shipped,
    /// The org bundle: rules, `[sandbox] forbid`, and ceilings in `[limits]`/`[subagents]`.
    Org,
    /// The project's chock.toml: rules, `[sandbox] read/write/env`, `[limits]`, `[subagents]`.
    Project,
}

/// A limit value as written, with where it was written, for checking against a ceiling.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub value: u64,
    /// `file:line`, for naming it in another file's error.
    pub place: String,
    pub line: usize,
    pub column: usize,
}

/// One file, parsed and checked on its own (cross-layer checks happen in `policy.rs`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ParsedFile {
    pub rules: RuleTable,
    /// Byte span of each rule's `action` value, for cross-layer errors.
    pub rule_spans: Vec<Range<usize>>,
    pub sandbox: SandboxConfig,
    /// Org only: forbidden paths with `file:line`.
    pub forbidden: Vec<(PathBuf, String)>,
    /// Limits and subagent values as written (name, value, place).
    pub limits: Vec<(&'static str, Written)>,
    pub subagents: Vec<(&'static str, Written)>,
    /// `[budget]` as written (checked: positive, finite).
    pub budget: BudgetConfig,
    /// Project only: the `[mcp.servers.NAME]` tables, checked.
    pub mcp: Vec<crate::mcp::ServerDef>,
    /// Project only: `[plugins.NAME]`.
    pub plugins: Vec<crate::plugins::PluginConfig>,
}

/// Parses one file. `ctx` carries what sandbox path checks need (for a project: the org's forbids).
pub(crate) fn parse(
    file: &Path,
    text: &str,
    role: Role,
    ctx: &HostPaths,
) -> Result<ParsedFile, PolicyError> {
    let loc = Located { file, text };
    let raw: RawFile = toml::from_str(text).map_err(|err| {
        let span = err.span().unwrap_or(0..0);
        loc.error(span, ErrorKind::Toml(err.message().trim().to_owned()))
    })?;

    let mut parsed = ParsedFile::default();
    let mut rules = Vec::with_capacity(raw.rule.len());
    let mut lines = LineCounter::new(text);
    for raw_rule in raw.rule {
        let span = raw_rule.action.span();
        let action_text = raw_rule.action.get_ref();
        let pattern = Pattern::parse(action_text)
            .map_err(|e| loc.error(span.clone(), ErrorKind::MalformedAction(e)))?;
        if !catalogue::pattern_is_defined(&pattern) {
            return Err(loc.error(span, ErrorKind::UndefinedAction));
        }
        let decision = Decision::from_name(raw_rule.decision.get_ref())
            .ok_or_else(|| loc.error(raw_rule.decision.span(), ErrorKind::UnknownDecision))?;
        rules.push(Rule {
            pattern,
            decision,
            why: raw_rule.why,
            file: file.to_path_buf(),
            line: lines.line(span.start),
        });
        parsed.rule_spans.push(span);
    }
    parsed.rules = RuleTable::new(rules);
    if let Some((earlier, later)) = parsed.rules.first_ambiguous_pair() {
        let index = parsed
            .rules
            .rules()
            .iter()
            .position(|r| std::ptr::eq(r, later))
            .unwrap_or(0);
        let span = parsed.rule_spans.get(index).cloned().unwrap_or(0..0);
        return Err(loc.error(
            span,
            ErrorKind::Ambiguous {
                other: format!("the rule at {} (`{}`)", earlier.place(), earlier.pattern),
                other_decision: earlier.decision.to_string(),
                decision: later.decision.to_string(),
            },
        ));
    }

    if let Some(sandbox) = raw.sandbox {
        parse_sandbox(&loc, sandbox, role, ctx, &mut parsed)?;
    }
    if let Some(limits) = raw.limits {
        refuse_in_shipped(&loc, role, text, "[limits]")?;
        let mut names = LimitsConfig::default();
        for (name, _) in names.fields_mut() {
            if let Some(value) = limits.by_name(name) {
                parsed.limits.push((name, written(&loc, value, 1)?));
            }
        }
    }
    if let Some(subagents) = raw.subagents {
        refuse_in_shipped(&loc, role, text, "[subagents]")?;
        let mut names = SubagentsConfig::default();
        for (name, _) in names.fields_mut() {
            if let Some(value) = subagents.by_name(name) {
                parsed.subagents.push((name, written(&loc, value, 0)?));
            }
        }
    }
    if let Some(budget) = raw.budget {
        refuse_in_shipped(&loc, role, text, "[budget]")?;
        if let Some(usd) = &budget.usd {
            let value = *usd.get_ref();
            if !value.is_finite() || value <= 0.0 {
                return Err(loc.error(
                    usd.span(),
                    ErrorKind::Limit("usd must be a positive number of dollars".into()),
                ));
            }
            parsed.budget.usd = Some(value);
        }
        if let Some(tokens) = &budget.tokens {
            if *tokens.get_ref() == 0 {
                return Err(loc.error(
                    tokens.span(),
                    ErrorKind::Limit("tokens must be at least 1".into()),
                ));
            }
            parsed.budget.tokens = Some(*tokens.get_ref());
        }
    }
    if let Some(mcp) = raw.mcp {
        let span = mcp.span();
        if role != Role::Project {
            return Err(loc.error(
                span,
                ErrorKind::Mcp(
                    "only a project's chock.toml (or config.toml) configures MCP servers".into(),
                ),
            ));
        }
        let sandbox_paths = parsed.sandbox.declared();
        let checked = mcp.get_ref().check_with(file, ctx).and_then(|defs| {
            for def in &defs {
                def.check_paths(file, ctx, &sandbox_paths)?;
            }
            Ok(defs)
        });
        parsed.mcp = checked.map_err(|e| {
            let at = text
                .find(&format!("[mcp.servers.{}]", e.server))
                .map_or(span.clone(), |at| at..at + e.server.len() + 14);
            loc.error(
                at,
                ErrorKind::Mcp(format!(
                    "mcp.servers.{}{}: {}",
                    e.server,
                    if e.field.is_empty() {
                        String::new()
                    } else {
                        format!(".{}", e.field)
                    },
                    e.problem
                )),
            )
        })?;
    }
    if let Some(plugins) = raw.plugins {
        if role != Role::Project {
            let at = text.find("[plugins").unwrap_or(0);
            return Err(loc.error(
                at..at + "[plugins".len(),
                ErrorKind::Plugin("plugins are configured by a project's chock.toml".into()),
            ));
        }
        parsed.plugins = crate::plugins::parse(&loc, plugins)?;
    }
    Ok(parsed)
}

/// The 1-based line of byte offsets asked in increasing order, counted on from the last one: the
/// rules come in file order, and counting from the top for each made parsing the shipped defaults
/// (at every start of every `chock` process) quadratic in their length.
struct LineCounter<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        LineCounter {
            text,
            at: 0,
            line: 1,
        }
    }

    /// As [`Located::line`] (an offset before the last one counts from the top again).
    fn line(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        if offset < self.at {
            (self.at, self.line) = (0, 1);
        }
        let newlines = self.text.as_bytes()[self.at..offset]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        self.line += newlines;
        self.at = offset;
        self.line
    }
}

fn written(loc: &Located<'_>, value: &Spanned<u64>, min: u64) -> Result<Written, PolicyError> {
    if *value.get_ref() < min {
        return Err(loc.error(
            value.span(),
            ErrorKind::Limit(format!("must be at least {min}")),
        ));
    }
    let (line, column) = loc.line_column(value.span().start);
    Ok(Written {
        value: *value.get_ref(),
        place: loc.place(value.span().start),
        line,
        column,
    })
}

fn refuse_in_shipped(
    loc: &Located<'_>,
    role: Role,
    text: &str,
    table: &str,
) -> Result<(), PolicyError> {
    if role == Role::Shipped {
        let at = text.find(table).unwrap_or(0);
        return Err(loc.error(
            at..at + table.len(),
            ErrorKind::Toml(format!("the shipped defaults hold rules only, not {table}")),
        ));
    }
    Ok(())
}

/// A declared path lying under another declared write path is refused ([`check_nesting`]).
/// `spans` holds each read/write entry's span in the order of `sandbox.read` then `sandbox.write`.
fn refuse_paths_under_write_paths(
    loc: &Located<'_>,
    spans: &[Range<usize>],
    sandbox: &SandboxConfig,
) -> Result<(), PolicyError> {
    check_nesting(&sandbox.declared()).map_err(|(at, why)| {
        loc.error(
            spans.get(at).cloned().unwrap_or(0..0),
            ErrorKind::SandboxPath(why),
        )
    })
}

fn parse_sandbox(
    loc: &Located<'_>,
    raw: RawSandbox,
    role: Role,
    ctx: &HostPaths,
    parsed: &mut ParsedFile,
) -> Result<(), PolicyError> {
    let wrong_layer = |list: &Spanned<Vec<Spanned<String>>>, why: &str| {
        loc.error(list.span(), ErrorKind::SandboxPath(why.to_owned()))
    };
    match role {
        Role::Shipped => {
            let any = raw
                .read
                .as_ref()
                .or(raw.write.as_ref())
                .or(raw.env.as_ref())
                .or(raw.forbid.as_ref())
                .or(raw.toolchains.as_ref());
            if let Some(list) = any {
                return Err(wrong_layer(list, "the shipped defaults hold rules only"));
            }
        }
        Role::Org => {
            if let Some(list) = raw
                .read
                .as_ref()
                .or(raw.write.as_ref())
                .or(raw.env.as_ref())
                .or(raw.toolchains.as_ref())
            {
                return Err(wrong_layer(
                    list,
                    "the org bundle may only `forbid` paths; projects add read, write, env and toolchains",
                ));
            }
        }
        Role::Project => {
            if let Some(list) = raw.forbid.as_ref() {
                return Err(wrong_layer(list, "`forbid` belongs in the org bundle"));
            }
        }
    }
    if let Some(isolation) = &raw.isolation {
        let span = isolation.span();
        if role != Role::Project {
            return Err(loc.error(
                span,
                ErrorKind::SandboxPath("`isolation` belongs in the project's chock.toml".into()),
            ));
        }
        parsed.sandbox.isolation = sandbox::Isolation::parse(isolation.get_ref())
            .ok_or_else(|| loc.error(span, ErrorKind::Isolation))?;
    }
    if let Some(snapshots) = &raw.snapshots {
        let span = snapshots.span();
        if role != Role::Project {
            return Err(loc.error(
                span,
                ErrorKind::SandboxPath("`snapshots` belongs in the project's chock.toml".into()),
            ));
        }
        if *snapshots.get_ref() && parsed.sandbox.isolation != sandbox::Isolation::Microvm {
            return Err(loc.error(span, ErrorKind::Snapshots));
        }
        parsed.sandbox.snapshots = *snapshots.get_ref();
    }
    // `None`: an org bundle's `forbid` entry, only expanded and made absolute.
    let lists = [
        (raw.read, Some(Access::Read)),
        (raw.write, Some(Access::Write)),
        (raw.forbid, None),
    ];
    let (mut read_spans, mut write_spans) = (Vec::new(), Vec::new());
    for (list, access) in lists {
        for item in list.map(Spanned::into_inner).unwrap_or_default() {
            let span = item.span();
            let bad = |why: String| loc.error(span.clone(), ErrorKind::SandboxPath(why));
            let path = ctx.expand(item.get_ref()).map_err(bad)?;
            if let Some(access) = access {
                ctx.check(&path, access).map_err(bad)?;
                match access {
                    Access::Read => read_spans.push(span.clone()),
                    Access::Write => write_spans.push(span.clone()),
                }
            }
            match access {
                Some(Access::Read) => parsed.sandbox.read.push(path),
                Some(Access::Write) => parsed.sandbox.write.push(path),
                None => {
                    for path in with_real(path) {
                        parsed.forbidden.push((path, loc.place(span.start)));
                    }
                }
            }
        }
    }
    for item in raw.env.map(Spanned::into_inner).unwrap_or_default() {
        sandbox::check_env_name(item.get_ref())
            .map_err(|why| loc.error(item.span(), ErrorKind::SandboxEnv(why)))?;
        parsed.sandbox.env.push(item.into_inner());
    }
    if let Some(list) = raw.toolchains {
        let host = crate::toolchains::Host {
            home: ctx.home.as_deref(),
            var: &crate::toolchains::process_var,
            project: ctx.project_dir.as_deref(),
        };
        let spans = (&mut read_spans, &mut write_spans);
        let list = list.into_inner();
        crate::toolchains::apply(loc, list, ctx, &host, &mut parsed.sandbox, spans)?;
    }
    read_spans.append(&mut write_spans);
    refuse_paths_under_write_paths(loc, &read_spans, &parsed.sandbox)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counter_agrees_with_located() {
        let text = "a = 1\n\n[[rule]]\naction = \"é.x\"\nb\n";
        let loc = Located {
            file: Path::new("t.toml"),
            text,
        };
        let mut lines = LineCounter::new(text);
        for offset in (0..=text.len() + 2).filter(|o| text.is_char_boundary(*o) || *o > text.len())
        {
            assert_eq!(lines.line(offset), loc.line(offset), "at {offset}");
        }
        assert_eq!(
            lines.line(0),
            1,
            "an earlier offset counts from the top again"
        );
    }
}
