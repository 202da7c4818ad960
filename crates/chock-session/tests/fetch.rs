//! An approved `git fetch` and `git pull` through a real sandbox, the git shim and a real smart-HTTP
//! server that wants a password: the fetch reads from the remote of the **host's** configuration
//! whatever the workspace (its `origin`, `insteadOf`, `credential.helper`) or the agent's
//! environment (`GIT_CONFIG_PARAMETERS`) says, the password a person typed reaches that server and
//! nowhere else, a refused fetch sends nothing, and what the call was given ends with it.

mod remote_support;

use chock_test_support::git_servers::GitHttpServer;
use remote_support::{PASSWORD, Person, all_text, host_git, http_project, http_remotes, open, run};

/// The workspace's own configuration changes are allowed, so only the fetch is a question.
const CONFIG_ALLOWED: &str = "[[rule]]\naction = \"git.config\"\ndecision = \"allow\"\n";

/// The real server holding the project's commit and one more, which the workspace lacks: its id.
fn serve_one_more(real: &GitHttpServer, project: &std::path::Path) -> String {
    host_git(
        project,
        &["push", "-q", real.repo().to_str().unwrap(), "main"],
    );
    real.add_commit("from the server")
}

/// The workspace points `origin` at the decoy, rewrites the real URL to it in its configuration
/// and in the environment git reads (`GIT_CONFIG_PARAMETERS`), asks git to store credentials, then
/// runs `git <op> origin main`.
fn script(real: &GitHttpServer, decoy: &GitHttpServer, op: &str) -> String {
    format!(
        "git remote set-url origin '{decoy}' && \
         git config 'url.{decoy}.insteadOf' '{real}' && \
         git config credential.helper store && \
         GIT_CONFIG_PARAMETERS=\"'url.{decoy}.insteadof'='{real}'\" git {op} origin main; \
         echo \"{op} $?\"; \
         echo \"stored: $(cat \"$HOME/.git-credentials\" 2>/dev/null)\"; \
         git rev-parse -q --verify refs/remotes/origin/main; git rev-parse HEAD",
        decoy = decoy.url(),
        real = real.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_fetch_reads_the_hosts_remote_with_the_typed_password_and_leaves_nothing() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(&real, &decoy, "git.fetch", CONFIG_ALLOWED);
    let new = serve_one_more(&real, &f.project);
    let s = open(&f);
    let person = Person::new(true);
    let (code, out, err) = run(&s, &person, "f1", &script(&real, &decoy, "fetch")).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("fetch 0"), "{out}{err}");
    // The remote's new commit is in the workspace, on the host's tracking ref for `main`.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[lines.len() - 2], new, "{out}{err}");
    assert!(out.contains("stored: \n"), "a credential was stored: {out}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );
    assert!(real.saw_the_password(), "{:?}", real.served());
    assert!(
        decoy.served().is_empty(),
        "the decoy was reached: {:?}",
        decoy.served()
    );
    // One question about the fetch, naming the host's URL, the refs and what was not used; one
    // password prompt; the helpers the fetch starts are not asked about.
    let asked = person.asked();
    let fetch: Vec<_> = asked
        .iter()
        .filter(|(_, a, _)| a.as_deref() == Some("git.fetch"))
        .collect();
    assert_eq!(fetch.len(), 1, "{asked:?}");
    let question = &fetch[0].2;
    assert!(question.contains(&real.url()), "{question}");
    assert!(
        question.contains("+refs/heads/main:refs/remotes/origin/main"),
        "{question}"
    );
    assert!(
        question.contains(&format!("{}, which is not used", decoy.url())),
        "{question}"
    );
    assert_eq!(person.prompts(), 1, "{asked:?}");
    assert!(
        person.acts().iter().all(|a| a != "git.unknown"),
        "{asked:?}"
    );
    // The log records the URL and refs, and the helpers' allow; the password is in neither the
    // session's directory (log and workspace) nor the project; what the call was given is gone.
    let session_dir = s.log().dir().to_path_buf();
    let log = std::fs::read_to_string(session_dir.join("log.jsonl")).unwrap();
    assert!(log.contains(&real.url()) && log.contains("refs/remotes/origin/main"));
    assert!(log.contains(&format!(
        "a transport helper of the approved fetch from {}",
        real.url()
    )));
    assert!(
        !all_text(&session_dir).contains(PASSWORD),
        "the password was written"
    );
    assert!(!all_text(&f.project).contains(PASSWORD));
    assert!(remote_support::left_in_git_host(&s).is_empty());
    // The call's approval ended with it: a later call's askpass gets nothing, and nobody is asked.
    let later = Person::new(true);
    let prompt = format!("Password for '{}': ", real.url().replace("/repo.git", ""));
    let (_, out, err) = run(
        &s,
        &later,
        "f2",
        &format!("CHOCK_GIT_ASKPASS=1 git '{prompt}'; echo \"askpass $?\""),
    )
    .await;
    assert!(out.contains("askpass 1"), "{out}{err}");
    assert!(
        err.contains("no push or fetch of this call was approved"),
        "{err}"
    );
    assert!(later.asked().is_empty(), "{:?}", later.asked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_fetch_sends_nothing_and_nobody_is_asked_for_a_password() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(&real, &decoy, "git.fetch", CONFIG_ALLOWED);
    serve_one_more(&real, &f.project);
    let s = open(&f);
    let person = Person::new(false);
    let (_, out, err) = run(&s, &person, "f1", &script(&real, &decoy, "fetch")).await;
    assert!(out.contains("fetch 126"), "{out}{err}");
    assert!(real.served().is_empty(), "{:?}", real.served());
    assert!(decoy.served().is_empty(), "{:?}", decoy.served());
    assert_eq!(person.prompts(), 0, "{:?}", person.asked());
    assert_eq!(person.acts(), ["git.fetch"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_pull_brings_the_remotes_commit_onto_the_branch() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(&real, &decoy, "git.pull", CONFIG_ALLOWED);
    let new = serve_one_more(&real, &f.project);
    let s = open(&f);
    let person = Person::new(true);
    // Pulled from another directory with `-C`: the merge runs in the repository pulled into.
    let script = format!(
        "here=$(pwd) && {} && cat fetched.txt",
        script(&real, &decoy, "pull")
            .replace("GIT_CONFIG_PARAMETERS", "cd / && GIT_CONFIG_PARAMETERS")
            .replace("git pull origin", "git -C \"$here\" pull origin")
            .replace("echo \"pull $?\";", "echo \"pull $?\"; cd \"$here\";")
    );
    let (code, out, err) = run(&s, &person, "p1", &script).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("pull 0"), "{out}{err}");
    // `HEAD` is the remote's commit (a fast-forward), and its file is in the working tree.
    assert!(out.contains(&format!("{new}\n{new}\n")), "{out}{err}");
    assert!(out.ends_with("from the server"), "{out}{err}");
    assert!(decoy.served().is_empty(), "{:?}", decoy.served());
    // The pull was asked about once, naming its merge; its merge is a local act of its own.
    let question = person
        .asked()
        .into_iter()
        .find(|(_, a, _)| a.as_deref() == Some("git.pull"))
        .expect("the pull was asked about")
        .2;
    assert!(
        question.contains("then `git merge FETCH_HEAD`"),
        "{question}"
    );
    assert_eq!(person.acts(), ["git.pull"], "{:?}", person.asked());
    let merged = chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .any(|e| e.kind.to_string() == "decision" && e.data["action"] == "git.merge");
    assert!(merged, "the merge was not decided as its own act");
    assert!(!all_text(s.log().dir()).contains(PASSWORD));
}

/// A fetch the host's configuration gives no credential to runs as written, with none: a remote the
/// agent added (its URL the decoy's) gets no password and asks nobody for one, and a fetch from a
/// repository inside the call works as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_from_a_remote_the_host_does_not_name_gets_no_credential() {
    let Some((_turn, real, decoy)) = http_remotes().await else {
        return;
    };
    let f = http_project(&real, &decoy, "git.fetch", CONFIG_ALLOWED);
    let s = open(&f);
    let person = Person::new(true);
    let script = format!(
        "git remote add mine '{decoy}' && git fetch mine main; echo \"mine $?\"; \
         git init -q -b main /tmp/other && \
         git -C /tmp/other -c user.name=t -c user.email=t@t commit -q --allow-empty -m local && \
         git fetch /tmp/other main; echo \"local $?\"; git rev-parse FETCH_HEAD",
        decoy = decoy.url()
    );
    let (_, out, err) = run(&s, &person, "n1", &script).await;
    assert!(out.contains("local 0"), "{out}{err}");
    assert!(!out.contains("mine 0"), "{out}{err}");
    assert!(!decoy.saw_the_password(), "{:?}", decoy.served());
    assert!(real.served().is_empty(), "{:?}", real.served());
    assert_eq!(person.prompts(), 0, "{:?}", person.asked());
    // Each was asked as written, naming what the workspace said it reaches.
    let asked = person.asked();
    let fetches: Vec<&String> = asked
        .iter()
        .filter(|(_, a, _)| a.as_deref() == Some("git.fetch"))
        .map(|(_, _, text)| text)
        .collect();
    assert_eq!(fetches.len(), 2, "{asked:?}");
    assert!(
        fetches[0].contains(&format!("(reaches {})", decoy.url())),
        "{}",
        fetches[0]
    );
    assert!(
        fetches[1].contains("(reaches /tmp/other)"),
        "{}",
        fetches[1]
    );
}
