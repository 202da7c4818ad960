//! The classifier against the real git: for each trick, git itself (with `GIT_TRACE`) says which of
//! its commands ran, and `git remote get-url` which URL it would reach; the classifier must agree,
//! reading the configuration the way the shim would (`git config --list`).

use std::path::Path;
use std::process::Command;

use chock_policy::git::{Invocation, classify};
use chock_test_support::{GitProject, requires};

/// The environment every git run here has: no user or system configuration.
const ISOLATED: &[(&str, &str)] = &[
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
];

fn git_present() -> bool {
    requires(
        Command::new("git").arg("--version").output().is_ok(),
        "git is not installed",
    )
}

fn run_git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .envs(ISOLATED.iter().copied())
        .envs(env.iter().copied())
        .output()
        .expect("git runs")
}

/// The configuration as the shim would read it: `git config --list -z`.
fn config_of(dir: &Path) -> Vec<(String, Option<String>)> {
    let out = run_git(dir, &["config", "--list", "-z"], &[]);
    String::from_utf8(out.stdout)
        .expect("utf-8 config")
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('\n') {
            Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
            None => (e.to_owned(), None),
        })
        .collect()
}

fn invocation(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Invocation {
    Invocation {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: ISOLATED
            .iter()
            .chain(env)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        config: config_of(dir),
        branch: Some("main".to_owned()),
        path_commands: Vec::new(),
    }
}

/// The command git ran, from its own trace.
fn builtin_git_ran(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut traced = env.to_vec();
    traced.push(("GIT_TRACE", "1"));
    let out = run_git(dir, args, &traced);
    let trace = String::from_utf8_lossy(&out.stderr);
    trace
        .lines()
        .filter_map(|l| l.split("trace: built-in: git ").nth(1))
        .next_back()
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("git {args:?} ran no built-in: {trace}"))
        .to_owned()
}

/// An invocation's arguments and the environment it adds.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

#[test]
fn the_classifier_names_the_command_git_runs() {
    if !git_present() {
        return;
    }
    let p = GitProject::new();
    p.write("sub/file", "x\n");
    p.git(&["config", "alias.a", "b"]);
    p.git(&["config", "alias.b", "status"]);
    p.git(&["config", "alias.p", "-c alias.q=status q"]);
    p.git(&["config", "alias.save", "log --format='%H %s' -1"]);
    let cases: &[Case<'_>] = &[
        (&["-c", "alias.st=status", "st"], &[]),
        (&["-c", "alias.status=log", "status"], &[]),
        (&["-c", "Alias.ST=status", "st"], &[]),
        (
            &["ci", "-1"],
            &[("GIT_CONFIG_PARAMETERS", "'alias.ci'='log'")],
        ),
        (
            &["ci", "-1"],
            &[("GIT_CONFIG_PARAMETERS", "'alias.ci=log'")],
        ),
        (
            &["x", "HEAD"],
            &[
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "alias.x"),
                ("GIT_CONFIG_VALUE_0", "rev-parse"),
            ],
        ),
        (
            &["-c", "alias.x=log", "x", "-1"],
            &[("GIT_CONFIG_PARAMETERS", "'alias.x'='status'")],
        ),
        (&["--config-env=alias.x=V", "x"], &[("V", "status")]),
        (&["a"], &[]),
        (&["p"], &[]),
        (&["save"], &[]),
        (&["-C", "sub", "--no-pager", "-p", "status"], &[]),
        (&["--git-dir=.git", "--work-tree", ".", "status"], &[]),
    ];
    for (args, env) in cases {
        let ran = builtin_git_ran(p.path(), args, env);
        let classified = classify(&invocation(p.path(), args, env));
        assert_eq!(
            classified.command.as_deref(),
            Some(ran.as_str()),
            "git {args:?} with {env:?}: git ran `{ran}`, the classifier said {classified:?}"
        );
    }
}

#[test]
fn the_classifier_reports_the_url_git_would_reach() {
    if !git_present() {
        return;
    }
    let p = GitProject::new();
    for (k, v) in [
        ("remote.origin.url", "https://example.org/project.git"),
        (
            "url.https://evil.example/.insteadOf",
            "https://example.org/",
        ),
        (
            "url.https://worse.example/.insteadOf",
            "https://example.org/pro",
        ),
        ("remote.up.url", "https://up.example/x"),
        ("remote.up.pushurl", "https://example.org/pushed"),
        (
            "url.ssh://push.example/.pushInsteadOf",
            "https://up.example/",
        ),
        ("remote.side.url", "https://up.example/side"),
    ] {
        p.git(&["config", "--add", k, v]);
    }
    let urls = |git_args: &[&str], ours: &[&str]| {
        let out = run_git(p.path(), git_args, &[]);
        assert!(out.status.success(), "{out:?}");
        let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        let classified = classify(&invocation(p.path(), ours, &[]));
        assert_eq!(
            classified.target.expect("a target").urls,
            theirs,
            "git {ours:?}"
        );
    };
    urls(&["remote", "get-url", "origin"], &["fetch", "origin"]);
    urls(
        &["remote", "get-url", "--push", "--all", "origin"],
        &["push", "origin"],
    );
    urls(
        &["remote", "get-url", "--push", "--all", "up"],
        &["push", "up"],
    );
    urls(
        &["remote", "get-url", "--push", "--all", "side"],
        &["push", "side"],
    );
    urls(&["remote", "get-url", "side"], &["fetch", "side"]);
    urls(
        &[
            "-c",
            "remote.origin.url=https://other.example/x",
            "remote",
            "get-url",
            "--push",
            "--all",
            "origin",
        ],
        &[
            "-c",
            "remote.origin.url=https://other.example/x",
            "push",
            "origin",
        ],
    );
}
