//! Where a push goes is read from the host's repository configuration at approval time: a workspace
//! that rewrites `origin`, adds a `pushurl`, sets `url.<x>.insteadOf` or `remote.pushDefault` changes
//! what the question shows beside the target, never the target; and the push carried out from the plan
//! reaches the host's remote only.

mod remote_common;

use std::process::Command;

use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND};
use chock_test_support::installed;
use chock_workspace::{PromptKind, PushError, PushRequest, RemotePlan, plan_push};
use remote_common::{git, policy, setup};

fn request(remote: Option<&str>, refspecs: &[&str], workspace_urls: Vec<String>) -> PushRequest {
    PushRequest {
        remote: remote.map(str::to_owned),
        refspecs: refspecs.iter().map(|s| (*s).to_owned()).collect(),
        options: Vec::new(),
        branch: Some("main".into()),
        workspace_urls,
    }
}

#[test]
fn a_rewritten_origin_pushurl_insteadof_or_pushdefault_does_not_move_the_push() {
    let s = setup("https://git.example.org/me/project.git");
    let ws = &s.workspace;
    git(
        ws,
        &[
            "remote",
            "set-url",
            "origin",
            "https://evil.example/steal.git",
        ],
    );
    git(
        ws,
        &[
            "config",
            "remote.origin.pushurl",
            "https://evil.example/push.git",
        ],
    );
    git(
        ws,
        &[
            "config",
            "url.https://evil.example/.insteadOf",
            "https://git.example.org/",
        ],
    );
    git(
        ws,
        &["remote", "add", "other", "https://evil.example/other.git"],
    );
    git(ws, &["config", "remote.pushDefault", "other"]);
    let table = policy("");
    for remote in [Some("origin"), None] {
        let plan = plan_push(
            s.project.path(),
            &s.source(),
            &request(remote, &[], s.workspace_urls()),
            &table,
        )
        .expect("the push is planned");
        assert_eq!(plan.url.text, "https://git.example.org/me/project.git");
        assert_eq!(plan.url.host, "git.example.org");
        assert_eq!(plan.url.port, 443);
        assert_eq!(plan.remote.as_deref(), Some("origin"));
        assert_eq!(plan.refs.len(), 1);
        let pushed = &plan.refs[0];
        assert_eq!(pushed.commit, s.second);
        assert_eq!(pushed.base.as_deref(), Some(s.first.as_str()));
        assert_eq!(pushed.commits, Some(1));
        assert_eq!(pushed.destination, "refs/heads/main");
        let q = plan.question();
        assert!(q.contains("https://git.example.org/me/project.git"), "{q}");
        assert!(
            q.contains(&format!("{}..{}", &s.first[..12], &s.second[..12])),
            "{q}"
        );
        assert!(q.contains("1 commit)"), "{q}");
        assert!(q.contains("refs/heads/main"), "{q}");
        assert!(
            q.contains("https://evil.example/push.git, which is not used"),
            "{q}"
        );
        assert_eq!(
            plan.connect_action().as_str(),
            "net.connect.org.example.git.443"
        );
        assert_eq!(
            plan.git_args(),
            vec![
                "push".to_owned(),
                "--no-verify".into(),
                "--".into(),
                "https://git.example.org/me/project.git".into(),
                format!("{}:refs/heads/main", s.second),
            ]
        );
    }
}

#[test]
fn the_host_configuration_decides_the_scheme_and_an_unreadable_one_refuses() {
    for (url, refused) in [
        ("file:///srv/r.git", true),
        ("ext::sh -c x", true),
        ("/srv/r.git", true),
        ("git://example.org/r", true),
        ("git@github.com:me/r.git", false),
        ("ssh://git@example.org:2222/r", false),
    ] {
        let s = setup(url);
        let got = plan_push(
            s.project.path(),
            &s.source(),
            &request(Some("origin"), &[], vec![]),
            &policy(""),
        );
        assert_eq!(got.is_err(), refused, "{url}: {got:?}");
        if refused {
            assert!(matches!(got, Err(PushError::Url(_))), "{url}: {got:?}");
        }
    }
}

#[test]
fn a_url_no_host_remote_names_needs_an_exact_project_rule() {
    let s = setup("https://git.example.org/me/project.git");
    let req = request(Some("https://other.example/r.git"), &["main"], vec![]);
    let none = plan_push(s.project.path(), &s.source(), &req, &policy(""));
    assert!(
        matches!(&none, Err(PushError::NoRule { action, .. }) if action == "git.push.example.other"),
        "{none:?}"
    );
    let wildcard = "[[rule]]\naction = \"git.push.*\"\ndecision = \"allow\"\n";
    let wild = plan_push(s.project.path(), &s.source(), &req, &policy(wildcard));
    assert!(matches!(wild, Err(PushError::NoRule { .. })), "{wild:?}");
    let denied = "[[rule]]\naction = \"git.push.example.other\"\ndecision = \"deny\"\n";
    let denied = plan_push(s.project.path(), &s.source(), &req, &policy(denied));
    assert!(
        matches!(denied, Err(PushError::NoRule { .. })),
        "{denied:?}"
    );
    let exact = "[[rule]]\naction = \"git.push.example.other\"\ndecision = \"ask\"\n";
    let plan =
        plan_push(s.project.path(), &s.source(), &req, &policy(exact)).expect("a rule names it");
    assert_eq!(plan.url.text, "https://other.example/r.git");
    assert_eq!(plan.remote, None);
    // A name that is neither a host remote nor a URL is refused.
    let unknown = plan_push(
        s.project.path(),
        &s.source(),
        &request(Some("evil"), &["main"], vec![]),
        &policy(exact),
    );
    assert!(matches!(unknown, Err(PushError::UnknownRemote(r)) if r == "evil"));
}

#[test]
fn refspecs_that_delete_glob_or_name_nothing_are_refused() {
    let s = setup("https://git.example.org/r.git");
    for spec in [
        ":refs/heads/main",
        "refs/heads/*:refs/heads/*",
        "nosuchbranch",
        "--all",
    ] {
        let got = plan_push(
            s.project.path(),
            &s.source(),
            &request(Some("origin"), &[spec], vec![]),
            &policy(""),
        );
        assert!(
            matches!(got, Err(PushError::Refspec(..))),
            "{spec}: {got:?}"
        );
    }
    let mut req = request(Some("origin"), &["main:release"], vec![]);
    req.options = vec!["--mirror".into()];
    assert!(matches!(
        plan_push(s.project.path(), &s.source(), &req, &policy("")),
        Err(PushError::Refspec(..))
    ));
    req.options = vec!["-f".into()];
    let plan = plan_push(s.project.path(), &s.source(), &req, &policy("")).unwrap();
    assert_eq!(plan.refs[0].destination, "refs/heads/release");
    assert!(plan.refs[0].force);
    assert!(plan.git_args().last().unwrap().starts_with('+'));
}

#[test]
fn only_prompts_about_the_planned_remote_are_answered() {
    let s = setup("http://alice@127.0.0.1:8080/repo.git");
    let plan = plan_push(
        s.project.path(),
        &s.source(),
        &request(None, &[], vec![]),
        &policy(""),
    )
    .unwrap();
    assert_eq!(
        plan.prompt_kind("Password for 'http://alice@127.0.0.1:8080': "),
        Some(PromptKind::Password)
    );
    assert_eq!(
        plan.prompt_kind("Username for 'http://127.0.0.1:8080': "),
        Some(PromptKind::Username)
    );
    for other in [
        "Password for 'http://alice@127.0.0.1:8081': ",
        "Password for 'https://alice@127.0.0.1:8080': ",
        "Password for 'http://bob@127.0.0.1:8080': ",
        "Password for 'http://alice@evil.example:8080': ",
        "Enter passphrase for key '/root/.ssh/id_ed25519': ",
        "Password for 'http://alice@127.0.0.1:8080': trailing",
    ] {
        assert_eq!(plan.prompt_kind(other), None, "{other}");
    }
    assert!(plan.question().contains("unencrypted http"));
}

/// The push the plan carries out reads none of the workspace's configuration: a workspace whose
/// `insteadOf` sends the host's URL to another server does not reach it; the host's remote gets the
/// commit.
#[test]
fn the_planned_push_reaches_the_hosts_remote_whatever_the_workspace_configures() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let real = GitHttpServer::start("alice", "pw-real");
    let decoy = GitHttpServer::start("alice", "pw-decoy");
    let s = setup(&real.url());
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
    let plan = plan_push(
        s.project.path(),
        &s.source(),
        &request(Some("origin"), &[], s.workspace_urls()),
        &policy(""),
    )
    .unwrap();
    let push_dir = s.project.root().join("push.git");
    plan.write_push_dir(&push_dir, &[ws.join(".git/objects")])
        .unwrap();
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
        .envs(plan.git_env(&push_dir))
        .env("GIT_ASKPASS", &askpass)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(real.head("main"), Some(s.second.clone()));
    assert_eq!(decoy.head("main"), None);
    assert!(
        decoy.served().is_empty(),
        "the decoy was reached: {:?}",
        decoy.served()
    );
}

#[test]
fn a_prompt_is_read_for_its_host_and_one_naming_none_is_refused() {
    use chock_workspace::read_prompt;
    let (kind, url) = read_prompt("Password for 'https://alice@Git.Example.org:8443': ").unwrap();
    assert_eq!(kind, PromptKind::Password);
    assert_eq!(url.host, "git.example.org");
    assert_eq!(url.port, 8443);
    assert_eq!(url.user.as_deref(), Some("alice"));
    // git's trailing space, or none, or a newline after it.
    for prompt in [
        "Username for 'http://127.0.0.1:8080':",
        "Username for 'http://127.0.0.1:8080': \n",
    ] {
        let (kind, url) = read_prompt(prompt).unwrap();
        assert_eq!(
            (kind, url.host.as_str()),
            (PromptKind::Username, "127.0.0.1")
        );
    }
    for prompt in [
        "",
        "Password: ",
        "Enter passphrase for key '/root/.ssh/id_ed25519': ",
        "Password for https://example.org: ",
        "Password for 'https://example.org",
        "Password for '': ",
        "Password for 'https://': ",
        "Password for 'https://a b/': ",
        "Password for 'https://alice:pw@example.org': ",
        "Password for 'ssh://git@example.org/x': ",
        "Password for 'file:///tmp/x': ",
        "Password for 'https://example.org:99999': ",
    ] {
        assert!(read_prompt(prompt).is_err(), "{prompt:?} was read");
    }
}
