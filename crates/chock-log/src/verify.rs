//! Checking a log: the chain, the header, the seq order, a torn tail, and the seal.

use std::fmt;
use std::path::Path;

use ed25519_dalek::VerifyingKey;

use crate::LogError;
use crate::chain::{Fields, check_chain};
use crate::line::{LOG_FILE, sha256_hex, split_lines};
use crate::seal::{SEAL_FILE, check_seal};

/// What `verify` found. The log is intact when [`VerifyReport::is_intact`] says so; a torn tail
/// alone does not make it broken (it is what a crash mid-write leaves).
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// The session id the log was checked against (its directory's name).
    pub session_id: String,
    /// Complete lines read (the torn tail excluded).
    pub lines: usize,
    /// Bytes of `log.jsonl`.
    pub bytes: u64,
    /// The last complete line: what a seal would sign.
    pub head: Option<Head>,
    /// Every break found, in file order.
    pub problems: Vec<Problem>,
    /// A last line cut short by a crash, if any. Everything before it was still checked.
    pub torn_tail: Option<TornTail>,
    /// What the seal says.
    pub seal: SealCheck,
}

impl VerifyReport {
    /// No problem in the chain and no broken seal.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty() && !matches!(self.seal, SealCheck::Broken { .. })
    }
}

/// The last complete line of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its `seq` (or its 0-based line index if its seq is unreadable).
    pub seq: u64,
    /// SHA-256 hex of its bytes, newline included.
    pub hash: String,
}

/// One break in the log, named by line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number in `log.jsonl`.
    pub line: usize,
    /// The line's `seq`, if readable.
    pub seq: Option<u64>,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// The kinds of break `verify` names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// Not a JSON object with `seq`, `ts`, `kind`, `prev` and `data`.
    Unreadable {
        /// Why.
        reason: String,
    },
    /// Line 1 is not this session's `session.start` chained from its genesis hash.
    BadHeader {
        /// Why.
        reason: String,
    },
    /// This line's bytes no longer hash to the `prev` the next line recorded (or that `prev`
    /// was changed).
    Edited {
        /// The 1-based line whose `prev` disagrees.
        next_line: usize,
    },
    /// Events with these seqs are missing just before this line.
    Deleted {
        /// First missing seq.
        first_seq: u64,
        /// Last missing seq.
        last_seq: u64,
    },
    /// This line is not part of the chain: nothing chains from it and the lines around it
    /// chain past it.
    Inserted,
    /// This line is chained, but not from the line before it.
    Reordered {
        /// The 1-based line it chains from.
        chains_from_line: usize,
    },
    /// A byte-for-byte copy of an earlier line.
    Duplicate {
        /// The 1-based line it copies.
        of_line: usize,
    },
    /// The chain holds, but `seq` is not the previous seq + 1.
    BadSeq {
        /// The seq this line should have.
        expected: u64,
    },
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable { reason } => write!(f, "unreadable line: {reason}"),
            Self::BadHeader { reason } => write!(f, "bad header: {reason}"),
            Self::Edited { next_line } => write!(
                f,
                "edited: its hash no longer matches the `prev` recorded by line {next_line} (or that `prev` was changed)"
            ),
            Self::Deleted {
                first_seq,
                last_seq,
            } if first_seq == last_seq => {
                write!(
                    f,
                    "deleted: event seq {first_seq} is missing before this line"
                )
            }
            Self::Deleted {
                first_seq,
                last_seq,
            } => {
                write!(
                    f,
                    "deleted: events seq {first_seq}..={last_seq} are missing before this line"
                )
            }
            Self::Inserted => write!(f, "inserted: this line is not part of the chain"),
            Self::Reordered { chains_from_line } => {
                write!(
                    f,
                    "reordered: this line chains from line {chains_from_line}, not from the line before it"
                )
            }
            Self::Duplicate { of_line } => write!(f, "duplicate: a copy of line {of_line}"),
            Self::BadSeq { expected } => write!(f, "seq changed: expected seq {expected}"),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "line {} (seq {seq}): {}", self.line, self.kind),
            None => write!(f, "line {}: {}", self.line, self.kind),
        }
    }
}

/// A last line cut short by a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Its 1-based line number.
    pub line: usize,
    /// Byte offset where it starts: everything before is whole lines.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// True when it has no trailing newline; false when it ends in one but is not JSON.
    pub missing_newline: bool,
}

/// What the seal beside the log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealCheck {
    /// There is no `seal.json`.
    Unsealed,
    /// The seal's signature is good and the sealed line is still in the log, unchanged.
    Sealed {
        /// The sealed head seq.
        seq: u64,
        /// Complete events written after the sealed one.
        events_after: u64,
        /// The signer's public key, hex.
        public_key: String,
        /// Whether that key was checked against one the caller trusts.
        key: KeyCheck,
    },
    /// The seal does not hold: bad signature, wrong key, the sealed line changed or is gone.
    Broken {
        /// Why.
        reason: String,
    },
}

/// Whether the sealing key was compared with a trusted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// It is the key the caller passed in [`VerifyOptions::trusted_key`].
    Trusted,
    /// No trusted key was given: the signature matches the key written in the seal, which
    /// proves nothing against someone who rewrote log and seal together.
    NotChecked,
}

/// Options for [`verify_with`].
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The public key a seal must be signed by (`verify --pubkey FILE`). A seal by any other
    /// key is broken.
    pub trusted_key: Option<VerifyingKey>,
}

/// Verifies the session in `dir` without a trusted key (see [`verify_with`]).
pub fn verify(dir: &Path) -> Result<VerifyReport, LogError> {
    verify_with(dir, &VerifyOptions::default())
}

/// Verifies the session in `dir`: line 1 is `session.start` chained from the genesis hash of
/// the directory's name; each further line's `prev` is the SHA-256 of the line before it and
/// its `seq` is one more; a last line cut short is a torn tail; and `seal.json`, if present,
/// is signed and still matches its line. Only I/O failures are errors: every finding is in
/// the report.
pub fn verify_with(dir: &Path, options: &VerifyOptions) -> Result<VerifyReport, LogError> {
    let path = dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).map_err(|e| LogError::io("read", &path, e))?;
    let session_id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (mut lines, fragment) = split_lines(&bytes);

    let mut torn_tail = None;
    if let Some(fragment) = fragment {
        torn_tail = Some(TornTail {
            line: lines.len() + 1,
            offset: (bytes.len() - fragment.len()) as u64,
            len: fragment.len() as u64,
            missing_newline: true,
        });
    } else if let Some(last) = lines.last()
        && serde_json::from_slice::<serde::de::IgnoredAny>(last).is_err()
    {
        torn_tail = Some(TornTail {
            line: lines.len(),
            offset: (bytes.len() - last.len()) as u64,
            len: last.len() as u64,
            missing_newline: false,
        });
        lines.pop();
    }

    let hashes: Vec<String> = lines.iter().map(|l| sha256_hex(l)).collect();
    let parsed: Vec<Result<Fields, String>> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| Fields::parse(l, i == 0))
        .collect();
    let problems = check_chain(&session_id, &hashes, &parsed);

    let head = hashes.last().map(|hash| Head {
        seq: parsed
            .last()
            .and_then(|p| p.as_ref().ok())
            .map_or(hashes.len() as u64 - 1, |f| f.seq),
        hash: hash.clone(),
    });
    let seal = if dir.join(SEAL_FILE).exists() {
        check_seal(dir, &session_id, &hashes, options.trusted_key.as_ref())
    } else {
        SealCheck::Unsealed
    };
    Ok(VerifyReport {
        session_id,
        lines: lines.len(),
        bytes: bytes.len() as u64,
        head,
        problems,
        torn_tail,
        seal,
    })
}
