//! `chock sessions`: list, show, verify, seal and replay session logs (the library is chock-log;
//! docs/log.md explains the format and what verify can and cannot see).

mod replay;
mod replay_cmd;
mod replay_fold;
mod show;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chock_log::{
    EventKind, KeyCheck, Liveness, LogError, SealCheck, SessionSummary, VerifyOptions, VerifyReport,
};

use crate::exit::{self, Exit};
use crate::say::{say, say_err};

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
    /// Start a new session at the end of a completed turn of this one: its workspace is the one
    /// that turn ended with, its ratchet and conversation the session's up to there. Prints the
    /// new session's id; take it up with `chock run --resume ID "TASK"` (docs/forks.md).
    Fork {
        /// A session id, or a prefix of exactly one.
        id: String,
        /// The completed turn to start from (1-based, as `chock sessions show` numbers them).
        #[arg(long, value_name = "N")]
        turn: u32,
    },
    /// Print this machine's seal public key (PEM), to give to `verify --pubkey` elsewhere.
    Pubkey,
    /// Judge every act the session recorded again under another policy table, and mark each
    /// decision that differs. Exit 0 when none differs, 1 when some do, 2 for bad input.
    Replay {
        /// A session id, or a prefix of exactly one.
        id: String,
        /// The table to judge by, read as a project's chock.toml.
        #[arg(long, value_name = "FILE")]
        policy: PathBuf,
        /// The org bundle above it (default: the one configured, `$CHOCK_ORG_POLICY` or
        /// /etc/chock/org.toml).
        #[arg(long, value_name = "FILE")]
        org: Option<PathBuf>,
        /// One JSON object per line: each act, ratchet change and unreadable event, then a summary.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SessionsCommand::List => list(),
        SessionsCommand::Show { id } => show::show(&id),
        SessionsCommand::Verify { id, pubkey } => verify(&id, pubkey.as_deref()),
        SessionsCommand::Seal { id } => seal(&id),
        SessionsCommand::Pubkey => pubkey(),
        SessionsCommand::Fork { id, turn } => fork(&id, turn),
        SessionsCommand::Replay {
            id,
            policy,
            org,
            json,
        } => replay_cmd::run(&replay_cmd::ReplayArgs {
            id: &id,
            policy: &policy,
            org: org.as_deref(),
            json,
        }),
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

/// `chock sessions fork ID --turn N`: the new id on standard output, what it is on standard error.
fn fork(id: &str, turn: u32) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let header = chock_log::SessionHeader {
        command: Some("fork".into()),
        ..Default::default()
    };
    let forked = chock_session::fork(&dir, turn, header).map_err(|e| match e {
        chock_session::SessionError::Fork(refusal) => {
            Exit::new(exit::BAD_INPUT, format!("cannot fork: {refusal}")).into()
        }
        other => anyhow::Error::new(other).context(format!("cannot fork session {id}")),
    })?;
    say!("{}", forked.id);
    say_err!(
        "chock: session {} starts where turn {turn} of {} ended (its line {}); go on with `chock run --resume {} \"TASK\"`",
        forked.id,
        forked.origin.session,
        forked.origin.seq,
        forked.id
    );
    Ok(ExitCode::SUCCESS)
}

fn list() -> anyhow::Result<ExitCode> {
    let root = root()?;
    let sessions = chock_log::list_sessions(&root)?;
    if sessions.is_empty() {
        say!("no sessions in {}", root.display());
        return Ok(ExitCode::SUCCESS);
    }
    // The sessions the daemon owns, when one runs: their state as it says (`daemon:idle`).
    let owned = super::attach::daemon_states();
    say!(
        "{:<23}  {:<11}  {:>6}  {:<20}  {:<16}  PROJECT",
        "ID",
        "STATE",
        "EVENTS",
        "LAST EVENT",
        "LAST KIND"
    );
    for s in &sessions {
        let state = owned
            .as_ref()
            .and_then(|o| o.get(s.id.as_str()))
            .map_or_else(|| state(s), |d| format!("daemon:{d}"));
        say!(
            "{:<23}  {:<11}  {:>6}  {:<20}  {:<16}  {}",
            s.id,
            state,
            s.view.events,
            s.view.last_ts.as_deref().map_or("-".to_owned(), short_time),
            s.view.last_kind.map_or("-", EventKind::as_str),
            s.view.project().unwrap_or("-"),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// live: a writer holds the lock; ended: it holds a session.end with no turn after it (an apply
/// or adoption of its work may follow); interrupted: the writer is gone without saying goodbye
/// (crashed or killed).
fn state(s: &SessionSummary) -> String {
    match s.liveness {
        Liveness::Live { pid } => format!("live:{pid}"),
        _ if s.view.ended() => "ended".into(),
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
    t.trim_end_matches('Z').to_owned()
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
    // which may come from another machine: `say!` escapes each line.
    for line in render_report(&report, local_public_key().as_deref()) {
        say!("{line}");
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
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn render_report(report: &VerifyReport, local_key: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let verdict = if report.is_intact() {
        "intact"
    } else {
        "BROKEN"
    };
    out.push(format!("session {}: {verdict}", report.session_id));
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
    out.push(format!(
        "  {} lines, {} bytes, {head}",
        report.lines, report.bytes
    ));
    for problem in &report.problems {
        out.push(format!("  {problem}"));
    }
    if let Some(torn) = &report.torn_tail {
        let why = if torn.missing_newline {
            "no trailing newline"
        } else {
            "not JSON"
        };
        out.push(format!("  torn tail: line {} ({} bytes at offset {}, {why}), left by a crash mid-write; every line before it was checked",
            torn.line, torn.len, torn.offset
        ));
    }
    match &report.seal {
        SealCheck::Unsealed => {
            out.push(
                "  not sealed (the last line is only protected by a seal: `chock sessions seal`)"
                    .to_owned(),
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
            out.push(format!(
                "  sealed at seq {seq}, {events_after} events after; signed by {whose} {}",
                &public_key[..16.min(public_key.len())]
            ));
        }
        SealCheck::Broken { reason } => {
            out.push(format!("  seal broken: {reason}"));
        }
    }
    out
}

fn seal(id: &str) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let key = key_path()?;
    let seal = chock_log::seal(&dir, &key)?;
    say!(
        "sealed session {} at seq {} (sha256 {})",
        seal.session_id,
        seal.head_seq,
        seal.head_hash
    );
    say!("  seal: {}", dir.join(chock_log::SEAL_FILE).display());
    say!(
        "  key:  {} (public key: {})",
        key.display(),
        chock_log::public_key_path(&key).display()
    );
    Ok(ExitCode::SUCCESS)
}

fn pubkey() -> anyhow::Result<ExitCode> {
    let key = key_path()?;
    // A PEM block of Chock's own making: its lines are lines.
    crate::say::block(chock_log::public_key_pem(&key)?);
    Ok(ExitCode::SUCCESS)
}
