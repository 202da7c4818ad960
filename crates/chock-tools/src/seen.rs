//! Which lines of which file versions a tool has shown the model in this session.
//!
//! edit_file refuses an edit whose target lines the model was never shown: an edit aimed at text the model
//! guessed, remembered from training, or saw in another version of the file is exactly the edit that goes
//! wrong. read_file and grep record what they showed; an edit or a write records what the model itself
//! wrote, carrying earlier knowledge across the line shift an edit causes. A version is the file's hash,
//! so a file changed behind the model's back (by a command, a formatter) is unseen until read again.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The record, keyed by (workspace-relative path, file hash).
#[derive(Debug, Default)]
pub struct SeenLines {
    shown: HashMap<(PathBuf, String), BTreeSet<usize>>,
    /// Versions whose lines grew since [`SeenLines::take_changes`] last ran.
    touched: BTreeSet<(PathBuf, String)>,
}

/// One version's known lines, as 1-based inclusive ranges: what the log carries in
/// `tool.result`'s `shown`.
pub type Known = (PathBuf, String, Vec<[usize; 2]>);

impl SeenLines {
    /// The versions whose known lines grew since the last call, each with all its known lines;
    /// logged with the call's result so a resumed session knows them too.
    pub fn take_changes(&mut self) -> Vec<Known> {
        std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(|key| {
                let lines = self.shown.get(&key)?;
                let mut ranges: Vec<[usize; 2]> = Vec::new();
                for &line in lines {
                    match ranges.last_mut() {
                        Some(last) if last[1] + 1 == line => last[1] = line,
                        _ => ranges.push([line, line]),
                    }
                }
                Some((key.0, key.1, ranges))
            })
            .collect()
    }

    /// Takes back what a log said the model knew (resume).
    pub fn restore(&mut self, path: &Path, hash: &str, ranges: &[[usize; 2]]) {
        let set = self
            .shown
            .entry((path.to_path_buf(), hash.to_string()))
            .or_default();
        for [first, last] in ranges {
            set.extend(*first..=*last);
        }
    }

    /// Records that lines `lines` (1-based) of `path` at version `hash` were shown.
    pub fn record(&mut self, path: &Path, hash: &str, lines: impl IntoIterator<Item = usize>) {
        let key = (path.to_path_buf(), hash.to_string());
        self.shown.entry(key.clone()).or_default().extend(lines);
        self.touched.insert(key);
    }

    /// The first line of `first..=last` (1-based) that was never shown, if any.
    pub fn first_unseen(
        &self,
        path: &Path,
        hash: &str,
        first: usize,
        last: usize,
    ) -> Option<usize> {
        let shown = self.shown.get(&(path.to_path_buf(), hash.to_string()));
        (first..=last).find(|line| !shown.is_some_and(|s| s.contains(line)))
    }

    /// Carries what was known about `old_hash` over an edit that replaced lines `first..=old_last` with
    /// `new_count` lines, producing `new_hash`. The new lines were written by the model, so they count as seen.
    pub fn carry_over_edit(
        &mut self,
        path: &Path,
        old_hash: &str,
        new_hash: &str,
        first: usize,
        old_last: usize,
        new_count: usize,
    ) {
        let old = self
            .shown
            .get(&(path.to_path_buf(), old_hash.to_string()))
            .cloned()
            .unwrap_or_default();
        let removed = old_last + 1 - first;
        let mut new = BTreeSet::new();
        for line in old {
            if line < first {
                new.insert(line);
            } else if line > old_last {
                new.insert(line - removed + new_count);
            }
        }
        new.extend(first..first + new_count);
        let key = (path.to_path_buf(), new_hash.to_string());
        self.shown.entry(key.clone()).or_default().extend(new);
        self.touched.insert(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_call_made_known_is_taken_once_and_restores_the_same_record() {
        let mut seen = SeenLines::default();
        let p = Path::new("a.rs");
        seen.record(p, "h1", [1, 2, 3, 7]);
        let changes = seen.take_changes();
        assert_eq!(
            changes,
            vec![(p.to_path_buf(), "h1".into(), vec![[1, 3], [7, 7]])]
        );
        assert!(seen.take_changes().is_empty());
        let mut resumed = SeenLines::default();
        for (path, hash, ranges) in &changes {
            resumed.restore(path, hash, ranges);
        }
        assert_eq!(resumed.first_unseen(p, "h1", 1, 3), None);
        assert_eq!(resumed.first_unseen(p, "h1", 1, 7), Some(4));
    }

    #[test]
    fn only_shown_lines_of_the_same_version_count() {
        let mut seen = SeenLines::default();
        let p = Path::new("a.rs");
        seen.record(p, "h1", 1..=10);
        assert_eq!(seen.first_unseen(p, "h1", 3, 10), None);
        assert_eq!(seen.first_unseen(p, "h1", 9, 12), Some(11));
        assert_eq!(seen.first_unseen(p, "h2", 1, 1), Some(1));
        assert_eq!(seen.first_unseen(Path::new("b.rs"), "h1", 1, 1), Some(1));
    }

    #[test]
    fn an_edit_shifts_what_was_seen_after_it() {
        let mut seen = SeenLines::default();
        let p = Path::new("a.rs");
        seen.record(p, "h1", [1, 2, 3, 10, 11]);
        // Lines 2..=3 replaced by 5 lines: old 10 becomes 13.
        seen.carry_over_edit(p, "h1", "h2", 2, 3, 5);
        assert_eq!(seen.first_unseen(p, "h2", 1, 6), None);
        assert_eq!(seen.first_unseen(p, "h2", 7, 7), Some(7));
        assert_eq!(seen.first_unseen(p, "h2", 13, 14), None);
    }
}
