//! The seal: an Ed25519 signature over a log's head, so a log can be checked on another
//! machine against the sealing machine's public key.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::clock::now_rfc3339;
use crate::fsutil::{create_private_dir_all, sync_dir, write_atomic};
use crate::verify::{KeyCheck, SealCheck};
use crate::{LogError, verify};

/// The seal's file name inside a session directory.
pub const SEAL_FILE: &str = "seal.json";

/// Written in `seal.json` as `format`, and the first line of the signed message.
pub const SEAL_FORMAT: &str = "chock-seal/1";

/// The contents of `seal.json`. The signature covers [`Seal::message`]: the format, session
/// id, head seq, head hash and time, one per line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// [`SEAL_FORMAT`].
    pub format: String,
    /// The sealed session.
    pub session_id: String,
    /// The seq of the sealed (last complete) line.
    pub head_seq: u64,
    /// SHA-256 hex of that line's bytes, newline included.
    pub head_hash: String,
    /// When the seal was made, RFC 3339 UTC.
    pub sealed_at: String,
    /// The signer's Ed25519 public key, 64 hex digits.
    pub public_key: String,
    /// The Ed25519 signature of [`Seal::message`], 128 hex digits.
    pub signature: String,
}

impl Seal {
    /// The exact bytes that are signed.
    pub fn message(&self) -> Vec<u8> {
        format!(
            "{}\n{}\n{}\n{}\n{}\n",
            SEAL_FORMAT, self.session_id, self.head_seq, self.head_hash, self.sealed_at
        )
        .into_bytes()
    }
}

/// Seals the session in `dir` with the key at `key_path` (normally
/// [`crate::default_seal_key_path`]), creating the key (0600, with `seal.pub` beside it) on
/// first use. Refuses a log whose chain is broken: a seal vouches for everything up to its
/// head. A torn tail is left outside the seal. Sealing again replaces the seal with one over
/// the newer head.
pub fn seal(dir: &Path, key_path: &Path) -> Result<Seal, LogError> {
    // A live writer may hold grouped lines not yet synced: the seal must not vouch for a head a
    // crash could still take back, so make what is in the file durable first.
    let log_path = dir.join(crate::LOG_FILE);
    // (A log that cannot be opened is left for verify to report.)
    if let Ok(file) = std::fs::File::open(&log_path) {
        file.sync_data()
            .map_err(|e| LogError::io("fdatasync", &log_path, e))?;
    }
    let report = verify(dir)?;
    if let Some(first) = report.problems.first() {
        return Err(LogError::CannotSeal {
            dir: dir.to_owned(),
            reason: format!("the chain is broken ({first}); run `chock sessions verify`"),
        });
    }
    let head = report.head.ok_or_else(|| LogError::CannotSeal {
        dir: dir.to_owned(),
        reason: "the log has no complete event".into(),
    })?;
    let key = load_or_create_key(key_path)?;
    let mut seal = Seal {
        format: SEAL_FORMAT.to_owned(),
        session_id: report.session_id,
        head_seq: head.seq,
        head_hash: head.hash,
        sealed_at: now_rfc3339(),
        public_key: hex::encode(key.verifying_key().to_bytes()),
        signature: String::new(),
    };
    seal.signature = hex::encode(key.sign(&seal.message()).to_bytes());
    let mut json = serde_json::to_vec_pretty(&seal).map_err(|source| LogError::Serialize {
        kind: "seal",
        source,
    })?;
    json.push(b'\n');
    write_atomic(&dir.join(SEAL_FILE), &json, 0o644)?;
    Ok(seal)
}

/// The path of the public key written beside a seal key: `seal.pub` for `seal.key`.
pub fn public_key_path(key_path: &Path) -> PathBuf {
    key_path.with_extension("pub")
}

/// Loads the seal key, or creates it: a new Ed25519 key in PKCS#8 PEM, mode 0600 in a 0700
/// directory, and its public half as SPKI PEM in `seal.pub`. A key file that others can read
/// is refused: whoever reads it can forge seals.
pub fn load_or_create_key(key_path: &Path) -> Result<SigningKey, LogError> {
    let bad = |reason: String| LogError::BadKey {
        path: key_path.to_owned(),
        reason,
    };
    // One open file for the mode check and the read: the mode judged is the mode of the bytes read.
    match std::fs::File::open(key_path) {
        Ok(mut file) => {
            let mode = file
                .metadata()
                .map_err(|e| LogError::io("stat", key_path, e))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(bad(format!(
                    "mode {:o} lets others read the seal key; run `chmod 600 {}`",
                    mode & 0o777,
                    key_path.display()
                )));
            }
            let mut pem = String::new();
            std::io::Read::read_to_string(&mut file, &mut pem)
                .map_err(|e| LogError::io("read", key_path, e))?;
            let key = SigningKey::from_pkcs8_pem(&pem)
                .map_err(|e| bad(format!("not an Ed25519 PKCS#8 PEM key: {e}")))?;
            // `seal.pub` is what others are handed to trust: it must be this key's half, so a
            // missing or replaced one is written again.
            let pub_path = public_key_path(key_path);
            let public = key.verifying_key();
            if read_public_key(&pub_path).ok() != Some(public) {
                write_public_key(&pub_path, &public)?;
            }
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(key_path),
        Err(e) => Err(LogError::io("read", key_path, e)),
    }
}

fn create_key(key_path: &Path) -> Result<SigningKey, LogError> {
    let dir = key_path.parent().unwrap_or(Path::new("."));
    create_private_dir_all(dir)?;
    let key = SigningKey::generate(&mut rand::rngs::OsRng);
    let pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| LogError::BadKey {
            path: key_path.to_owned(),
            reason: format!("cannot encode: {e}"),
        })?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(key_path)
        .map_err(|e| LogError::io("create", key_path, e))?;
    file.write_all(pem.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| LogError::io("write", key_path, e))?;
    write_public_key(&public_key_path(key_path), &key.verifying_key())?;
    sync_dir(dir)?;
    Ok(key)
}

fn write_public_key(path: &Path, key: &VerifyingKey) -> Result<(), LogError> {
    let pem = key
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| LogError::BadKey {
            path: path.to_owned(),
            reason: format!("cannot encode: {e}"),
        })?;
    write_atomic(path, pem.as_bytes(), 0o644)
}

/// The public key of the seal key at `key_path` as SPKI PEM (what `chock sessions pubkey`
/// prints), creating the key on first use.
pub fn public_key_pem(key_path: &Path) -> Result<String, LogError> {
    let key = load_or_create_key(key_path)?;
    key.verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| LogError::BadKey {
            path: key_path.to_owned(),
            reason: format!("cannot encode: {e}"),
        })
}

/// Reads a public key for `verify --pubkey FILE`: SPKI PEM (`seal.pub`), or 64 hex digits.
pub fn read_public_key(path: &Path) -> Result<VerifyingKey, LogError> {
    let text = std::fs::read_to_string(path).map_err(|e| LogError::io("read", path, e))?;
    let bad = |reason: String| LogError::BadKey {
        path: path.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    if trimmed.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(trimmed)
            .map_err(|e| bad(format!("not an Ed25519 public key PEM: {e}")));
    }
    parse_hex_key(trimmed).map_err(bad)
}

fn parse_hex_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes: [u8; 32] = hex::decode(text)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("neither a PEM public key nor 64 hex digits")?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an Ed25519 public key: {e}"))
}

/// Checks `seal.json` in `dir` against the log's line hashes (index = line - 1).
pub(crate) fn check_seal(
    dir: &Path,
    session_id: &str,
    hashes: &[String],
    trusted: Option<&VerifyingKey>,
) -> SealCheck {
    let broken = |reason: String| SealCheck::Broken { reason };
    let path = dir.join(SEAL_FILE);
    let seal: Seal = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(seal) => seal,
        Err(e) => return broken(format!("{} is unreadable: {e}", path.display())),
    };
    if seal.format != SEAL_FORMAT {
        return broken(format!("unknown seal format `{}`", seal.format));
    }
    if seal.session_id != session_id {
        return broken(format!(
            "the seal is for session {}, not {session_id}",
            seal.session_id
        ));
    }
    let key = match parse_hex_key(&seal.public_key) {
        Ok(key) => key,
        Err(e) => return broken(format!("public_key: {e}")),
    };
    let signature = match hex::decode(&seal.signature)
        .ok()
        .and_then(|b| Signature::from_slice(&b).ok())
    {
        Some(sig) => sig,
        None => return broken("signature: not 128 hex digits".into()),
    };
    if key.verify_strict(&seal.message(), &signature).is_err() {
        return broken("the signature does not match the seal's contents".into());
    }
    let key_check = match trusted {
        Some(t) if t.as_bytes() != key.as_bytes() => {
            return broken(format!(
                "signed by key {}, not by the trusted key {}",
                seal.public_key,
                hex::encode(t.as_bytes())
            ));
        }
        Some(_) => KeyCheck::Trusted,
        None => KeyCheck::NotChecked,
    };
    let Ok(index) = usize::try_from(seal.head_seq) else {
        return broken("head_seq is out of range".into());
    };
    match hashes.get(index) {
        None => broken(format!(
            "sealed at seq {}, but the log has only {} complete lines: events were removed from the end",
            seal.head_seq,
            hashes.len()
        )),
        Some(hash) if *hash != seal.head_hash => broken(format!(
            "line {} (seq {}) is not the line that was sealed: its hash changed",
            index + 1,
            seal.head_seq
        )),
        Some(_) => SealCheck::Sealed {
            seq: seal.head_seq,
            events_after: (hashes.len() - index - 1) as u64,
            public_key: seal.public_key,
            key: key_check,
        },
    }
}
