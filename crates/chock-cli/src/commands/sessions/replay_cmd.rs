//! `chock sessions replay SESSION --policy FILE`: loads FILE as a project chock.toml (with the org
//! bundle as configured, or `--org FILE`), replays the session's acts under it (`replay.rs`) and
//! prints one line per act and a summary, or JSON lines with `--json`.
//!
//! Exit status: 0 when every act was judged and none differs, 1 when some differ (or an event
//! could not be read as its type, so its act could not be judged), 2 for bad input (an unknown
//! session, a policy file that cannot be read or does not load).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use chock_policy::{Policy, Presence, Sources};
use chock_protocol::log::{RatchetChange, TableDecision};
use serde::Serialize;

use super::find;
use super::replay::{ActLine, Counts, Judgement, RatchetLine, Recorded, Step, UnreadableLine};
use crate::exit::{self, Exit};
use crate::say::say;

/// What `replay` was asked.
pub(super) struct ReplayArgs<'a> {
    pub(super) id: &'a str,
    pub(super) policy: &'a Path,
    pub(super) org: Option<&'a Path>,
    pub(super) json: bool,
}

/// The summary line of `--json`.
#[derive(Debug, Serialize)]
struct SummaryLine<'a> {
    line: &'static str,
    session: &'a str,
    policy: String,
    org: Option<String>,
    #[serde(flatten)]
    counts: &'a Counts,
}

pub(super) fn run(args: &ReplayArgs<'_>) -> anyhow::Result<ExitCode> {
    let dir = find(args.id)?;
    let policy = load(args.policy, args.org)?;
    let org = policy.org_file().map(|p| p.display().to_string());
    let events =
        chock_log::read_events(&dir).with_context(|| format!("reading session {}", args.id))?;
    let session = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let (steps, counts) = super::replay::replay(&events, policy);
    if args.json {
        for step in &steps {
            crate::say::json(step)?;
        }
        let summary = SummaryLine {
            line: "summary",
            session: &session,
            policy: args.policy.display().to_string(),
            org,
            counts: &counts,
        };
        crate::say::json(&summary)?;
    } else {
        say!(
            "replay of session {session} under {} ({})",
            args.policy.display(),
            org.map_or("no org bundle".to_owned(), |o| format!("org bundle {o}"))
        );
        for step in &steps {
            say!("{}", render(step));
        }
        say!("{}", summary(&counts));
    }
    Ok(ExitCode::from(if counts.all_same() {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

/// FILE as a project table, above it the org bundle (`--org`, else as configured), exactly as
/// `chock policy lint` loads it. Every load error names the file and the line.
fn load(file: &Path, org: Option<&Path>) -> anyhow::Result<Policy> {
    let bad = |e: chock_policy::PolicyError| Exit::new(exit::BAD_INPUT, e.to_string());
    let Some(project) = chock_policy::read_source(file, Presence::Required).map_err(bad)? else {
        return Err(Exit::new(exit::BAD_INPUT, format!("{}: no such file", file.display())).into());
    };
    let org = match org {
        Some(path) => chock_policy::read_source(path, Presence::Required).map_err(bad)?,
        None => {
            let (path, presence) = chock_policy::org_bundle_path();
            chock_policy::read_source(&path, presence).map_err(bad)?
        }
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let project_dir = parent
        .canonicalize()
        .unwrap_or_else(|_| parent.to_path_buf());
    Ok(Policy::from_sources(Sources {
        project: Some(project),
        org,
        project_dir: Some(project_dir),
        home,
        chock_dirs: chock_policy::chock_dirs_from_env(),
        user: None,
    })
    .map_err(bad)?)
}

fn decision_name(d: TableDecision) -> &'static str {
    match d {
        TableDecision::Allow => "allow",
        TableDecision::Deny => "deny",
        TableDecision::Ask => "ask",
        TableDecision::AgentReview => "agent_review",
        TableDecision::AgentThenHuman => "agent_then_human",
    }
}

/// `allow, allowed (by …)`: what the log says of an act.
fn recorded_text(r: &Recorded) -> String {
    let decision = match (r.decision, r.inferred) {
        (Some(d), false) => decision_name(d).to_owned(),
        (Some(d), true) => format!("{} (no question logged)", decision_name(d)),
        (None, _) => "?".to_owned(),
    };
    let outcome = match r.allowed {
        Some(true) => "allowed",
        Some(false) => "refused",
        None => "unanswered",
    };
    match &r.decided_by {
        Some(by) => format!("{decision}, {outcome} [{by}]"),
        None => format!("{decision}, {outcome}"),
    }
}

/// One line of the text output (`say!` escapes it for the terminal).
fn render(step: &Step) -> String {
    match step {
        Step::Act(act) => render_act(act),
        Step::Ratchet(r) => render_ratchet(r),
        Step::Unreadable(u) => render_unreadable(u),
    }
}

fn lead(seq: u64, call_id: Option<&str>) -> String {
    format!("{seq:>4}  {:<12}  ", call_id.unwrap_or("-"))
}

fn render_act(act: &ActLine) -> String {
    let mut out = lead(act.seq, act.call_id.as_deref());
    let action = act.action.as_deref().unwrap_or("(no action)");
    let recorded = recorded_text(&act.recorded);
    match &act.judgement {
        Judgement::Same { replayed } => out.push_str(&format!(
            "{action}: {recorded} → {} [{}]",
            decision_name(replayed.decision),
            replayed.decided_by
        )),
        Judgement::Differs { replayed, .. } => out.push_str(&format!(
            "{action}: {recorded} → {} [{}]  ≠",
            decision_name(replayed.decision),
            replayed.decided_by
        )),
        Judgement::Unclassified => out.push_str(&format!(
            "{action}: {recorded} → not judged: the input could not be classified"
        )),
        Judgement::NoCapability => out.push_str(&format!(
            "{action}: {recorded} → not judged: it grants no capability"
        )),
        Judgement::NotAnAction { reason } => out.push_str(&format!(
            "{action}: {recorded} → not judged: not an action name ({reason})  ?"
        )),
    }
    out
}

fn render_ratchet(r: &RatchetLine) -> String {
    let change = match r.change {
        RatchetChange::Restrict => "restrict",
        RatchetChange::Widen => "widen",
    };
    let mut out = lead(r.seq, r.call_id.as_deref());
    out.push_str(&format!(
        "(ratchet: {change} `{}` to {}",
        r.pattern, r.decision
    ));
    match &r.error {
        None => out.push_str(", applied)"),
        Some(err) => out.push_str(&format!(", NOT applied: {err})  ?")),
    }
    out
}

fn render_unreadable(u: &UnreadableLine) -> String {
    format!(
        "{}({} does not match its type, not judged: {})  ?",
        lead(u.seq, u.call_id.as_deref()),
        u.kind,
        u.reason
    )
}

/// `N acts, M differ: X would now be allowed that were refused, Y refused that were allowed, Z
/// asked`, then what could not be judged.
fn summary(c: &Counts) -> String {
    let mut out = format!(
        "{} acts, {} differ: {} would now be allowed that were refused, {} refused that were allowed, {} asked",
        c.acts, c.differ, c.now_allowed, c.now_refused, c.now_asked
    );
    if c.otherwise > 0 {
        out.push_str(&format!(
            ", {} decided differently with the same outcome",
            c.otherwise
        ));
    }
    let without = c.unclassified + c.no_capability;
    if without > 0 {
        out.push_str(&format!(
            "; {without} without an action, not judged ({} refused as unclassifiable, {} granting no capability)",
            c.unclassified, c.no_capability
        ));
    }
    if c.not_an_action > 0 {
        out.push_str(&format!(
            "; {} with an action name this build cannot read",
            c.not_an_action
        ));
    }
    if c.unreadable > 0 {
        out.push_str(&format!(
            "; {} events do not match their type and were not judged",
            c.unreadable
        ));
    }
    if c.ratchet_errors > 0 {
        out.push_str(&format!(
            "; {} ratchet changes could not be applied",
            c.ratchet_errors
        ));
    }
    out
}
