//! An approved `git push` through a real sandbox, the git shim and a real smart-HTTP server that
//! wants a password: the push goes to the remote of the **host's** configuration whatever the
//! workspace says, the password a person typed reaches the server and nowhere else (not the log,
//! not the workspace), a refused push reaches nothing, and what the call was given is gone after it.

mod remote_support;

use chock_decide::QuestionKind;
use chock_session::Session;
use chock_test_support::git_servers::GitHttpServer;
use remote_support::{PASSWORD, Person, all_text, http_project, http_remotes, open};

async fn run(s: &Session, person: &std::sync::Arc<Person>, script: &str) -> (i32, String, String) {
    remote_support::run(s, person, "p1", script).await
}

/// The workspace commits, then rewrites `origin`, points the real URL at the decoy with
/// `insteadOf` (in its configuration, and as `pushInsteadOf` in the environment git reads) and asks
/// git to store credentials, then pushes `origin main`.
fn script(real: &GitHttpServer, decoy: &GitHttpServer) -> String {
    format!(
        "echo new > new.txt && git add new.txt && git commit -qm two && \
         git remote set-url origin '{decoy}' && \
         git config 'url.{decoy}.insteadOf' '{real}' && \
         git config credential.helper store && \
         GIT_CONFIG_PARAMETERS=\"'url.{decoy}.pushinsteadof'='{real}'\" git push origin main; \
         echo \"push $?\"; \
         echo \"stored: $(cat \"$HOME/.git-credentials\" 2>/dev/null)\"; git rev-parse HEAD",
        decoy = decoy.url(),
        real = real.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_push_reaches_the_hosts_remote_with_the_typed_password_and_leaves_nothing() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(&real, &decoy, "git.push", "");
    let s = open(&f);
    let person = Person::new(true);
    let (code, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("push 0"), "{out}{err}");
    let commit = out.lines().last().unwrap().trim().to_string();
    // The workspace's `credential.helper store` was never run: nothing stored in the call's home.
    assert!(out.contains("stored: \n"), "{out}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );
    assert_eq!(real.head("main"), Some(commit.clone()), "{err}");
    assert!(
        decoy.served().is_empty(),
        "the decoy was reached: {:?}",
        decoy.served()
    );
    let asked = person.asked();
    let push = asked
        .iter()
        .find(|(_, action, _)| action.as_deref() == Some("git.push"))
        .expect("the push was asked about");
    assert!(push.2.contains(&real.url()), "{}", push.2);
    assert!(push.2.contains(&commit[..12]), "{}", push.2);
    assert!(push.2.contains("refs/heads/main"), "{}", push.2);
    assert!(
        push.2
            .contains(&format!("{}, which is not used", decoy.url())),
        "{}",
        push.2
    );
    let password_questions = asked
        .iter()
        .filter(|(k, _, _)| *k == QuestionKind::Question)
        .count();
    assert_eq!(password_questions, 1, "{asked:?}");
    // The transport helpers the push starts (`git remote-http`, `git send-pack`) are the act the
    // person approved: nobody is asked about them, and the harness's allow is logged.
    let approvals: Vec<String> = asked.iter().filter_map(|(_, a, _)| a.clone()).collect();
    assert!(
        approvals.iter().all(|a| a != "git.unknown"),
        "a helper was asked about: {asked:?}"
    );
    assert_eq!(
        approvals.iter().filter(|a| *a == "git.push").count(),
        1,
        "{asked:?}"
    );
    let session_dir = s.log().dir().to_path_buf();
    assert!(
        std::fs::read_to_string(session_dir.join("log.jsonl"))
            .unwrap()
            .contains(&format!(
                "a transport helper of the approved push to {}",
                real.url()
            )),
        "the helpers' decision is logged"
    );
    // The password is in neither the log nor the workspace (the session's directory holds both),
    // nor the project; and what the call was given is gone.
    assert!(
        !all_text(&session_dir).contains(PASSWORD),
        "the password was written"
    );
    assert!(!all_text(&f.project).contains(PASSWORD));
    let left = remote_support::left_in_git_host(&s);
    assert!(left.is_empty(), "left after the call: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_reaches_nothing_and_nobody_is_asked_for_a_password() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    // The workspace's own configuration changes are allowed, so the push itself is what is refused.
    let config = "[[rule]]\naction = \"git.config\"\ndecision = \"allow\"\n";
    let f = http_project(&real, &decoy, "git.push", config);
    let s = open(&f);
    let person = Person::new(false);
    let (_, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert!(out.contains("push 126"), "{out}{err}");
    assert_eq!(person.acts(), ["git.push"], "{out}{err}");
    assert!(real.served().is_empty(), "{:?}", real.served());
    assert!(decoy.served().is_empty(), "{:?}", decoy.served());
    assert_eq!(real.head("main"), None);
    let asked = person.asked();
    assert!(
        asked.iter().all(|(k, _, _)| *k != QuestionKind::Question),
        "{asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_denying_the_hosts_password_stops_an_approved_push_before_any_prompt() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(
        &real,
        &decoy,
        "git.push",
        "[[rule]]\naction = \"secret.password.1.0.0.127\"\ndecision = \"deny\"\n",
    );
    let s = open(&f);
    let person = Person::new(true);
    let (_, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert!(!out.contains("push 0"), "{out}{err}");
    assert!(
        err.contains("`secret.password.1.0.0.127` is denied by"),
        "{out}{err}"
    );
    assert_eq!(real.head("main"), None);
    assert!(!real.saw_the_password());
    let asked = person.asked();
    assert!(
        asked
            .iter()
            .any(|(_, action, _)| action.as_deref() == Some("git.push")),
        "{asked:?}"
    );
    assert!(
        asked.iter().all(|(k, _, _)| *k != QuestionKind::Question),
        "a password prompt was shown: {asked:?}"
    );
    let denied = chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .any(|e| {
            e.kind.to_string() == "decision"
                && e.data["action"] == "secret.password.1.0.0.127"
                && e.data["allowed"] == false
        });
    assert!(denied, "the deny is not in the log");
}
