//! The chain check behind `verify`: which line breaks the hash chain, and how (edited, deleted,
//! inserted, reordered, duplicated, a bad header). Kept apart from the report types so each file
//! reads as one thing.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::EventKind;
use crate::line::genesis_hash;
use crate::verify::{Problem, ProblemKind};

/// The fields of a line that verification reads. `data` is skipped unread except on line 1,
/// which is what keeps verify fast (it only needs the chain fields).
#[derive(Debug)]
pub(crate) struct Fields {
    pub(crate) seq: u64,
    kind: String,
    prev: String,
    session_id: Option<String>,
}

impl Fields {
    pub(crate) fn parse(line: &[u8], header: bool) -> Result<Fields, String> {
        #[derive(serde::Deserialize)]
        struct Raw<'a> {
            seq: Option<u64>,
            #[serde(borrow)]
            ts: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            kind: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            prev: Option<std::borrow::Cow<'a, str>>,
            data: Option<DataShape>,
        }
        let raw: Raw<'_> = serde_json::from_slice(line).map_err(|e| describe(line, &e))?;
        let seq = raw.seq.ok_or("no integer `seq`")?;
        raw.ts.ok_or("no string `ts`")?;
        let kind = raw.kind.ok_or("no string `kind`")?.into_owned();
        let prev = raw.prev.ok_or("no string `prev`")?.into_owned();
        let session_id = match raw.data.ok_or("no object `data`")? {
            DataShape::Object(id) => id,
            DataShape::Other => return Err("`data` is not an object".into()),
        };
        Ok(Fields {
            seq,
            kind,
            prev,
            session_id: if header { session_id } else { None },
        })
    }
}

fn describe(line: &[u8], err: &serde_json::Error) -> String {
    if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() {
        format!("not an event ({err})")
    } else {
        format!("not JSON ({err})")
    }
}

/// `data`, read only as far as verify needs: is it an object, and its `session_id` if any.
enum DataShape {
    Object(Option<String>),
    Other,
}

impl<'de> serde::Deserialize<'de> for DataShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = DataShape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<DataShape, A::Error> {
                let mut id = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "session_id" {
                        id = map.next_value::<Option<String>>().ok().flatten();
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(DataShape::Object(id))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<DataShape, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(DataShape::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
            fn visit_unit<E>(self) -> Result<DataShape, E> {
                Ok(DataShape::Other)
            }
        }
        d.deserialize_any(Visitor)
    }
}

pub(crate) fn check_chain(
    session_id: &str,
    hashes: &[String],
    parsed: &[Result<Fields, String>],
) -> Vec<Problem> {
    if hashes.is_empty() {
        // `Log::create` makes line 1 durable before anyone can act in the session, so a log
        // with no complete line was emptied (or never started): it vouches for nothing.
        return vec![Problem {
            line: 1,
            seq: None,
            kind: ProblemKind::BadHeader {
                reason: "no complete line: the session.start is missing".into(),
            },
        }];
    }
    let genesis = genesis_hash(session_id);
    let mut first_with_hash: HashMap<&str, usize> = HashMap::new();
    for (i, h) in hashes.iter().enumerate() {
        first_with_hash.entry(h.as_str()).or_insert(i);
    }
    let referenced: HashSet<&str> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .map(|f| f.prev.as_str())
        .collect();
    let prev_of = |i: usize| parsed[i].as_ref().ok().map(|f| f.prev.as_str());
    let seq_of = |i: usize| parsed[i].as_ref().ok().map(|f| f.seq);
    let mut problems: Vec<Problem> = Vec::new();
    let report = |problems: &mut Vec<Problem>, i: usize, kind: ProblemKind| {
        if !problems.iter().any(|p| p.line == i + 1) {
            problems.push(Problem {
                line: i + 1,
                seq: seq_of(i),
                kind,
            });
        }
    };

    for (i, fields) in parsed.iter().enumerate() {
        let fields = match fields {
            Ok(f) => f,
            Err(reason) => {
                report(
                    &mut problems,
                    i,
                    ProblemKind::Unreadable {
                        reason: reason.clone(),
                    },
                );
                continue;
            }
        };
        if i == 0 {
            if let Some(kind) = check_header(session_id, fields, parsed) {
                report(&mut problems, 0, kind);
            }
            continue;
        }
        if let Some(&first) = first_with_hash.get(hashes[i].as_str())
            && first < i
        {
            report(
                &mut problems,
                i,
                ProblemKind::Duplicate { of_line: first + 1 },
            );
            continue;
        }
        if fields.prev == hashes[i - 1] {
            if let Some(before) = seq_of(i - 1)
                && fields.seq != before.saturating_add(1)
            {
                report(
                    &mut problems,
                    i,
                    ProblemKind::BadSeq {
                        expected: before.saturating_add(1),
                    },
                );
            }
            continue;
        }
        if fields.prev == genesis {
            let reason = format!(
                "a session.start chained from the genesis hash is on line {}, not line 1",
                i + 1
            );
            report(&mut problems, i, ProblemKind::BadHeader { reason });
            continue;
        }
        match first_with_hash.get(fields.prev.as_str()).copied() {
            Some(j) if j >= i => report(
                &mut problems,
                i,
                ProblemKind::Reordered {
                    chains_from_line: j + 1,
                },
            ),
            Some(j) => {
                // Lines between the one this line chains from and this one. A forger's line
                // claims the same predecessor as this line (a fork), or one no line has.
                let forged: Vec<usize> = (j + 1..i)
                    .filter(|&k| {
                        !referenced.contains(hashes[k].as_str())
                            && prev_of(k).is_none_or(|p| {
                                p == fields.prev || !first_with_hash.contains_key(p)
                            })
                    })
                    .collect();
                if forged.is_empty() {
                    report(
                        &mut problems,
                        i,
                        ProblemKind::Reordered {
                            chains_from_line: j + 1,
                        },
                    );
                }
                for k in forged {
                    report(&mut problems, k, ProblemKind::Inserted);
                }
            }
            None => match seq_of(i - 1) {
                Some(before) if fields.seq > before.saturating_add(1) => report(
                    &mut problems,
                    i,
                    ProblemKind::Deleted {
                        first_seq: before.saturating_add(1),
                        last_seq: fields.seq - 1,
                    },
                ),
                Some(before) if fields.seq <= before => {
                    report(&mut problems, i, ProblemKind::Inserted)
                }
                // If the next line does not chain from this one either, this line itself was
                // changed (its `prev` among its bytes): the next iteration names it. Otherwise
                // the line before no longer hashes to what this line recorded.
                _ if i + 1 < hashes.len() && prev_of(i + 1) != Some(hashes[i].as_str()) => {}
                _ => report(
                    &mut problems,
                    i - 1,
                    ProblemKind::Edited { next_line: i + 1 },
                ),
            },
        }
    }
    problems.sort_by_key(|p| p.line);
    problems
}

fn check_header(
    session_id: &str,
    fields: &Fields,
    parsed: &[Result<Fields, String>],
) -> Option<ProblemKind> {
    let bad = |reason: String| Some(ProblemKind::BadHeader { reason });
    if fields.kind != EventKind::SessionStart.as_str() {
        let genesis = genesis_hash(session_id);
        if let Some(at) = parsed
            .iter()
            .position(|p| p.as_ref().is_ok_and(|f| f.prev == genesis))
        {
            return bad(format!(
                "line 1 is `{}`; the session.start is on line {} (lines reordered)",
                fields.kind,
                at + 1
            ));
        }
        if fields.seq > 0 {
            return Some(ProblemKind::Deleted {
                first_seq: 0,
                last_seq: fields.seq - 1,
            });
        }
        return bad(format!("line 1 is `{}`, not `session.start`", fields.kind));
    }
    if fields.seq != 0 {
        return bad(format!("session.start has seq {}, not 0", fields.seq));
    }
    let named = fields.session_id.as_deref().unwrap_or("");
    if named != session_id {
        return bad(format!(
            "session.start names session `{named}` but the directory is `{session_id}`"
        ));
    }
    if fields.prev != genesis_hash(session_id) {
        return bad(format!(
            "`prev` is not the genesis hash of session {session_id}"
        ));
    }
    None
}
