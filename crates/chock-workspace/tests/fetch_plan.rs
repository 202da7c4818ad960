//! Where an approved fetch or pull reads from is the host's to say, as for a push: a workspace that
//! rewrites `origin` or sets `url.<x>.insteadOf` changes what the question shows, never the source;
//! a URL no remote of the host names needs an exact `git.fetch.<host>` rule; and the fetch carried
//! out from the plan's own git directory reaches the host's remote and lands in the workspace.

mod remote_common;

use std::process::Command;

use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND};
use chock_test_support::installed;
use chock_workspace::{FetchRequest, PushError, RemotePlan, plan_fetch};
use remote_common::{git, policy, setup};

fn request(pull: bool, remote: Option<&str>, refspecs: &[&str], options: &[&str]) -> FetchRequest {
    FetchRequest {
        pull,
        remote: remote.map(str::to_owned),
        refspecs: refspecs.iter().map(|s| (*s).to_owned()).collect(),
        options: options.iter().map(|s| (*s).to_owned()).collect(),
        branch: Some("main".into()),
        workspace_urls: Vec::new(),
    }
}

#[test]
fn a_rewritten_origin_or_insteadof_does_not_move_the_fetch() {
    let s = setup("https://git.example.org/me/project.git");
    let ws = &s.workspace;
    git(
        ws,
        &["remote", "set-url", "origin", "https://evil.example/x.git"],
    );
    git(
        ws,
        &[
            "config",
            "url.https://evil.example/.insteadOf",
            "https://git.example.org/",
        ],
    );
    for remote in [Some("origin"), None] {
        let mut req = request(false, remote, &["main"], &["-q"]);
        req.workspace_urls = s.workspace_urls();
        let plan = plan_fetch(s.project.path(), &req, &policy("")).expect("planned");
        assert_eq!(plan.url.text, "https://git.example.org/me/project.git");
        assert_eq!(plan.remote.as_deref(), Some("origin"));
        // `main` is the remote's branch, written to the host's tracking ref for it.
        assert_eq!(plan.refspecs, ["+refs/heads/main:refs/remotes/origin/main"]);
        assert_eq!(
            plan.git_args(),
            [
                "fetch",
                "--no-auto-maintenance",
                "-q",
                "--",
                "https://git.example.org/me/project.git",
                "+refs/heads/main:refs/remotes/origin/main"
            ]
        );
        assert_eq!(
            plan.connect_action().as_str(),
            "net.connect.org.example.git.443"
        );
        let q = plan.question();
        assert!(q.contains("refs/heads/main"), "{q}");
        assert!(
            q.contains("https://evil.example/x.git, which is not used"),
            "{q}"
        );
        assert_eq!(plan.then, None);
    }
    // With no refspec, the host's own refspecs for the remote.
    let plan = plan_fetch(
        s.project.path(),
        &request(false, None, &[], &[]),
        &policy(""),
    )
    .unwrap();
    assert_eq!(plan.refspecs, ["+refs/heads/*:refs/remotes/origin/*"]);
}

#[test]
fn a_url_no_host_remote_names_needs_an_exact_fetch_rule() {
    let s = setup("https://git.example.org/me/project.git");
    let req = request(false, Some("https://other.example/r.git"), &["main"], &[]);
    let none = plan_fetch(s.project.path(), &req, &policy(""));
    assert!(
        matches!(&none, Err(PushError::NoRule { action, .. }) if action == "git.fetch.example.other"),
        "{none:?}"
    );
    // A push rule for the host is not a fetch rule, nor is a wildcard or a deny.
    for table in [
        "[[rule]]\naction = \"git.push.example.other\"\ndecision = \"ask\"\n",
        "[[rule]]\naction = \"git.fetch.*\"\ndecision = \"ask\"\n",
        "[[rule]]\naction = \"git.fetch.example.other\"\ndecision = \"deny\"\n",
    ] {
        let got = plan_fetch(s.project.path(), &req, &policy(table));
        assert!(
            matches!(got, Err(PushError::NoRule { .. })),
            "{table}: {got:?}"
        );
    }
    let exact = "[[rule]]\naction = \"git.fetch.example.other\"\ndecision = \"ask\"\n";
    let plan = plan_fetch(s.project.path(), &req, &policy(exact)).expect("a rule names it");
    assert_eq!(plan.url.text, "https://other.example/r.git");
    assert_eq!(plan.remote, None);
    assert_eq!(plan.refspecs, ["refs/heads/main"]);
    let unknown = plan_fetch(
        s.project.path(),
        &request(false, Some("evil"), &[], &[]),
        &policy(exact),
    );
    assert!(matches!(unknown, Err(PushError::UnknownRemote(r)) if r == "evil"));
}

#[test]
fn a_pull_merges_or_rebases_fetch_head_and_refuses_what_it_cannot_carry_out() {
    let s = setup("https://git.example.org/me/project.git");
    let table = policy("");
    let plan = plan_fetch(
        s.project.path(),
        &request(true, Some("origin"), &["main"], &["--ff-only"]),
        &table,
    )
    .unwrap();
    assert_eq!(
        plan.then.as_deref(),
        Some(&["merge".to_owned(), "--ff-only".into(), "FETCH_HEAD".into()][..])
    );
    assert!(
        plan.question()
            .contains("then `git merge --ff-only FETCH_HEAD`"),
        "{}",
        plan.question()
    );
    let plan = plan_fetch(
        s.project.path(),
        &request(true, Some("origin"), &["main"], &["--rebase"]),
        &table,
    )
    .unwrap();
    assert_eq!(
        plan.then.as_deref(),
        Some(&["rebase".to_owned(), "FETCH_HEAD".into()][..])
    );
    // No refspec: the branch's upstream in the host's configuration, or a refusal naming the fix.
    let none = plan_fetch(s.project.path(), &request(true, None, &[], &[]), &table);
    assert!(matches!(none, Err(PushError::Refspec(..))), "{none:?}");
    git(
        s.project.path(),
        &["config", "branch.main.remote", "origin"],
    );
    git(
        s.project.path(),
        &["config", "branch.main.merge", "refs/heads/main"],
    );
    let plan = plan_fetch(s.project.path(), &request(true, None, &[], &[]), &table).unwrap();
    assert_eq!(plan.refspecs, ["+refs/heads/main:refs/remotes/origin/main"]);
    for (pull, options, specs) in [
        (false, &["--depth=1"][..], &["main"][..]),
        (false, &["--prune"], &["main"]),
        (false, &["--all"], &[]),
        (false, &["--upload-pack=x"], &["main"]),
        (true, &["--rebase", "--ff-only"], &["main"]),
        (true, &[], &["refs/heads/*:refs/remotes/origin/*"]),
        (false, &[], &[":refs/heads/x"]),
        (false, &[], &["^refs/heads/x"]),
    ] {
        let got = plan_fetch(
            s.project.path(),
            &request(pull, Some("origin"), specs, options),
            &table,
        );
        assert!(
            matches!(got, Err(PushError::Refspec(..))),
            "{options:?} {specs:?}: {got:?}"
        );
    }
}

/// The fetch the plan carries out reads none of the workspace's configuration: a workspace whose
/// `insteadOf` sends the host's URL to another server does not reach it; the host's remote's new
/// commit lands in the workspace's objects and tracking ref, and its `FETCH_HEAD`.
#[test]
fn the_planned_fetch_reads_the_hosts_remote_into_the_workspace() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let real = GitHttpServer::start("alice", "pw-real");
    let decoy = GitHttpServer::start("alice", "pw-decoy");
    let s = setup(&real.url());
    let new = real.add_commit("from the server");
    let ws = &s.workspace;
    git(ws, &["remote", "set-url", "origin", &decoy.url()]);
    git(
        ws,
        &[
            "config",
            &format!("url.{}.insteadOf", decoy.url()),
            &real.url(),
        ],
    );
    let plan = plan_fetch(
        s.project.path(),
        &request(false, Some("origin"), &["main"], &[]),
        &policy(""),
    )
    .unwrap();
    let fetch_dir = s.project.root().join("fetch.git");
    plan.write_fetch_dir(&fetch_dir, &ws.join(".git")).unwrap();
    let askpass = s.project.root().join("askpass");
    std::fs::write(&askpass, "#!/bin/sh\necho pw-real\n").unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&askpass)
        .status()
        .unwrap();
    let out = Command::new("git")
        .args(plan.git_args())
        .current_dir(ws)
        .envs(plan.git_env(&fetch_dir))
        .env("GIT_ASKPASS", &askpass)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(git(ws, &["rev-parse", "refs/remotes/origin/main"]), new);
    assert_eq!(git(ws, &["rev-parse", "FETCH_HEAD"]), new);
    assert_eq!(
        git(ws, &["show", &format!("{new}:fetched.txt")]),
        "from the server"
    );
    assert!(
        decoy.served().is_empty(),
        "the decoy was reached: {:?}",
        decoy.served()
    );
    // Nothing was written into the plan's own directory but through its links.
    let mut names: Vec<String> = std::fs::read_dir(&fetch_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "FETCH_HEAD",
            "HEAD",
            "config",
            "objects",
            "packed-refs",
            "refs",
            "shallow"
        ]
    );
}
