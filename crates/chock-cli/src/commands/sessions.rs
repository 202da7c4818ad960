//! `chock sessions`: list, show, verify and seal session logs (the library is chock-log;
//! docs/log.md explains the format and what verify can and cannot see).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use chock_log::{
    Event, EventKind, KeyCheck, Liveness, LogError, SealCheck, SessionSummary, VerifyOptions,
    VerifyReport,
};
use serde_json::Value;

use crate::exit::{self, Exit};

/// `chock sessions …`.
#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// List sessions, oldest first, with whether their writer is alive.
    List,
    /// Print a session's events, one line each: seq, time, kind, call id, summary.
    Show {
        /// A session id, or a prefix of exactly one.
        id: String,
    },
    /// Check a session's hash chain and seal. Exit 0 intact (a torn last line from a crash
    /// is reported but is not a break), 1 broken.
    Verify {
        /// A session id, or a prefix of exactly one.
        id: String,
        /// Require the seal to be signed by this public key (a `seal.pub` PEM or 64 hex
        /// digits), for checking on another machine.
        #[arg(long, value_name = "FILE")]
        pubkey: Option<PathBuf>,
    },
    /// Sign the session's head with this machine's seal key (created on first use).
    Seal {
        /// A session id, or a prefix of exactly one.
        id: String,
    },
    /// Print this machine's seal public key (PEM), to give to `verify --pubkey` elsewhere.
    Pubkey,
}

pub fn run(cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SessionsCommand::List => list(),
        SessionsCommand::Show { id } => show(&id),
        SessionsCommand::Verify { id, pubkey } => verify(&id, pubkey.as_deref()),
        SessionsCommand::Seal { id } => seal(&id),
        SessionsCommand::Pubkey => pubkey(),
    }
}

fn root() -> anyhow::Result<PathBuf> {
    chock_log::sessions_root().map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()).into())
}

fn key_path() -> anyhow::Result<PathBuf> {
    chock_log::default_seal_key_path().map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()).into())
}

/// An unknown or ambiguous id is bad input (exit 2), named in the message.
fn find(id: &str) -> anyhow::Result<PathBuf> {
    let root = root()?;
    chock_log::find_session(&root, id).map_err(|e| match e {
        LogError::NotFound { .. } | LogError::Ambiguous { .. } => {
            Exit::new(exit::BAD_INPUT, format!("unknown session: {e}")).into()
        }
        other => anyhow::Error::new(other),
    })
}

fn list() -> anyhow::Result<ExitCode> {
    let root = root()?;
    let sessions = chock_log::list_sessions(&root)?;
    if sessions.is_empty() {
        println!("no sessions in {}", root.display());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<23}  {:<11}  {:>6}  {:<20}  {:<16}  PROJECT",
        "ID", "STATE", "EVENTS", "LAST EVENT", "LAST KIND"
    );
    for s in &sessions {
        println!(
            "{:<23}  {:<11}  {:>6}  {:<20}  {:<16}  {}",
            s.id,
            state(s),
            s.events,
            s.last_ts.as_deref().map_or("-".to_owned(), short_time),
            s.last_kind.map_or("-", EventKind::as_str),
            printable(s.project.as_deref().unwrap_or("-")),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// live: a writer holds the lock; ended: its last event is session.end; interrupted: the
/// writer is gone without saying goodbye (crashed or killed).
fn state(s: &SessionSummary) -> String {
    match s.liveness {
        Liveness::Live { pid } => format!("live:{pid}"),
        _ if s.last_kind == Some(EventKind::SessionEnd) => "ended".into(),
        Liveness::Stale { .. } => "interrupted".into(),
        Liveness::NoLock => "no-writer".into(),
    }
}

/// `2026-11-30T00:26:38.123456Z` → `2026-11-30 00:26:38`.
fn short_time(ts: &str) -> String {
    let mut t = ts.replacen('T', " ", 1);
    if let Some(dot) = t.find('.') {
        t.truncate(dot);
    }
    printable(t.trim_end_matches('Z'))
}

/// `text` safe to print on a terminal: control characters (escape sequences, carriage returns,
/// newlines) and the bidirectional overrides are shown escaped (`\u{1b}`). A log holds text
/// the model, a command or a web page wrote, and a log is also read after being copied from
/// another machine: printing it raw would let that text drive the reader's terminal (clear
/// lines, rewrite what was shown, set the clipboard) or reorder what the reader sees.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn show(id: &str) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let events = chock_log::read_events(&dir).with_context(|| format!("reading session {id}"))?;
    println!(
        "session {} ({})",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        dir.display()
    );
    println!(
        "{:>4}  {:<19}  {:<16}  {:<12}  SUMMARY",
        "SEQ", "TIME (UTC)", "KIND", "CALL"
    );
    for event in &events {
        println!(
            "{:>4}  {:<19}  {:<16}  {:<12}  {}",
            event.seq,
            short_time(&event.ts),
            event.kind.as_str(),
            printable(event.call_id.as_deref().unwrap_or("-")),
            summary(event)
        );
    }
    // A reader should not mistake a damaged log for a whole one.
    let report = chock_log::verify(&dir)?;
    if let Some(torn) = &report.torn_tail {
        println!(
            "(line {} is torn, a write cut short by a crash, and is not shown)",
            torn.line
        );
    }
    if !report.is_intact() {
        println!(
            "(this log does not verify: run `chock sessions verify {}`)",
            report.session_id
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The fields worth a glance for each kind, in order; anything else falls back to compact JSON.
fn summary_fields(kind: EventKind) -> &'static [&'static str] {
    match kind {
        EventKind::SessionStart => &["project", "parent", "model", "chock_version"],
        EventKind::TurnStart | EventKind::TurnEnd => &["turn", "stop_reason"],
        EventKind::ModelRequest => &["provider", "model", "messages"],
        EventKind::ModelResponse => &[
            "model",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "stop_reason",
        ],
        EventKind::ModelRetry => &["attempt", "reason", "delay_ms"],
        EventKind::ToolCall => &["tool", "input"],
        EventKind::Decision => &["action", "decision", "decided_by"],
        EventKind::NetDecision => &[
            "stage",
            "action",
            "host",
            "decision",
            "decided_by",
            "addresses_checked",
            "reason",
        ],
        EventKind::ApprovalAsk => &["action", "asked", "question"],
        EventKind::ApprovalAnswer => &["answer", "by", "reason"],
        EventKind::ToolResult => &["status", "error", "summary"],
        EventKind::SessionSpawn => &["child", "task"],
        EventKind::AgentComplete => &["summary"],
        EventKind::WorkspaceApply => &["apply_id", "files"],
        EventKind::WorkspaceAdopt => &["files"],
        EventKind::SessionImported => &["from", "events"],
        EventKind::NetConnect => &[
            "phase",
            "host",
            "port",
            "address_used",
            "bytes_sent",
            "bytes_received",
            "reason",
        ],
        EventKind::Note => &["text"],
        EventKind::SessionEnd => &["reason", "status"],
        _ => &[],
    }
}

const SUMMARY_MAX: usize = 100;

fn summary(event: &Event) -> String {
    let mut out = String::new();
    for key in summary_fields(event.kind) {
        match event.data.get(*key) {
            None | Some(Value::Null) => {}
            Some(value) => {
                if !out.is_empty() {
                    out.push_str(", ");
                }
                let _ = write!(out, "{key}={}", compact(value));
            }
        }
    }
    if out.is_empty() {
        out = event.data.to_string();
    }
    // Keys of the fallback JSON and anything else that reached `out` are made printable too.
    truncate(&printable(&out), SUMMARY_MAX)
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => printable(s),
        other => other.to_string(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

fn verify(id: &str, pubkey: Option<&Path>) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let trusted_key = match pubkey {
        Some(path) => Some(
            chock_log::read_public_key(path)
                .map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?,
        ),
        None => None,
    };
    let report = chock_log::verify_with(&dir, &VerifyOptions { trusted_key })?;
    // The report quotes bytes of the log and its seal (a kind, a session id, a seal format),
    // which may come from another machine: each line is made printable.
    let rendered = render_report(&report, local_public_key().as_deref());
    for line in rendered.lines() {
        println!("{}", printable(line));
    }
    Ok(ExitCode::from(if report.is_intact() {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

/// This machine's seal public key as hex, if it has one (never created by verify).
fn local_public_key() -> Option<String> {
    let key = chock_log::default_seal_key_path().ok()?;
    let public = chock_log::read_public_key(&chock_log::public_key_path(&key)).ok()?;
    Some(hex_of(public.as_bytes()))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn render_report(report: &VerifyReport, local_key: Option<&str>) -> String {
    let mut out = String::new();
    let verdict = if report.is_intact() {
        "intact"
    } else {
        "BROKEN"
    };
    let _ = writeln!(out, "session {}: {verdict}", report.session_id);
    let head = report
        .head
        .as_ref()
        .map_or("no complete event".to_owned(), |h| {
            format!(
                "head seq {} (sha256 {})",
                h.seq,
                &h.hash[..16.min(h.hash.len())]
            )
        });
    let _ = writeln!(
        out,
        "  {} lines, {} bytes, {head}",
        report.lines, report.bytes
    );
    for problem in &report.problems {
        let _ = writeln!(out, "  {problem}");
    }
    if let Some(torn) = &report.torn_tail {
        let why = if torn.missing_newline {
            "no trailing newline"
        } else {
            "not JSON"
        };
        let _ = writeln!(
            out,
            "  torn tail: line {} ({} bytes at offset {}, {why}), left by a crash mid-write; every line before it was checked",
            torn.line, torn.len, torn.offset
        );
    }
    match &report.seal {
        SealCheck::Unsealed => {
            let _ = writeln!(
                out,
                "  not sealed (the last line is only protected by a seal: `chock sessions seal`)"
            );
        }
        SealCheck::Sealed {
            seq,
            events_after,
            public_key,
            key,
        } => {
            let whose = match key {
                KeyCheck::Trusted => "the trusted key",
                KeyCheck::NotChecked if Some(public_key.as_str()) == local_key => {
                    "this machine's key"
                }
                KeyCheck::NotChecked => "a key not checked (pass --pubkey FILE)",
            };
            let _ = writeln!(
                out,
                "  sealed at seq {seq}, {events_after} events after; signed by {whose} {}",
                &public_key[..16.min(public_key.len())]
            );
        }
        SealCheck::Broken { reason } => {
            let _ = writeln!(out, "  seal broken: {reason}");
        }
    }
    out
}

fn seal(id: &str) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let key = key_path()?;
    let seal = chock_log::seal(&dir, &key)?;
    println!(
        "sealed session {} at seq {} (sha256 {})",
        seal.session_id, seal.head_seq, seal.head_hash
    );
    println!("  seal: {}", dir.join(chock_log::SEAL_FILE).display());
    println!(
        "  key:  {} (public key: {})",
        key.display(),
        chock_log::public_key_path(&key).display()
    );
    Ok(ExitCode::SUCCESS)
}

fn pubkey() -> anyhow::Result<ExitCode> {
    let key = key_path()?;
    print!("{}", chock_log::public_key_pem(&key)?);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, data: Value) -> Event {
        Event {
            seq: 1,
            ts: "2026-11-30T00:00:00Z".into(),
            kind,
            call_id: None,
            prev: String::new(),
            data,
        }
    }

    /// Text from a model or a web page cannot drive the terminal of whoever reads the log.
    #[test]
    fn escape_sequences_and_bidi_overrides_are_shown_escaped() {
        let note = event(
            EventKind::Note,
            serde_json::json!({"text": "ok\u{1b}[2J\rrm -rf\u{202e}txt.exe\nnext"}),
        );
        let line = summary(&note);
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        assert_eq!(line, "text=ok\\u{1b}[2J\\rrm -rf\\u{202e}txt.exe\\nnext");
        // The JSON fallback for a kind without chosen fields is escaped by JSON already.
        let other = event(EventKind::Note, serde_json::json!({"\u{1b}k": 1}));
        assert!(!summary(&other).contains('\u{1b}'), "{}", summary(&other));
        assert_eq!(printable("plain text, ünïcode"), "plain text, ünïcode");
    }

    #[test]
    fn a_connection_event_shows_the_address_used_and_the_bytes() {
        let close = event(
            EventKind::NetConnect,
            serde_json::json!({"phase": "close", "door": "proxy", "host": "example.org",
                "port": 443, "address_used": "1.2.3.4:443", "bytes_sent": 10, "bytes_received": 20}),
        );
        assert_eq!(
            summary(&close),
            "phase=close, host=example.org, port=443, address_used=1.2.3.4:443, bytes_sent=10, bytes_received=20"
        );
    }
}
