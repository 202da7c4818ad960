//! What the git shim costs a call in mounts (docs/git.md, "The shim"): a directory holding many
//! real gits (the hard links of a git's exec path) is one overlay, so a call's mounts do not grow
//! with the number of gits hidden; and every git so hidden still runs the shim, while the other
//! files of its directory read as they are.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chock_session::{CallOptions, CallOutcome, Calls, NoApprover, Session, SessionOptions};
use chock_test_support::GitProject;

/// The host's real gits as the session finds them: each `git` under `/usr` on the default `PATH`,
/// the `git` of each one's exec path, and every hard link of any of them in those directories.
fn real_gits() -> Vec<PathBuf> {
    let firsts: BTreeSet<PathBuf> = ["/usr/local/bin/git", "/usr/bin/git"]
        .iter()
        .filter_map(|g| Path::new(g).canonicalize().ok())
        .filter(|g| g.is_file())
        .collect();
    let mut dirs: BTreeSet<PathBuf> = firsts
        .iter()
        .filter_map(|g| g.parent().map(Path::to_path_buf))
        .collect();
    let mut inodes: BTreeSet<(u64, u64)> = BTreeSet::new();
    for git in &firsts {
        let m = std::fs::metadata(git).unwrap();
        inodes.insert((m.dev(), m.ino()));
        let out = std::process::Command::new(git)
            .arg("--exec-path")
            .env_clear()
            .output()
            .unwrap();
        let exec = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
            .canonicalize()
            .unwrap();
        if let Ok(m) = std::fs::symlink_metadata(exec.join("git"))
            && m.is_file()
        {
            inodes.insert((m.dev(), m.ino()));
        }
        dirs.insert(exec);
    }
    let mut gits = Vec::new();
    for dir in dirs {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let named = e.file_name().to_string_lossy().starts_with("git");
            if let (true, Ok(m)) = (named, e.metadata())
                && m.is_file()
                && inodes.contains(&(m.dev(), m.ino()))
            {
                gits.push(e.path());
            }
        }
    }
    gits.sort();
    gits
}

/// Sessions of `project`, with the shim or without it, whose calls are made as `calls` says (a
/// `One` session makes one call: each call is then a session of its own, as `chock exec`'s).
struct Caller<'a> {
    project: &'a GitProject,
    shim: bool,
    calls: Calls,
    session: Option<Session>,
}

impl Caller<'_> {
    fn new(project: &GitProject, shim: bool, calls: Calls) -> Caller<'_> {
        Caller {
            project,
            shim,
            calls,
            session: None,
        }
    }

    /// Runs `script` with `sh -c` as call `id`: its exit code, its stdout, and the `git.*` acts
    /// decided under it.
    fn run(&mut self, id: &str, script: &str) -> (i32, String, Vec<String>) {
        if self.calls == Calls::One || self.session.is_none() {
            let opts = SessionOptions {
                sessions_root: Some(self.project.root().join("sessions")),
                git_shim: self
                    .shim
                    .then(|| PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
                calls: self.calls,
                ..SessionOptions::default()
            };
            self.session = Some(Session::open(self.project.path(), opts).unwrap());
        }
        let s = self.session.as_ref().unwrap();
        let opts = CallOptions {
            call_id: Some(id.into()),
            ..CallOptions::default()
        };
        let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let r = support::confined_call(s, &argv, &opts, &NoApprover).unwrap();
        let CallOutcome::Ran {
            outcome, stdout, ..
        } = r.outcome
        else {
            panic!("{:?}", r.outcome)
        };
        let chock_sandbox::ExitStatus::Exited(code) = outcome.status else {
            panic!("{:?}", outcome.status)
        };
        let acts = chock_log::read_events(s.log().dir())
            .unwrap()
            .into_iter()
            .filter(|e| e.call_id.as_deref() == Some(id) && e.kind.to_string() == "decision")
            .filter_map(|e| e.data["action"].as_str().map(str::to_string))
            .filter(|a| a.starts_with("git."))
            .collect();
        (code, String::from_utf8_lossy(&stdout).into_owned(), acts)
    }

    /// The mount points call `id` sees, in `/proc/self/mountinfo`'s order.
    fn mounts(&mut self, id: &str) -> Vec<String> {
        let (code, out, _) = self.run(id, "cat /proc/self/mountinfo");
        assert_eq!(code, 0);
        out.lines()
            .map(|l| l.split(' ').nth(4).unwrap().to_string())
            .collect()
    }
}

#[test]
fn a_calls_mounts_do_not_grow_with_the_gits_the_shim_hides() {
    let gits = real_gits();
    let dirs: BTreeSet<&Path> = gits.iter().filter_map(|g| g.parent()).collect();
    if !chock_test_support::requires(
        gits.len() > dirs.len(),
        "a git with hard links in its own directory (a source build's, or Debian's exec path)",
    ) {
        return;
    }
    let project = GitProject::with_files(&[("chock.toml", "")]);
    let shim = std::fs::metadata(env!("CARGO_BIN_EXE_chock-git-shim"))
        .unwrap()
        .len();
    // Both ways a call is made: on its own (`chock exec`), and from a session sandbox (an
    // agent's second call on).
    for calls in [Calls::One, Calls::Overlapping] {
        let (mut with, mut without) = (
            Caller::new(&project, true, calls),
            Caller::new(&project, false, calls),
        );
        for round in 0..2 {
            let with = with.mounts(&format!("w{round}"));
            let mut base = without.mounts(&format!("o{round}"));
            let at_gits = with
                .iter()
                .filter(|p| dirs.iter().any(|d| Path::new(p).starts_with(d)))
                .count();
            let mut extra: Vec<&String> = with
                .iter()
                .filter(|p| match base.iter().position(|b| b == *p) {
                    Some(i) => {
                        base.remove(i);
                        false
                    }
                    None => true,
                })
                .collect();
            extra.dedup();
            // One mount for each directory; beside them, only the session's push directory,
            // read-only (`git-host/`: its overlay, and in a session sandbox the layer it is made
            // from and the call's own overlay over it).
            let push = extra
                .iter()
                .filter(|p| p.ends_with("/git-host") || p.contains("/.chock-layers/"))
                .count();
            assert!(
                at_gits <= dirs.len() && extra.len() <= dirs.len() + push,
                "{calls:?}: the shim over {} gits in {} directories took {at_gits} mounts there; \
                 the call's mounts beside a call's without the shim: {extra:?}",
                gits.len(),
                dirs.len(),
            );
        }
        // Every one of them is the shim.
        let script: String = gits
            .iter()
            .map(|g| format!("wc -c < {}; ", g.display()))
            .collect();
        let (code, out, _) = with.run("sizes", &script);
        assert_eq!(code, 0, "{out}");
        let sizes: Vec<u64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(sizes, vec![shim; gits.len()], "{gits:?}");
        // The layers are the user's, kept beside the sessions root for the next session (the
        // session made none of its own), and stay when it ends.
        let session_dir = with.session.as_ref().unwrap().log().dir().to_path_buf();
        assert!(!session_dir.join("git-shims").exists());
        let cache = session_dir
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("git-shims");
        let entries = || -> Vec<std::path::PathBuf> {
            std::fs::read_dir(&cache)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("entry-")
                })
                .collect()
        };
        let kept = entries();
        assert_eq!(kept.len(), 1, "{}", cache.display());
        drop(with);
        assert_eq!(entries(), kept);
    }
}

#[test]
fn a_git_hidden_in_a_directory_of_many_runs_the_shim_and_the_rest_reads_as_it_is() {
    let gits = real_gits();
    let mut by_dir: BTreeMap<&Path, Vec<&Path>> = BTreeMap::new();
    for g in &gits {
        by_dir.entry(g.parent().unwrap()).or_default().push(g);
    }
    by_dir.retain(|_, gits| gits.len() > 1);
    if !chock_test_support::requires(
        !by_dir.is_empty(),
        "a git with hard links in its own directory (a source build's, or Debian's exec path)",
    ) {
        return;
    }
    let project = GitProject::with_files(&[(
        "chock.toml",
        "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n",
    )]);
    for calls in [Calls::One, Calls::Overlapping] {
        let mut s = Caller::new(&project, true, calls);
        for (i, (dir, hidden)) in by_dir.iter().enumerate() {
            // A hidden git, by its full path, is the shim: it asks the host, which decides; the
            // real git would ask nothing. The first, middle and last of the directory, and its
            // `git` (a `git-<x>` is decided as `git <x>`: an option none has keeps each inert).
            let mut tried: Vec<&Path> = vec![hidden[0], hidden[hidden.len() / 2]];
            tried.extend(hidden.last());
            tried.extend(hidden.iter().find(|g| g.ends_with("git")));
            for (j, git) in tried.iter().enumerate() {
                let id = format!("{calls:?}-{i}-{j}");
                let args = if git.ends_with("git") {
                    "push origin main"
                } else {
                    "--no-such-option"
                };
                let (code, _, acts) = s.run(&id, &format!("{} {args}", git.display()));
                assert_eq!(acts.len(), 1, "{}: {acts:?}", git.display());
                if git.ends_with("git") {
                    assert_eq!((code, acts[0].as_str()), (126, "git.push"));
                }
            }
            // A file of the directory that is no git reads as the host's.
            let other = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.is_file() && !gits.contains(p));
            if let Some(other) = other {
                let (code, out, _) = s.run("other", &format!("wc -c < {}", other.display()));
                assert_eq!(code, 0);
                let size = std::fs::metadata(&other).unwrap().len();
                assert_eq!(out.trim(), size.to_string(), "{}", other.display());
            }
        }
    }
}

#[test]
fn a_declared_path_inside_a_directory_of_gits_leaves_its_gits_bound_one_by_one() {
    let gits = real_gits();
    let mut counts: BTreeMap<&Path, usize> = BTreeMap::new();
    for g in &gits {
        *counts.entry(g.parent().unwrap()).or_default() += 1;
    }
    let declared = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(d, _)| d.join("mergetools"))
        .find(|m| m.is_dir());
    let Some(declared) = declared else {
        chock_test_support::requires(
            false,
            "an exec path of several gits with a `mergetools` directory (a source build's)",
        );
        return;
    };
    let project = GitProject::with_files(&[(
        "chock.toml",
        &format!("[sandbox]\nread = [\"{}\"]\n", declared.display()),
    )]);
    let shim = std::fs::metadata(env!("CARGO_BIN_EXE_chock-git-shim"))
        .unwrap()
        .len();
    let dir = declared.parent().unwrap();
    let hidden: Vec<&PathBuf> = gits.iter().filter(|g| g.starts_with(dir)).collect();
    for calls in [Calls::One, Calls::Overlapping] {
        let mut s = Caller::new(&project, true, calls);
        // An overlay over the directory would cover the declared path: its gits are bound.
        let script = format!(
            "ls {} >/dev/null && wc -c < {} && wc -c < {}",
            declared.display(),
            hidden[0].display(),
            hidden[hidden.len() - 1].display()
        );
        let (code, out, _) = s.run("declared", &script);
        assert_eq!(code, 0, "{out}");
        assert_eq!(out, format!("{shim}\n{shim}\n"));
    }
}
