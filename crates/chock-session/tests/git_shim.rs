//! The git shim through a real sandbox and the real git (docs/git.md): each git invocation in a
//! call is an act `git.<sub>` the host classifies and decides through the session's pipeline before
//! the real git runs; the tricks git itself offers neither reclassify an act nor reach the real git
//! another way; the channel is gone when the call is.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::sync::Arc;

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_session::{
    CallOptions, CallOutcome, Calls, Deciding, NoApprover, Session, SessionOptions,
};

/// The tests of this file one at a time: one counts the test process's descriptors.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A project that is a git repository with one commit, an alias `z = push` in its own
/// configuration, a remote `origin` and a directory `sub`.
fn fixture(policy: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    std::fs::write(project.join("chock.toml"), policy).unwrap();
    std::fs::write(project.join("sub/keep"), "").unwrap();
    host_git(&project, &["init", "-q", "-b", "main"]);
    host_git(&project, &["config", "user.name", "t"]);
    host_git(&project, &["config", "user.email", "t@example.invalid"]);
    host_git(&project, &["config", "alias.z", "push"]);
    host_git(
        &project,
        &["remote", "add", "origin", "https://example.invalid/r.git"],
    );
    host_git(&project, &["add", "-A"]);
    host_git(&project, &["commit", "-qm", "one"]);
    Fixture {
        _dir: dir,
        project,
        root: base.join("sessions"),
    }
}

fn open(f: &Fixture) -> Session {
    open_with(f, Calls::Overlapping)
}

/// A session whose calls are made as `calls` says: `Overlapping` (the agent's) forks them from a
/// session sandbox, `One` (`chock exec`'s) builds each sandbox of its own.
fn open_with(f: &Fixture, calls: Calls) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        calls,
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

/// Runs `script` with `sh -c` as call `id`: its exit code, stdout and stderr.
async fn run(s: &Session, id: &str, script: &str) -> (i32, String, String) {
    run_with(s, id, script, &NoApprover).await
}

async fn run_with(
    s: &Session,
    id: &str,
    script: &str,
    deciding: &dyn Deciding,
) -> (i32, String, String) {
    let opts = CallOptions {
        call_id: Some(id.into()),
        ..CallOptions::default()
    };
    let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
    let r = s.confined_call_async(&argv, &opts, deciding).await.unwrap();
    match r.outcome {
        CallOutcome::Ran {
            outcome,
            stdout,
            stderr,
            ..
        } => {
            let code = match outcome.status {
                chock_sandbox::ExitStatus::Exited(c) => c,
                other => panic!("{other:?}"),
            };
            (
                code,
                String::from_utf8_lossy(&stdout).into_owned(),
                String::from_utf8_lossy(&stderr).into_owned(),
            )
        }
        other => panic!("{other:?}"),
    }
}

/// The `git.*` decisions logged under `call_id`, in order: (action, allowed).
fn git_decisions(s: &Session, call_id: &str) -> Vec<(String, bool)> {
    chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .filter(|e| e.call_id.as_deref() == Some(call_id) && e.kind.to_string() == "decision")
        .filter_map(|e| {
            let action = e.data["action"].as_str()?.to_string();
            action
                .starts_with("git.")
                .then(|| (action, e.data["allowed"].as_bool().unwrap_or(false)))
        })
        .collect()
}

fn kinds_of(s: &Session, call_id: &str) -> Vec<String> {
    chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .filter(|e| e.call_id.as_deref() == Some(call_id))
        .map(|e| e.kind.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_in_a_call_is_decided_allow_and_logged_before_the_result() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("");
    let s = open(&f);
    let (code, out, err) = run(
        &s,
        "c1",
        "echo two > two.txt && git add two.txt && git commit -qm two && git rev-list --count HEAD",
    )
    .await;
    assert_eq!((code, out.trim()), (0, "2"), "{err}");
    let decided = git_decisions(&s, "c1");
    assert_eq!(
        decided,
        [
            ("git.add".to_string(), true),
            ("git.commit".to_string(), true),
            // git's own `maintenance run --auto` after the commit, through the shim too.
            ("git.maintenance".to_string(), true),
            ("git.inspect".to_string(), true)
        ],
        "{err}"
    );
    let kinds = kinds_of(&s, "c1");
    assert_eq!(kinds.first().map(String::as_str), Some("tool.call"));
    assert_eq!(kinds.last().map(String::as_str), Some("command.result"));
    // The project itself is untouched: the commit is the workspace's.
    assert_eq!(
        host_git(&f.project, &["rev-list", "--count", "HEAD"]).trim(),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_row_stops_a_commit_and_names_the_act_and_the_rule() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("[[rule]]\naction = \"git.commit\"\ndecision = \"deny\"\n");
    let s = open(&f);
    let (code, out, err) = run(
        &s,
        "d1",
        "git commit -q --allow-empty -m two; echo \"exit $?\"; git rev-list --count HEAD",
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(out, "exit 126\n1\n", "{err}");
    assert!(
        err.contains("`git.commit` refused by") && err.contains("chock.toml:2 (rule `git.commit`)"),
        "{err}"
    );
    assert_eq!(
        git_decisions(&s, "d1"),
        [
            ("git.commit".to_string(), false),
            ("git.inspect".to_string(), true)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_the_per_call_way_gets_the_shim_and_the_channel_too() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n");
    let s = open_with(&f, Calls::One);
    let (code, out, err) = run(
        &s,
        "p1",
        "git commit -q --allow-empty -m two && git rev-list --count HEAD; \
         /usr/bin/git push origin main; echo \"exit $?\"",
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "2\nexit 126\n"), "{err}");
    assert_eq!(
        git_decisions(&s, "p1"),
        [
            ("git.commit".to_string(), true),
            ("git.maintenance".to_string(), true),
            ("git.inspect".to_string(), true),
            ("git.push".to_string(), false)
        ]
    );
}

/// A person who answers yes, and notes what each question was about.
#[derive(Debug, Default)]
struct Yes(std::sync::Mutex<Vec<String>>);

impl Answerer for Yes {
    fn name(&self) -> String {
        "person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        self.0
            .lock()
            .unwrap()
            .push(q.action.clone().unwrap_or_default());
        Box::pin(async move {
            Some(Answer::AllowOnce {
                reasons: String::new(),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_commit_runs_after_its_question_answer_and_decision_are_logged() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("[[rule]]\naction = \"git.commit\"\ndecision = \"ask\"\n");
    let s = open(&f);
    let yes = Arc::new(Yes::default());
    let pipeline = s.pipeline(ApprovalBroker::new().with(yes.clone()));
    let (code, out, err) = run_with(
        &s,
        "a1",
        "git commit -q --allow-empty -m two && git rev-list --count HEAD",
        &pipeline,
    )
    .await;
    assert_eq!((code, out.trim()), (0, "2"), "{err}");
    assert_eq!(*yes.0.lock().unwrap(), ["git.commit"]);
    let kinds = kinds_of(&s, "a1");
    let at = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(at("approval.ask") < at("approval.answer"), "{kinds:?}");
    // The commit's decision follows its answer at once (the first `decision` is the command's).
    assert_eq!(kinds[at("approval.answer") + 1], "decision", "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("command.result"));
    // Unanswered is a refusal: the same commit with nobody to ask never runs.
    let (code, out, _) = run(
        &s,
        "a2",
        "git commit -q --allow-empty -m three; git rev-list --count HEAD",
    )
    .await;
    assert_eq!((code, out.trim()), (0, "2"));
    assert!(git_decisions(&s, "a2").contains(&("git.commit".to_string(), false)));
}

/// Each trick, and the act it must be decided as: none reaches the real git unasked.
const TRICKS: &[(&str, &str)] = &[
    ("git -c alias.x=push x origin main", "git.push"),
    ("git -C sub push origin main", "git.push"),
    ("git --git-dir=.git push origin main", "git.push"),
    ("git --exec-path=/tmp status", "git.unknown"),
    ("GIT_DIR=.git git push origin main", "git.push"),
    (
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.y GIT_CONFIG_VALUE_0=push git y",
        "git.push",
    ),
    (
        "GIT_CONFIG_PARAMETERS=\"'alias.w'='push'\" git w",
        "git.push",
    ),
    (
        "git -c core.sshCommand=/tmp/evil fetch origin",
        "git.unknown",
    ),
    ("git z origin main", "git.push"),
    ("/usr/bin/git push origin main", "git.push"),
    ("/usr/local/bin/git push origin main", "git.push"),
    ("/usr/lib/git-core/git push origin main", "git.push"),
    (
        "/usr/local/libexec/git-core/git push origin main",
        "git.push",
    ),
    (
        "/usr/local/libexec/git-core/git-push origin main",
        "git.push",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_trick_reclassifies_an_act_or_reaches_the_real_git() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n");
    let s = open(&f);
    // Every trick is tried, and every one that escaped is reported.
    let mut escaped = Vec::new();
    for (i, (script, act)) in TRICKS.iter().enumerate() {
        let program = script
            .split_whitespace()
            .find(|w| w.contains("git"))
            .unwrap();
        if program.starts_with('/') && !Path::new(program).exists() {
            continue;
        }
        let id = format!("t{i}");
        let (code, _out, err) = run(&s, &id, script).await;
        let decided = git_decisions(&s, &id);
        if code != 126
            || !err.contains(&format!("`{act}` refused"))
            || decided != [(act.to_string(), false)]
        {
            escaped.push(format!(
                "`{script}`: exit {code}, decided {decided:?}: {err}"
            ));
        }
    }
    assert!(escaped.is_empty(), "{}", escaped.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shim_is_the_only_git_and_the_channel_is_gone_after_the_call() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = fixture("");
    let s = open(&f);
    let sockets = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|l| l.to_string_lossy().starts_with("socket:"))
            .collect::<Vec<_>>()
    };
    // The session's own sockets (its session init's) and the runtime's are made at its first
    // calls.
    run(&s, "o0", "git status -s").await;
    run(&s, "o0b", "git status -s").await;
    let before = sockets();
    // Every git of the tree is the shim: none has git's own size.
    let (code, out, err) = run(
        &s,
        "o1",
        "for g in /usr/bin/git /usr/local/bin/git /usr/lib/git-core/git; do \
           [ -e $g ] && cmp -s $g /proc/self/fd/0 </dev/null; wc -c < $g; done; \
         git status -s >/dev/null; echo \"fd $CHOCK_CHANNEL_FD\"",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let shim = std::fs::metadata(env!("CARGO_BIN_EXE_chock-git-shim"))
        .unwrap()
        .len();
    for line in out.lines().filter(|l| !l.starts_with("fd")) {
        assert_eq!(line.trim().parse::<u64>().unwrap(), shim, "{out}");
    }
    assert!(out.ends_with("fd 3\n"), "{out}");
    assert_eq!(sockets(), before, "the host's end of the channel is closed");
}

/// A replaced shim, in Python (`support/replaced_shim.py`).
const REPLACED_SHIM: &str = include_str!("support/replaced_shim.py");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_shim_cannot_claim_another_working_directory() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let f = fixture("");
    let s = open(&f);
    std::fs::write(f.project.join("ask.py"), REPLACED_SHIM).unwrap();
    // Claiming the directory it is in: an answer, with the real git.
    let script = format!(
        "cd sub && python3 ../ask.py '[\"status\"]' {}/sub",
        f.project.display()
    );
    let (code, out, err) = run(&s, "r1", &script).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(r#""action":"git.status","allowed":true"#),
        "{out}"
    );
    assert!(out.trim_end().ends_with(" 1"), "{out}");
    // Claiming /tmp (where another repository could say anything) from the project: refused.
    let (code, out, err) = run(&s, "r2", "python3 ask.py '[\"status\"]' /tmp").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(r#""kind":"refused""#) && out.contains("not the asking process's"),
        "{out}"
    );
    assert!(out.trim_end().ends_with(" 0"), "{out}");
    assert!(git_decisions(&s, "r2").is_empty());
}
