//! `chock diff`, `apply`, `undo` and `workspace list|rm|adopt` end to end: real sessions (a real
//! log), real git repositories, changes made through a real overlay mount in a user namespace, and
//! the real binary.

mod run_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use chock_log::{EventKind, Log, SessionHeader};
use chock_sandbox::WorkspaceMount;
use chock_workspace::Workspace;
use run_support::{CHOCK, World};

/// The shared hermetic world (its empty org bundle is `org`), with a session made in-process.
struct Env(World);

impl std::ops::Deref for Env {
    type Target = World;
    fn deref(&self) -> &World {
        &self.0
    }
}

impl Env {
    fn new(git: bool) -> Self {
        Self(if git { World::with_git() } else { World::new() })
    }

    /// A real session: its log and its workspace. The log is closed again, as after `chock exec --keep`.
    fn session(&self) -> (String, PathBuf) {
        let header = SessionHeader {
            project: Some(self.project.clone()),
            ..SessionHeader::default()
        };
        let log = Log::create(&self.sessions_root(), header).unwrap();
        let id = log.id().as_str().to_string();
        let dir = log.dir().to_path_buf();
        drop(log);
        let ws = Workspace::create(&self.project, &dir, &id).unwrap();
        ws.wait_base().unwrap();
        (id, dir)
    }

    fn allow(&self, act: &str) {
        let mut text = fs::read_to_string(self.project.join("chock.toml")).unwrap_or_default();
        text.push_str(&format!(
            "[[rule]]\naction = \"{act}\"\ndecision = \"allow\"\n"
        ));
        fs::write(self.project.join("chock.toml"), text).unwrap();
    }
}

/// Edits the workspace through a real overlay mount over the project's own path.
fn in_overlay(session_dir: &Path, script: &str) {
    let ws = Workspace::open(session_dir).unwrap();
    let WorkspaceMount::Overlay { lower, upper, work } = ws.mount() else {
        panic!()
    };
    let l = lower.display();
    let cmd = format!(
        "mount -t overlay overlay -o lowerdir={l},upperdir={},workdir={},userxattr {l} && cd {l} && {script}",
        upper.display(),
        work.display()
    );
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &cmd])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The session's events, each checked to be exactly its kind's type (a stray field fails).
fn events(dir: &Path) -> Vec<chock_log::Event> {
    let events = chock_log::read_events(dir).unwrap();
    for e in &events {
        if let Err(err) = chock_protocol::EventData::parse_exact(e.kind, &e.data) {
            panic!("line {}: {err}", e.seq);
        }
    }
    events
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// A session with a text edit in two places, a new file, a deletion, a mode change and a symlink.
fn edited() -> (Env, String, PathBuf) {
    let env = Env::new(true);
    env.write("src/a.txt", &lines(30));
    env.write("old.txt", "old\n");
    env.write("run.sh", "echo run\n");
    env.sh("git add -A && git commit -q -m init");
    let (id, dir) = env.session();
    in_overlay(
        &dir,
        "sed -i 's/^line 2$/two/; s/^line 27$/twenty-seven/' src/a.txt && printf 'hello\\n' > new.txt \
         && rm old.txt && chmod +x run.sh && ln -s src/a.txt link",
    );
    (env, id, dir)
}

#[test]
fn diff_prints_ids_and_has_stat_and_name_only_forms() {
    let (env, id, _) = edited();
    let out = env.chock(&["diff", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let patch = String::from_utf8(out.stdout).unwrap();
    assert!(
        !patch.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    insta::assert_snapshot!("diff_patch", patch);
    let stat = env.chock(&["diff", "--stat", &id]);
    insta::assert_snapshot!("diff_stat", String::from_utf8(stat.stdout).unwrap());
    let names = env.chock(&["diff", "--name-only", &id]);
    insta::assert_snapshot!("diff_name_only", String::from_utf8(names.stdout).unwrap());
    let coloured = env.chock(&["diff", "--color", "always", &id]);
    assert!(
        String::from_utf8(coloured.stdout)
            .unwrap()
            .contains("\x1b[32m+two")
    );
    // The same ids on a second run.
    assert_eq!(
        String::from_utf8(env.chock(&["diff", &id]).stdout).unwrap(),
        patch
    );
}

#[test]
fn apply_with_no_terminal_to_ask_is_refused_with_123_and_writes_nothing() {
    let (env, id, dir) = edited();
    let out = env.chock(&["apply", &id]);
    assert_eq!(out.status.code(), Some(123), "{}", text(&out));
    assert!(
        text(&out).contains("workspace.apply must be asked"),
        "{}",
        text(&out)
    );
    assert_eq!(env.read("src/a.txt"), lines(30));
    assert!(!env.project.join("new.txt").exists());
    let decision = events(&dir)
        .into_iter()
        .find(|e| e.kind == EventKind::Decision)
        .expect("decision logged");
    assert_eq!(decision.data["action"], "workspace.apply");
    assert_eq!(decision.data["allowed"], false);
}

#[test]
fn apply_then_undo_through_the_cli_is_logged_with_ids_and_hashes() {
    let (env, id, dir) = edited();
    env.allow("workspace.apply");
    let out = env.chock(&["apply", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let apply_id = format!("{id}.1");
    assert!(
        text(&out).contains(&format!("applied as {apply_id}")),
        "{}",
        text(&out)
    );
    assert_eq!(
        env.read("src/a.txt"),
        lines(30)
            .replace("line 2\n", "two\n")
            .replace("line 27\n", "twenty-seven\n")
    );
    assert_eq!(env.read("new.txt"), "hello\n");
    assert!(!env.project.join("old.txt").exists());
    assert_eq!(
        fs::read_link(env.project.join("link")).unwrap(),
        Path::new("src/a.txt")
    );
    assert_eq!(
        env.sh("git rev-parse --abbrev-ref HEAD"),
        "main\n",
        "the branch did not move"
    );
    let evs = events(&dir);
    let apply = evs
        .iter()
        .find(|e| e.kind == EventKind::WorkspaceApply)
        .expect("workspace.apply logged");
    let decision_seq = evs
        .iter()
        .find(|e| e.kind == EventKind::Decision)
        .unwrap()
        .seq;
    assert!(decision_seq < apply.seq, "decided before the act");
    assert_eq!(apply.data["apply_id"], apply_id.as_str());
    assert_eq!(apply.data["base_hash"].as_str().unwrap().len(), 64);
    assert_eq!(apply.data["result_hash"].as_str().unwrap().len(), 64);
    assert!(apply.data["base_commit"].as_str().is_some());
    // Without --expect the apply still says, and records, which digest it took.
    let digest = last_digest(&env.chock(&["diff", "--stat", &id]));
    assert_eq!(apply.data["digest"], digest.as_str());
    assert!(
        text(&out).contains(&format!("digest {digest}")),
        "{}",
        text(&out)
    );
    // Undo, with a user edit elsewhere that must survive.
    env.write(
        "src/a.txt",
        &env.read("src/a.txt").replace("line 15\n", "user 15\n"),
    );
    let undo = env.chock(&["undo", &apply_id]);
    assert!(undo.status.success(), "{}", text(&undo));
    assert_eq!(
        env.read("src/a.txt"),
        lines(30).replace("line 15\n", "user 15\n")
    );
    assert_eq!(env.read("old.txt"), "old\n");
    assert!(!env.project.join("new.txt").exists() && !env.project.join("link").exists());
    let again = env.chock(&["undo", &apply_id]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("already undone"));
}

/// The digest `chock diff` printed as its last line.
fn last_digest(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("diff printed something");
    let digest = last
        .strip_prefix("digest ")
        .unwrap_or_else(|| panic!("last line: {last}"));
    assert_eq!(digest.len(), 64, "{last}");
    digest.to_string()
}

#[test]
fn apply_expect_refuses_a_session_changed_since_the_review_and_applies_the_reviewed_digest() {
    let (env, id, dir) = edited();
    env.allow("workspace.apply");
    let reviewed = last_digest(&env.chock(&["diff", &id]));
    assert_eq!(
        last_digest(&env.chock(&["diff", "--stat", &id])),
        reviewed,
        "--stat prints the same digest"
    );
    // The session runs on after the review and slips in one more change.
    in_overlay(&dir, "printf 'unreviewed\\n' >> new.txt");
    let refused = env.chock(&["apply", &id, "--expect", &reviewed]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("changed since the review") && text(&refused).contains(&reviewed),
        "{}",
        text(&refused)
    );
    // Nothing written: the project is exactly as committed (chock.toml is the test's own, untracked).
    assert_eq!(env.sh("git status --porcelain"), "?? chock.toml\n");
    assert!(
        events(&dir)
            .iter()
            .all(|e| e.kind != EventKind::WorkspaceApply && e.kind != EventKind::Decision),
        "refused before the decision and the log"
    );
    // Reviewed again: the new digest applies, and the change reviewed second is what lands.
    let now = last_digest(&env.chock(&["diff", &id]));
    assert_ne!(now, reviewed);
    let applied = env.chock(&["apply", &id, "--expect", &now]);
    assert!(applied.status.success(), "{}", text(&applied));
    assert!(
        text(&applied).contains(&format!("digest {now}")),
        "{}",
        text(&applied)
    );
    assert_eq!(env.read("new.txt"), "hello\nunreviewed\n");
    let apply = events(&dir)
        .into_iter()
        .find(|e| e.kind == EventKind::WorkspaceApply)
        .unwrap();
    assert_eq!(apply.data["digest"], now.as_str());
}

#[test]
fn apply_expect_pins_a_file_selection_and_rejects_a_malformed_digest() {
    let (env, id, dir) = edited();
    env.allow("workspace.apply");
    let whole = last_digest(&env.chock(&["diff", &id]));
    let shown = env.chock(&["diff", &id, "--file", "new.txt"]);
    let one = last_digest(&shown);
    assert_ne!(one, whole, "a selection has its own digest");
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("new.txt") && !shown.contains("src/a.txt"),
        "{shown}"
    );
    let bad = env.chock(&["apply", &id, "--file", "new.txt", "--expect", "3f9a"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    // The whole diff's digest is not the selection's: refused, nothing written.
    let wrong = env.chock(&["apply", &id, "--file", "new.txt", "--expect", &whole]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(!env.project.join("new.txt").exists());
    // A change elsewhere in the session does not move the selection's digest.
    in_overlay(&dir, "printf 'later\\n' > later.txt");
    let ok = env.chock(&["apply", &id, "--file", "new.txt", "--expect", &one]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert_eq!(env.read("new.txt"), "hello\n");
    assert!(!env.project.join("later.txt").exists());
    assert_eq!(env.read("src/a.txt"), lines(30));
}

#[test]
fn apply_of_one_hunk_and_a_conflict_named_by_hunk_id() {
    let (env, id, _) = edited();
    env.allow("workspace.apply");
    let ws_diff = Workspace::open(&chock_workspace_dir(&env, &id))
        .unwrap()
        .diff()
        .unwrap();
    let hunks: Vec<String> = ws_diff
        .file("src/a.txt")
        .unwrap()
        .hunks
        .iter()
        .map(|h| h.id.clone())
        .collect();
    env.write("src/a.txt", &lines(30).replace("line 27\n", "mine\n"));
    let out = env.chock(&["apply", &id, "--hunk", &hunks[1]]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("hunk {}", hunks[1])),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("nothing was written"));
    let ok = env.chock(&["apply", &id, "--hunk", &hunks[0], "--file", "new.txt"]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert_eq!(
        env.read("src/a.txt"),
        lines(30)
            .replace("line 2\n", "two\n")
            .replace("line 27\n", "mine\n")
    );
    assert_eq!(env.read("new.txt"), "hello\n");
    assert!(
        env.project.join("old.txt").exists(),
        "unselected changes stay in the workspace"
    );
    let bad = env.chock(&["apply", &id, "--hunk", "deadbeef:00000000"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

fn chock_workspace_dir(env: &Env, id: &str) -> PathBuf {
    env.sessions_root().join(id)
}

#[test]
fn overlay_sessions_are_adopted_listed_and_removed() {
    let env = Env::new(false);
    env.write("a.txt", "a\n");
    env.write("gone.txt", "g\n");
    let (id, dir) = env.session();
    in_overlay(&dir, "echo b > a.txt && rm gone.txt");
    let refused = env.chock(&["apply", &id]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused).contains("chock workspace adopt"),
        "{}",
        text(&refused)
    );
    let asked = env.chock(&["workspace", "adopt", &id]);
    assert_eq!(asked.status.code(), Some(123), "{}", text(&asked));
    env.allow("workspace.adopt");
    let out = env.chock(&["workspace", "adopt", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let dest = env.project.join(".chock-adopted").join(&id);
    assert_eq!(fs::read_to_string(dest.join("files/a.txt")).unwrap(), "b\n");
    assert_eq!(
        fs::read_to_string(dest.join("deleted")).unwrap(),
        "gone.txt\n"
    );
    assert_eq!(env.read("a.txt"), "a\n");
    let adopt = events(&dir)
        .into_iter()
        .find(|e| e.kind == EventKind::WorkspaceAdopt)
        .unwrap();
    assert_eq!(
        (adopt.data["files"].as_u64(), adopt.data["deleted"].as_u64()),
        (Some(1), Some(1))
    );
    let again = env.chock(&["workspace", "adopt", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again).contains("files/a.txt already exists"),
        "{}",
        text(&again)
    );
    let list = env.chock(&["workspace", "list"]);
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(&format!("{id}  ended  overlay")),
        "{}",
        text(&list)
    );
    let rm = env.chock(&["workspace", "rm", &id]);
    assert!(rm.status.success(), "{}", text(&rm));
    assert!(!String::from_utf8_lossy(&env.chock(&["workspace", "list"]).stdout).contains(&id));
    let unknown = env.chock(&["diff", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// Runs `chock args` on a pseudo-terminal (util-linux `script`) with `answer` typed in: the
/// person's answer is the one fake the tests allow.
fn chock_on_terminal(env: &Env, args: &[&str], answer: &str) -> Output {
    let command = format!("{CHOCK} {}", args.join(" "));
    let mut child = env
        .program("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn ask_on_a_terminal_applies_on_yes_and_refuses_on_no() {
    let (env, id, dir) = edited();
    let no = chock_on_terminal(&env, &["apply", &id], "n\n");
    assert_eq!(no.status.code(), Some(123), "{}", text(&no));
    assert!(
        text(&no).contains("write 5 path(s) into"),
        "the question names what: {}",
        text(&no)
    );
    let digest = last_digest(&env.chock(&["diff", &id]));
    assert!(
        text(&no).contains(&format!("digest {digest}")) && text(&no).contains("A new.txt"),
        "the question shows the digest and what lands: {}",
        text(&no)
    );
    assert_eq!(env.read("src/a.txt"), lines(30));
    let yes = chock_on_terminal(&env, &["apply", &id], "y\n");
    assert!(yes.status.success(), "{}", text(&yes));
    assert_eq!(env.read("new.txt"), "hello\n");
    // Each act: the question, the person's answer naming it, then the decision.
    let evs = events(&dir);
    let asked: Vec<(&str, &str, bool)> = evs
        .iter()
        .filter(|e| e.kind == EventKind::ApprovalAnswer)
        .map(|e| {
            let decision = evs
                .iter()
                .find(|d| d.kind == EventKind::Decision && d.seq > e.seq)
                .expect("a decision after the answer");
            (
                e.data["answer"].as_str().unwrap(),
                e.data["by"].as_str().unwrap(),
                decision.data["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            ("deny", "terminal", false),
            ("allow_once", "terminal", true)
        ]
    );
}

/// A session whose command created the project's missing `chock.toml` (a table widening what the
/// next session may do, with an escape sequence that would clear its own line on a terminal) and
/// edited a file; `workspace.apply` is allowed by the organisation, so the table never asks.
fn wrote_policy() -> (Env, String, PathBuf) {
    let env = Env::new(true);
    env.write("a.txt", "one\n");
    env.sh("git add -A && git commit -q -m init");
    fs::write(
        &env.org,
        "[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let (id, dir) = env.session();
    in_overlay(
        &dir,
        "printf '[[rule]]\\naction = \"exec.*\"\\ndecision = \"allow\"\\n# \\033[2Knothing to see\\n' > chock.toml \
         && echo two >> a.txt",
    );
    (env, id, dir)
}

#[test]
fn diff_marks_a_policy_file_and_apply_refuses_it_unless_named_and_confirmed() {
    let (env, id, dir) = wrote_policy();
    let diff = env.chock(&["diff", &id]);
    assert!(diff.status.success(), "{}", text(&diff));
    let patch = String::from_utf8(diff.stdout.clone()).unwrap();
    assert!(
        !patch.contains('\x1b'),
        "the escape is spelled out: {patch}"
    );
    insta::assert_snapshot!("diff_policy_file", patch);
    let digest = last_digest(&diff);

    // Not named: refused by name, exit 1, before any decision, log entry or write.
    let refused = env.chock(&["apply", &id]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    insta::assert_snapshot!(
        "apply_policy_file_refused",
        String::from_utf8_lossy(&refused.stderr).replace(&id, "SESSION")
    );
    assert!(!env.project.join("chock.toml").exists());
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(
        events(&dir).iter().all(|e| e.kind != EventKind::Decision),
        "refused before the decision"
    );
    // The other changes can still be taken without it.
    let rest = env.chock(&["apply", &id, "--file", "a.txt"]);
    assert!(rest.status.success(), "{}", text(&rest));
    assert_eq!(env.read("a.txt"), "one\ntwo\n");
    let digest_now = last_digest(&env.chock(&["diff", &id]));
    assert_eq!(digest_now, digest, "the session itself did not change");

    // A name that is no policy change among the selected ones is bad input.
    let stray = env.chock(&["apply", &id, "--include-policy", "a.txt"]);
    assert_eq!(stray.status.code(), Some(2), "{}", text(&stray));

    // Named, but with no terminal nobody can confirm it: refused, 123, nothing written.
    let nobody = env.chock(&["apply", &id, "--include-policy", "chock.toml"]);
    assert_eq!(nobody.status.code(), Some(123), "{}", text(&nobody));
    assert!(
        text(&nobody).contains("needs a person to confirm it at a terminal"),
        "{}",
        text(&nobody)
    );
    assert!(!env.project.join("chock.toml").exists());

    // At a terminal: its own question, showing the whole new content escaped; no is a refusal.
    let args = [
        "apply",
        &id,
        "--include-policy",
        "chock.toml",
        "--expect",
        &digest,
    ];
    let no = chock_on_terminal(&env, &args, "n\n");
    assert_eq!(no.status.code(), Some(123), "{}", text(&no));
    let asked = text(&no);
    assert!(
        asked.contains(
            "chock.toml is Chock's own policy for the next session started in the project"
        ) && asked.contains("    | action = \"exec.*\"")
            && asked.contains("    | # \\u{1b}[2Knothing to see")
            && asked.contains("write this policy file into the project: chock.toml")
            && asked.contains("[y] yes once"),
        "{asked}"
    );
    assert!(!asked.contains("\x1b[2K"), "{asked}");
    assert!(!env.project.join("chock.toml").exists());

    // Yes, pinned to the reviewed digest: it lands, and the log holds the question and the answer
    // before the decision and the act.
    let yes = chock_on_terminal(&env, &args, "y\n");
    assert!(yes.status.success(), "{}", text(&yes));
    assert!(
        env.read("chock.toml")
            .starts_with("[[rule]]\naction = \"exec.*\"")
    );
    let evs = events(&dir);
    let answers: Vec<&str> = evs
        .iter()
        .filter(|e| e.kind == EventKind::ApprovalAnswer)
        .map(|e| e.data["answer"].as_str().unwrap())
        .collect();
    assert_eq!(answers, ["none", "deny", "allow_once"]);
    let last_answer = evs
        .iter()
        .rfind(|e| e.kind == EventKind::ApprovalAnswer)
        .unwrap()
        .seq;
    let apply = evs
        .iter()
        .rfind(|e| e.kind == EventKind::WorkspaceApply)
        .unwrap();
    assert!(last_answer < apply.seq);
    assert_eq!(apply.data["digest"], digest.as_str());
}

#[test]
fn adopt_refuses_a_policy_file_unless_named_and_confirmed() {
    let env = Env::new(false);
    env.write("a.txt", "a\n");
    let (id, dir) = env.session();
    in_overlay(&dir, "echo '[[rule]]' > chock.toml && echo b > a.txt");
    fs::write(
        &env.org,
        "[[rule]]\naction = \"workspace.adopt\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let refused = env.chock(&["workspace", "adopt", &id]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("--include-policy chock.toml"),
        "{}",
        text(&refused)
    );
    let nobody = env.chock(&["workspace", "adopt", &id, "--include-policy", "chock.toml"]);
    assert_eq!(nobody.status.code(), Some(123), "{}", text(&nobody));
    assert!(!env.project.join(".chock-adopted").exists());
    let yes = chock_on_terminal(
        &env,
        &["workspace", "adopt", &id, "--include-policy", "chock.toml"],
        "y\n",
    );
    assert!(yes.status.success(), "{}", text(&yes));
    assert!(
        text(&yes).contains("copy this policy file aside into .chock-adopted/: chock.toml"),
        "{}",
        text(&yes)
    );
    let copied = env
        .project
        .join(".chock-adopted")
        .join(&id)
        .join("files/chock.toml");
    assert_eq!(fs::read_to_string(copied).unwrap(), "[[rule]]\n");
}
