//! Line diffs with stable hunk ids, and the three-way rule that applies selected hunks onto a file
//! the user may have edited since: a hunk goes in only where the file still matches the base.

use std::ops::Range;

use similar::{Algorithm, DiffTag};

use crate::entry::short_hash;

/// Lines of context around each hunk in the unified diff.
pub const CONTEXT: usize = 3;

/// A line of a hunk, as shown: `' '`, `'-'` or `'+'` and the line's bytes (with its newline, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    /// `' '` (context), `'-'` (removed) or `'+'` (added).
    pub tag: char,
    /// The line's bytes, with its newline if it has one.
    pub text: Vec<u8>,
}

/// One hunk of a text file's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// `<file id>:<8 hex>`, a hash of the lines it removes and adds: the same change has the same id
    /// on every run, whatever else changed in the file.
    pub id: String,
    /// Shown range in the old file, with context (0-based start, length).
    pub old_start: usize,
    /// Its length in lines.
    pub old_len: usize,
    /// Shown range in the new file, with context.
    pub new_start: usize,
    /// Its length in lines.
    pub new_len: usize,
    /// The lines shown, context included, in order.
    pub lines: Vec<HunkLine>,
    /// The changed region in the old file, without the outer context: what the project must still
    /// hold for this hunk to apply.
    pub span: Range<usize>,
    /// What replaces `span`.
    pub replacement: Vec<Vec<u8>>,
}

/// Splits into lines, each keeping its `\n`; a last line without one is kept as is.
pub fn split_lines(data: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, b) in data.iter().enumerate() {
        if *b == b'\n' {
            lines.push(&data[start..=i]);
            start = i + 1;
        }
    }
    if start < data.len() {
        lines.push(&data[start..]);
    }
    lines
}

/// A changed region of `old`: `old[range]` becomes `lines`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub lines: Vec<Vec<u8>>,
}

/// The non-equal regions between `old` and `new`, in `old`'s coordinates.
pub fn edits(old: &[&[u8]], new: &[&[u8]]) -> Vec<Edit> {
    let ops = similar::capture_diff_slices(Algorithm::Myers, old, new);
    let mut out: Vec<Edit> = Vec::new();
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        let lines: Vec<Vec<u8>> = new[n].iter().map(|l| l.to_vec()).collect();
        match out.last_mut() {
            Some(last) if last.range.end == o.start => {
                last.range.end = o.end;
                last.lines.extend(lines);
            }
            _ => out.push(Edit { range: o, lines }),
        }
    }
    out
}

/// The hunks of a text diff, with ids prefixed by `file_id`.
pub fn hunks(file_id: &str, old: &[u8], new: &[u8]) -> Vec<Hunk> {
    let old_lines = split_lines(old);
    let new_lines = split_lines(new);
    let ops = similar::capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines);
    let mut out: Vec<Hunk> = Vec::new();
    for group in similar::group_diff_ops(ops, CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (old_start, new_start) = (first.old_range().start, first.new_range().start);
        let (old_end, new_end) = (last.old_range().end, last.new_range().end);
        let mut lines = Vec::new();
        let mut span: Option<(Range<usize>, Range<usize>)> = None;
        for op in &group {
            let (tag, o, n) = op.as_tag_tuple();
            if tag != DiffTag::Equal {
                span = Some(match span {
                    None => (o.clone(), n.clone()),
                    Some((so, sn)) => (so.start..o.end, sn.start..n.end),
                });
            }
            match tag {
                DiffTag::Equal => lines.extend(old_lines[o].iter().map(|l| HunkLine {
                    tag: ' ',
                    text: l.to_vec(),
                })),
                DiffTag::Delete => lines.extend(old_lines[o].iter().map(|l| HunkLine {
                    tag: '-',
                    text: l.to_vec(),
                })),
                DiffTag::Insert => lines.extend(new_lines[n].iter().map(|l| HunkLine {
                    tag: '+',
                    text: l.to_vec(),
                })),
                DiffTag::Replace => {
                    lines.extend(old_lines[o].iter().map(|l| HunkLine {
                        tag: '-',
                        text: l.to_vec(),
                    }));
                    lines.extend(new_lines[n].iter().map(|l| HunkLine {
                        tag: '+',
                        text: l.to_vec(),
                    }));
                }
            }
        }
        let Some((span_old, span_new)) = span else {
            continue;
        };
        let replacement: Vec<Vec<u8>> = new_lines[span_new.clone()]
            .iter()
            .map(|l| l.to_vec())
            .collect();
        let mut key = Vec::new();
        for l in &old_lines[span_old.clone()] {
            key.extend_from_slice(b"-");
            key.extend_from_slice(l);
        }
        for l in &replacement {
            key.extend_from_slice(b"+");
            key.extend_from_slice(l);
        }
        let mut id = format!("{file_id}:{}", short_hash(&key, 8));
        let same = out
            .iter()
            .filter(|h| h.id == id || h.id.starts_with(&format!("{id}-")))
            .count();
        if same > 0 {
            id = format!("{id}-{}", same + 1);
        }
        out.push(Hunk {
            id,
            old_start,
            old_len: old_end - old_start,
            new_start,
            new_len: new_end - new_start,
            lines,
            span: span_old,
            replacement,
        });
    }
    out
}

/// Why one selected edit could not go in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The caller's label for the edit (a hunk id).
    pub label: String,
    /// 1-based inclusive line range in the base.
    pub lines: (usize, usize),
}

/// The result of [`merge`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub data: Vec<u8>,
    /// Labels of edits the file already had (nothing to do for them).
    pub already: Vec<String>,
}

/// Applies `selected` (edits of `base`, each with a label) onto `real`, which is `base` plus
/// whatever the user changed since. An edit goes in only if none of the user's changes touches its
/// region (overlapping or adjacent); one the user already made identically counts as applied.
/// Every clash is returned, and then nothing is produced.
pub fn merge(base: &[u8], real: &[u8], selected: &[(String, Edit)]) -> Result<Merged, Vec<Clash>> {
    let base_lines = split_lines(base);
    let real_lines = split_lines(real);
    let user = edits(&base_lines, &real_lines);
    let mut clashes = Vec::new();
    let mut already = Vec::new();
    let mut chosen: Vec<&Edit> = user.iter().collect();
    for (label, edit) in selected {
        let touching: Vec<&Edit> = user
            .iter()
            .filter(|u| u.range.start <= edit.range.end && edit.range.start <= u.range.end)
            .collect();
        match touching.as_slice() {
            [] => chosen.push(edit),
            [u] if u.range == edit.range && u.lines == edit.lines => already.push(label.clone()),
            _ => {
                let lo = touching
                    .iter()
                    .map(|u| u.range.start)
                    .min()
                    .unwrap_or(edit.range.start)
                    .min(edit.range.start);
                let hi = touching
                    .iter()
                    .map(|u| u.range.end)
                    .max()
                    .unwrap_or(edit.range.end)
                    .max(edit.range.end);
                clashes.push(Clash {
                    label: label.clone(),
                    lines: (lo + 1, hi.max(lo + 1)),
                });
            }
        }
    }
    if !clashes.is_empty() {
        return Err(clashes);
    }
    chosen.sort_by_key(|e| (e.range.start, e.range.end));
    let mut data = Vec::with_capacity(real.len());
    let mut at = 0;
    for edit in chosen {
        for line in &base_lines[at..edit.range.start] {
            data.extend_from_slice(line);
        }
        for line in &edit.lines {
            data.extend_from_slice(line);
        }
        at = edit.range.end;
    }
    for line in &base_lines[at..] {
        data.extend_from_slice(line);
    }
    Ok(Merged { data, already })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit_of(h: &Hunk) -> (String, Edit) {
        (
            h.id.clone(),
            Edit {
                range: h.span.clone(),
                lines: h.replacement.clone(),
            },
        )
    }

    #[test]
    fn ids_are_stable_when_other_hunks_change() {
        let base = (1..=40).map(|i| format!("line {i}\n")).collect::<String>();
        let a = base.replace("line 5\n", "five\n");
        let b = a.replace("line 30\n", "thirty\n");
        let ha = hunks("f", base.as_bytes(), a.as_bytes());
        let hb = hunks("f", base.as_bytes(), b.as_bytes());
        assert_eq!(ha.len(), 1);
        assert_eq!(hb.len(), 2);
        assert_eq!(ha[0].id, hb[0].id);
        assert_ne!(hb[0].id, hb[1].id);
    }

    #[test]
    fn merge_applies_a_hunk_around_user_edits_elsewhere() {
        let base = (1..=40).map(|i| format!("line {i}\n")).collect::<String>();
        let agent = base.replace("line 30\n", "thirty\n");
        let user = base.replace("line 2\n", "two\nand more\n");
        let hs = hunks("f", base.as_bytes(), agent.as_bytes());
        let merged = merge(base.as_bytes(), user.as_bytes(), &[edit_of(&hs[0])]).expect("no clash");
        assert_eq!(
            String::from_utf8(merged.data).unwrap(),
            user.replace("line 30\n", "thirty\n")
        );
    }

    #[test]
    fn merge_refuses_a_hunk_the_user_touched_and_names_it() {
        let base = (1..=10).map(|i| format!("line {i}\n")).collect::<String>();
        let agent = base.replace("line 5\n", "five\n");
        let user = base.replace("line 5\n", "FIVE\n");
        let hs = hunks("f", base.as_bytes(), agent.as_bytes());
        let clashes = merge(base.as_bytes(), user.as_bytes(), &[edit_of(&hs[0])]).unwrap_err();
        assert_eq!(
            clashes,
            vec![Clash {
                label: hs[0].id.clone(),
                lines: (5, 5)
            }]
        );
    }

    #[test]
    fn merge_counts_an_identical_user_edit_as_applied() {
        let base = "a\nb\nc\n";
        let agent = "a\nB\nc\n";
        let hs = hunks("f", base.as_bytes(), agent.as_bytes());
        let merged = merge(base.as_bytes(), agent.as_bytes(), &[edit_of(&hs[0])]).unwrap();
        assert_eq!(merged.data, agent.as_bytes());
        assert_eq!(merged.already, vec![hs[0].id.clone()]);
    }

    #[test]
    fn a_last_line_without_newline_round_trips() {
        let base = "a\nb";
        let agent = "a\nb\nc";
        let hs = hunks("f", base.as_bytes(), agent.as_bytes());
        let merged = merge(base.as_bytes(), base.as_bytes(), &[edit_of(&hs[0])]).unwrap();
        assert_eq!(merged.data, agent.as_bytes());
    }
}
