//! Session ids and where sessions live.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use time::OffsetDateTime;

use crate::LogError;

/// A session's name: the UTC second it started, then six random hex digits
/// (`20261130T002638Z-3fa9c1`). Readable by a person, sorts by time as a plain string, and
/// the suffix keeps two sessions started in the same second apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(String);

const STAMP_LEN: usize = 16; // YYYYMMDDTHHMMSSZ
const SUFFIX_LEN: usize = 6;

impl SessionId {
    /// A fresh id for a session starting now (the time and the suffix come from
    /// [`crate::clock`], so a test build can fix both).
    pub fn new() -> Self {
        Self::at(crate::clock::now(), crate::clock::session_suffix())
    }

    /// The id for a session started at `when`, with the given 24-bit suffix (tests fix both).
    pub fn at(when: OffsetDateTime, suffix: u32) -> Self {
        let t = when.to_offset(time::UtcOffset::UTC);
        Self(format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{:06x}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            suffix & 0x00ff_ffff
        ))
    }

    /// Checks the shape of a session id.
    pub fn parse(s: &str) -> Result<Self, LogError> {
        let bad = || LogError::BadId(s.to_owned());
        let (stamp, suffix) = s.split_once('-').ok_or_else(bad)?;
        let stamp_ok = stamp.len() == STAMP_LEN
            && stamp.char_indices().all(|(i, c)| match i {
                8 => c == 'T',
                15 => c == 'Z',
                _ => c.is_ascii_digit(),
            });
        let suffix_ok = suffix.len() == SUFFIX_LEN
            && suffix
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if stamp_ok && suffix_ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(bad())
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SessionId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = LogError;
    fn from_str(s: &str) -> Result<Self, LogError> {
        Self::parse(s)
    }
}

impl serde::Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `$XDG_STATE_HOME/chock/sessions`, else `~/.local/state/chock/sessions`
/// ([`chock_dirs::sessions_root`]: the daemon and its clients resolve the same place).
pub fn sessions_root() -> Result<PathBuf, LogError> {
    Ok(chock_dirs::sessions_root()?)
}

/// `$XDG_DATA_HOME/chock/seal.key`, else `~/.local/share/chock/seal.key`: the machine's
/// Ed25519 seal key (its public half is written beside it as `seal.pub`).
pub fn default_seal_key_path() -> Result<PathBuf, LogError> {
    Ok(chock_dirs::data_root()?.join("seal.key"))
}

/// `$XDG_DATA_HOME/chock`, else `~/.local/share/chock`: Chock's own data (the seal key, the
/// agent's notes under `memory/`).
pub fn data_root() -> Result<PathBuf, LogError> {
    Ok(chock_dirs::data_root()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_readable_sortable_and_parse_back() {
        let a = SessionId::at(time::macros::datetime!(2026-11-30 00:26:38 UTC), 0x3fa9c1);
        assert_eq!(a.as_str(), "20261130T002638Z-3fa9c1");
        let b = SessionId::at(time::macros::datetime!(2026-11-30 00:26:39 UTC), 0x000001);
        assert!(a < b && a.as_str() < b.as_str());
        assert_eq!(SessionId::parse(a.as_str()).unwrap(), a);
        let fresh = SessionId::new();
        assert_eq!(SessionId::parse(fresh.as_str()).unwrap(), fresh);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "",
            "20261130T002638Z",
            "20261130T002638Z-3FA9C1",
            "20261130X002638Z-3fa9c1",
            "../etc-abcdef",
        ] {
            assert!(SessionId::parse(bad).is_err(), "{bad}");
        }
    }
}
