//! The session's changes as files and hunks with stable ids.

use std::collections::BTreeMap;

use crate::entry::{Entry, short_hash};
use crate::hunks::{Hunk, hunks};
use crate::upper::RawChange;

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A new path.
    Added,
    /// A path the session removed.
    Deleted,
    /// Same kind at the same path, other content or mode.
    Modified,
    /// Moved: the same content at a new path (see [`FileChange::old_path`]).
    Renamed,
    /// A file became a symlink, a directory became a file, …
    TypeChanged,
}

impl Status {
    /// One letter, as `git status --short` would say it.
    pub fn letter(self) -> char {
        match self {
            Status::Added => 'A',
            Status::Deleted => 'D',
            Status::Modified => 'M',
            Status::Renamed => 'R',
            Status::TypeChanged => 'T',
        }
    }
}

/// Why a change needs more than the ordinary review to land: it configures Chock itself, so the
/// session that made it would decide what the next session may do. Such a change is marked in
/// `chock diff` and never written by an apply or adopt unless the person names its path and
/// confirms it separately (see [`crate::ApplyOptions::include_policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Sensitive {
    /// A Chock policy table: `chock.toml` at the top of the project or in any subdirectory (a
    /// session started in that directory, or with `--project` naming it, obeys it).
    PolicyFile,
}

impl Sensitive {
    /// What the change is, for a banner or a question.
    pub fn what(self) -> &'static str {
        match self {
            Sensitive::PolicyFile => "Chock's own policy",
        }
    }
}

/// Whether the project path `rel` configures Chock, and how. This is the one place that knows
/// which paths of a project Chock reads as its own configuration: today only the policy table's
/// name (`chock_policy::PROJECT_FILE`), at any depth, compared without regard to ASCII case (a
/// case-folding directory would read `Chock.TOML` as `chock.toml`). Chock reads nothing else from
/// a project directory (its configuration and keys live under the user's own directories); a new
/// such path must be added here.
pub fn sensitive_path(rel: &str) -> Option<Sensitive> {
    let name = rel.trim_end_matches('/').rsplit('/').next()?;
    name.eq_ignore_ascii_case(chock_policy::PROJECT_FILE)
        .then_some(Sensitive::PolicyFile)
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Eight hex digits of SHA-256 of the path: the same path has the same id on every run.
    pub id: String,
    /// The path relative to the project (the new path of a rename).
    pub path: String,
    /// Where a renamed file came from.
    pub old_path: Option<String>,
    /// What the path held when the session started (`None`: nothing, for an added path).
    pub old: Option<Entry>,
    /// What the session holds now (`None`: deleted).
    pub new: Option<Entry>,
    /// Line hunks, when both sides are text files with different content.
    pub hunks: Vec<Hunk>,
}

impl FileChange {
    pub(crate) fn new(
        path: String,
        old_path: Option<String>,
        old: Option<Entry>,
        new: Option<Entry>,
    ) -> Self {
        let id = file_id(&path);
        let hunks = match (&old, &new) {
            (Some(o @ Entry::File { data: a, .. }), Some(n @ Entry::File { data: b, .. }))
                if o.is_text() && n.is_text() && a != b =>
            {
                hunks(&id, a, b)
            }
            _ => Vec::new(),
        };
        Self {
            id,
            path,
            old_path,
            old,
            new,
            hunks,
        }
    }

    /// Added, deleted, modified, renamed, or changed kind.
    pub fn status(&self) -> Status {
        match (&self.old, &self.new) {
            (None, _) => Status::Added,
            (_, None) => Status::Deleted,
            _ if self.old_path.is_some() => Status::Renamed,
            (Some(a), Some(b)) if std::mem::discriminant(a) != std::mem::discriminant(b) => {
                Status::TypeChanged
            }
            _ => Status::Modified,
        }
    }

    /// `(old, new)` executable bits when only they tell the two files apart in mode.
    pub fn mode_change(&self) -> Option<(bool, bool)> {
        match (&self.old, &self.new) {
            (Some(Entry::File { exec: a, .. }), Some(Entry::File { exec: b, .. })) if a != b => {
                Some((*a, *b))
            }
            _ => None,
        }
    }

    /// Every path of this change that configures Chock ([`sensitive_path`]): the path, and for a
    /// rename also the path it leaves (removing a policy file changes the policy too).
    pub fn sensitive_paths(&self) -> Vec<(&str, Sensitive)> {
        std::iter::once(self.path.as_str())
            .chain(self.old_path.as_deref())
            .filter_map(|p| sensitive_path(p).map(|s| (p, s)))
            .collect()
    }

    /// Whether this change configures Chock (see [`Sensitive`]).
    pub fn sensitive(&self) -> Option<Sensitive> {
        self.sensitive_paths().first().map(|(_, s)| *s)
    }

    /// Whether the content changes as lines (so hunks can be picked one by one).
    pub fn is_text(&self) -> bool {
        !self.hunks.is_empty()
    }

    /// Whether this is a file whose bytes differ but which is not text.
    pub fn is_binary(&self) -> bool {
        match (&self.old, &self.new) {
            (Some(Entry::File { data: a, .. }), Some(Entry::File { data: b, .. })) => {
                a != b && self.hunks.is_empty()
            }
            (None, Some(e @ Entry::File { .. })) | (Some(e @ Entry::File { .. }), None) => {
                !e.is_text()
            }
            _ => false,
        }
    }

    /// Lines added and removed (for `--stat`).
    pub fn line_counts(&self) -> (usize, usize) {
        let count = |e: &Option<Entry>| match e {
            Some(e @ Entry::File { data, .. }) if e.is_text() => {
                crate::hunks::split_lines(data).len()
            }
            _ => 0,
        };
        match self.status() {
            Status::Added => (count(&self.new), 0),
            Status::Deleted => (0, count(&self.old)),
            _ => self.hunks.iter().fold((0, 0), |(a, d), h| {
                (
                    a + h.lines.iter().filter(|l| l.tag == '+').count(),
                    d + h.lines.iter().filter(|l| l.tag == '-').count(),
                )
            }),
        }
    }
}

/// The file id of `path`.
pub fn file_id(path: &str) -> String {
    short_hash(path.as_bytes(), 8)
}

/// Everything the session changed, sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// The changed paths, sorted by path.
    pub files: Vec<FileChange>,
}

impl Diff {
    /// Builds the diff from raw changes, pairing an exact-content delete and add as a rename.
    pub fn from_raw(raw: BTreeMap<String, RawChange>) -> Self {
        let mut raw = raw;
        // Deleted files and symlinks by content hash, each usable as the source of one rename.
        let mut deleted: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        for (path, change) in raw.iter().rev() {
            if let (Some(old @ (Entry::File { .. } | Entry::Symlink { .. })), None) =
                (&change.old, &change.new)
            {
                deleted.entry(old.hash()).or_default().push(path.clone());
            }
        }
        let mut renames: Vec<(String, String)> = Vec::new();
        for (to, change) in &raw {
            if let (None, Some(new @ (Entry::File { .. } | Entry::Symlink { .. }))) =
                (&change.old, &change.new)
                && let Some(from) = deleted.get_mut(&new.hash()).and_then(Vec::pop)
            {
                renames.push((from, to.clone()));
            }
        }
        let mut files = Vec::new();
        for (from, to) in &renames {
            let old = raw.remove(from).and_then(|c| c.old);
            let new = raw.remove(to).and_then(|c| c.new);
            files.push(FileChange::new(to.clone(), Some(from.clone()), old, new));
        }
        for (path, change) in raw {
            files.push(FileChange::new(path, None, change.old, change.new));
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Self { files }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The file with this id or path (the first, if several match: see [`Diff::files_matching`]).
    pub fn file(&self, key: &str) -> Option<&FileChange> {
        self.files_matching(key).into_iter().next()
    }

    /// Every file with this id or path. File ids are 32 bits of a hash of a path the agent chose,
    /// so two paths with one id are cheap to make (and a path can be spelled like another file's
    /// id); a selection must match exactly one file, or it would apply a change nobody picked.
    pub fn files_matching(&self, key: &str) -> Vec<&FileChange> {
        let key = key.trim_end_matches('/');
        self.files
            .iter()
            .filter(|f| f.id == key || f.path == key || f.old_path.as_deref() == Some(key))
            .collect()
    }

    /// The hunk with this id, and its file (the first, if several files share the id).
    pub fn hunk(&self, id: &str) -> Option<(&FileChange, &Hunk)> {
        self.hunks_matching(id).into_iter().next()
    }

    /// Every hunk with this id, each with its file: more than one when two files share a file id
    /// and a hunk's content (see [`Diff::files_matching`]).
    pub fn hunks_matching(&self, id: &str) -> Vec<(&FileChange, &Hunk)> {
        self.files
            .iter()
            .flat_map(|f| f.hunks.iter().filter(|h| h.id == id).map(move |h| (f, h)))
            .collect()
    }
}
