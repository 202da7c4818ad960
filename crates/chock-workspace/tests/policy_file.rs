//! A session that writes Chock's own policy file. With no `chock.toml` in the project nothing is
//! bound at that path inside the sandbox, so a command can create one (granting itself `exec.*`,
//! `net.connect.*`, write paths) and the next session would obey it. These tests make the session
//! write such files — at the top, in a subdirectory, by rename, by deletion — and check that the
//! diff marks them and that no apply or adopt writes them unless the person names the path.

mod common;

use chock_workspace::{
    ApplyOptions, RenderMode, Selection, Sensitive, WorkspaceError, render, render_content,
    sensitive_path,
};
use common::{Env, in_overlay};

/// What a hostile session would write: a table that lets every program and every host through.
const WIDENING: &str = "[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n\n[[rule]]\naction = \"net.connect.*\"\ndecision = \"allow\"\n";

fn unnamed(err: WorkspaceError) -> Vec<String> {
    match err {
        WorkspaceError::ConfiguresChock { paths, .. } => paths,
        other => panic!("expected a policy-file refusal, got {other}"),
    }
}

fn including(paths: &[&str]) -> ApplyOptions {
    ApplyOptions {
        expect: None,
        include_policy: paths.iter().map(|p| p.to_string()).collect(),
    }
}

#[test]
fn a_policy_file_the_session_created_is_marked_refused_and_lands_only_when_named() {
    let env = Env::git(&[("a.txt", "one\n")]);
    let ws = env.workspace("pol");
    in_overlay(
        &ws,
        &format!(
            "printf '{}' > chock.toml && echo two >> a.txt",
            WIDENING.replace('\n', "\\n")
        ),
    );

    // The diff says which change configures Chock, and shows it loudly.
    let diff = ws.diff().unwrap();
    let policy = diff
        .file("chock.toml")
        .expect("the new policy file is in the diff");
    assert_eq!(policy.sensitive(), Some(Sensitive::PolicyFile));
    assert_eq!(diff.file("a.txt").unwrap().sensitive(), None);
    let patch = render(&diff, RenderMode::Patch, false);
    let banner = patch
        .lines()
        .skip_while(|l| !l.starts_with(&format!("file {} A chock.toml", policy.id)))
        .nth(1)
        .unwrap_or_default();
    assert!(
        banner.starts_with("!! chock.toml: this changes Chock's own policy for the next session")
            && banner.contains("--include-policy chock.toml"),
        "{patch}"
    );
    let stat = render(&diff, RenderMode::Stat, false);
    assert!(
        stat.contains("chock.toml | 7 +++++++  !! Chock's own policy"),
        "{stat}"
    );

    // An apply of everything is refused by name before anything is checked or written.
    let err = ws.plan_apply(&Selection::default()).unwrap_err();
    assert!(
        err.to_string().contains("--include-policy chock.toml"),
        "{err}"
    );
    assert_eq!(unnamed(err), ["chock.toml"]);
    assert!(!env.exists("chock.toml"));
    assert_eq!(env.read("a.txt"), "one\n");

    // The rest of the session can still be taken.
    let rest = Selection {
        files: vec!["a.txt".into()],
        hunks: vec![],
    };
    assert!(ws.plan_apply(&rest).unwrap().sensitive_ops().is_empty());

    // Named, and pinned to the reviewed digest, it lands; the plan says which write needs the
    // person's separate yes, and what it will hold.
    let reviewed = diff.digest(&Selection::default()).unwrap();
    let options = ApplyOptions {
        expect: Some(reviewed.clone()),
        ..including(&["chock.toml"])
    };
    let plan = ws.plan_apply_with(&Selection::default(), &options).unwrap();
    assert_eq!(plan.digest(), Some(reviewed.as_str()));
    let sensitive = plan.sensitive_ops();
    assert_eq!(sensitive.len(), 1);
    assert_eq!(sensitive[0].0.path, "chock.toml");
    assert!(
        render_content(sensitive[0].0.after.as_ref()).contains("    | action = \"exec.*\"\n"),
        "the whole new content is shown"
    );
    plan.commit().unwrap();
    assert_eq!(env.read("chock.toml"), WIDENING);
    assert_eq!(env.read("a.txt"), "one\ntwo\n");
}

#[test]
fn the_digest_pin_still_refuses_a_policy_file_added_after_the_review() {
    let env = Env::git(&[("a.txt", "one\n")]);
    let ws = env.workspace("late");
    in_overlay(&ws, "echo two >> a.txt");
    let reviewed = ws.diff().unwrap().digest(&Selection::default()).unwrap();
    in_overlay(&ws, "echo '[[rule]]' > chock.toml");
    let options = ApplyOptions {
        expect: Some(reviewed),
        ..including(&["chock.toml"])
    };
    let err = ws
        .plan_apply_with(&Selection::default(), &options)
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::DigestMismatch { .. }),
        "{err}"
    );
    assert!(!env.exists("chock.toml"));
}

#[test]
fn every_change_to_a_policy_file_at_any_depth_must_be_named() {
    let env = Env::git(&[
        (
            "chock.toml",
            "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n",
        ),
        (
            "sub/chock.toml",
            "[[rule]]\naction = \"exec.*\"\ndecision = \"deny\"\n",
        ),
        (
            "deep/x/chock.toml",
            "[[rule]]\naction = \"git.push\"\ndecision = \"deny\"\n",
        ),
        (
            "notes.txt",
            "[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n",
        ),
        ("keep.txt", "keep\n"),
    ]);
    let ws = env.workspace("deep");
    // The overlay as a file tool or a command sees it (the sandbox binds the top file read-only;
    // these writes stand for what reaches the upper directory by any route): a deletion of the top
    // file, an edit below, a whole directory removed, a rename onto a policy name in a new
    // directory, and a case-folded name.
    in_overlay(
        &ws,
        "rm chock.toml && echo '# more' >> sub/chock.toml && rm -r deep && mkdir other \
         && mv notes.txt other/chock.toml && echo '[[rule]]' > CHOCK.toml && echo k2 > keep.txt",
    );
    let err = ws.plan_apply(&Selection::default()).unwrap_err();
    assert_eq!(
        unnamed(err),
        [
            "CHOCK.toml",
            "chock.toml",
            "deep/x/chock.toml",
            "other/chock.toml",
            "sub/chock.toml"
        ]
    );
    // A rename away from a policy file changes the policy too: named by the path it leaves.
    let renamed = ws.diff().unwrap();
    let moved = renamed.file("other/chock.toml").unwrap();
    assert_eq!(moved.old_path.as_deref(), Some("notes.txt"));

    // Naming some is not naming all; a name that is no policy change is bad input.
    let err = ws
        .plan_apply_with(&Selection::default(), &including(&["sub/chock.toml"]))
        .unwrap_err();
    assert_eq!(
        unnamed(err),
        [
            "CHOCK.toml",
            "chock.toml",
            "deep/x/chock.toml",
            "other/chock.toml"
        ]
    );
    let err = ws
        .plan_apply_with(&Selection::default(), &including(&["keep.txt"]))
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::UnknownSelection { ref name, .. } if name == "keep.txt"),
        "{err}"
    );
    // Selecting one policy change needs only that one named.
    let one = Selection {
        files: vec!["sub/chock.toml".into()],
        hunks: vec![],
    };
    assert_eq!(
        unnamed(ws.plan_apply(&one).unwrap_err()),
        ["sub/chock.toml"]
    );
    ws.plan_apply_with(&one, &including(&["sub/chock.toml"]))
        .unwrap()
        .commit()
        .unwrap();
    assert!(env.read("sub/chock.toml").ends_with("# more\n"));
    assert!(env.exists("chock.toml") && env.exists("deep/x/chock.toml"));
    assert_eq!(env.read("keep.txt"), "keep\n");
}

#[test]
fn adopt_refuses_a_policy_file_unless_named() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let ws = env.workspace("adopt");
    in_overlay(&ws, "echo '[[rule]]' > chock.toml && echo b > a.txt");
    assert_eq!(unnamed(ws.plan_adopt().unwrap_err()), ["chock.toml"]);
    let plan = ws.plan_adopt_with(&["chock.toml".to_string()]).unwrap();
    plan.commit().unwrap();
    assert_eq!(
        env.read(".chock-adopted/adopt/files/chock.toml"),
        "[[rule]]\n"
    );
}

#[test]
fn only_the_policy_files_name_configures_chock() {
    assert_eq!(sensitive_path("chock.toml"), Some(Sensitive::PolicyFile));
    assert_eq!(
        sensitive_path("a/b/Chock.Toml"),
        Some(Sensitive::PolicyFile)
    );
    assert_eq!(sensitive_path("a/chock.toml/"), Some(Sensitive::PolicyFile));
    for other in [
        "chock.toml.bak",
        "xchock.toml",
        "chock.toml/inner",
        "docs/chock.md",
        "",
    ] {
        assert_eq!(sensitive_path(other), None, "{other}");
    }
    assert_eq!(chock_policy::PROJECT_FILE, "chock.toml");
}
