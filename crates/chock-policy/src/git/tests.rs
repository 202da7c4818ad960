//! One test per way git lets an invocation say one thing and do another.

use super::*;
use crate::catalogue;

fn inv(args: &str) -> Invocation {
    Invocation {
        args: args.split_whitespace().map(str::to_owned).collect(),
        ..Invocation::default()
    }
}

fn with_config(mut i: Invocation, config: &[(&str, &str)]) -> Invocation {
    i.config = config
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
        .collect();
    i
}

fn with_env(mut i: Invocation, env: &[(&str, &str)]) -> Invocation {
    i.env = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    i
}

fn act(i: &Invocation) -> String {
    classify(i).action.as_str().to_owned()
}

fn unknown_because(i: &Invocation, needle: &str) {
    let c = classify(i);
    assert_eq!(c.action.as_str(), "git.unknown", "{i:?}");
    let reason = c.reason.unwrap_or_default();
    assert!(reason.contains(needle), "{reason}");
}

const ORIGIN: &[(&str, &str)] = &[("remote.origin.url", "https://example.org/project.git")];

#[test]
fn plain_subcommands_are_their_own_act() {
    for (args, expected) in [
        ("status", "git.status"),
        ("commit -m x", "git.commit"),
        ("cherry-pick abc", "git.cherry_pick"),
        ("apply fix.patch", "git.apply"),
        ("format-patch -1", "git.format_patch"),
        ("rev-parse HEAD", "git.inspect"),
        ("pack-objects --revs --stdout --thin -q", "git.inspect"),
        ("pack-objects --revs out", "git.unknown"),
        ("branch", "git.branch.list"),
        ("branch -a", "git.branch.list"),
        ("branch topic", "git.branch.create"),
        ("branch -D topic", "git.branch.delete"),
        ("branch --delete topic", "git.branch.delete"),
        ("branch -m old new", "git.branch.rename"),
        ("branch -u origin/main", "git.config"),
        ("config --get user.name", "git.config.read"),
        ("config user.name", "git.config.read"),
        ("config user.name someone", "git.config"),
        ("config core.hooksPath /tmp/h", "git.config"),
        ("remote -v", "git.remote.list"),
        ("remote add up https://example.org/x", "git.remote.add"),
        (
            "remote set-url origin https://example.org/y",
            "git.remote.set_url",
        ),
        ("remote update", "git.fetch"),
        ("remote show origin", "git.fetch"),
        ("remote show -n origin", "git.remote.list"),
        ("remote add -f up https://example.org/x", "git.fetch"),
        ("fetch", "git.fetch"),
        ("pull --rebase", "git.pull"),
        ("ls-remote origin", "git.ls_remote"),
        ("clone https://example.org/x", "git.clone"),
        ("submodule update --init", "git.submodule"),
        ("--version", "git.help"),
        ("", "git.help"),
        ("--exec-path", "git.help"),
        ("gc", "git.maintenance"),
        ("maintenance run --auto", "git.maintenance"),
        ("frobnicate", "git.unknown"),
    ] {
        assert_eq!(act(&inv(args)), expected, "git {args}");
    }
}

#[test]
fn every_act_the_classifier_gives_is_a_catalogue_name() {
    for sub in [
        "status",
        "log",
        "diff",
        "show",
        "blame",
        "grep",
        "inspect",
        "help",
        "init",
        "add",
        "rm",
        "mv",
        "restore",
        "commit",
        "apply",
        "am",
        "format_patch",
        "checkout",
        "switch",
        "branch.list",
        "branch.create",
        "branch.rename",
        "branch.delete",
        "tag",
        "merge",
        "rebase",
        "cherry_pick",
        "revert",
        "reset",
        "stash",
        "clean",
        "config.read",
        "config",
        "remote.list",
        "remote.add",
        "remote.set_url",
        "remote.rename",
        "remote.remove",
        "fetch",
        "pull",
        "clone",
        "ls_remote",
        "submodule",
        "push",
        "unknown",
    ] {
        let action = Action::git(sub).unwrap();
        assert!(catalogue::entry_for(&action).is_some(), "{action}");
    }
    // The source holds each act as a literal: every literal it can give is one of those above.
    for file in [include_str!("sub.rs"), include_str!("mod.rs")] {
        for line in file.lines() {
            for (n, piece) in line.split('"').enumerate() {
                let looks_like_act = n % 2 == 1
                    && !piece.is_empty()
                    && piece
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_');
                if looks_like_act && let Ok(action) = Action::git(piece) {
                    let defined = catalogue::entry_for(&action).is_some();
                    let is_word = !piece.contains('.') && !piece.contains('_');
                    assert!(defined || is_word, "`{piece}` in the classifier is no act");
                }
            }
        }
    }
}

#[test]
fn a_command_line_alias_is_read_as_git_reads_it() {
    assert_eq!(act(&inv("-c alias.st=push st")), "git.push");
}

#[test]
fn an_alias_from_the_repository_configuration_is_expanded() {
    let i = with_config(inv("ci -m x"), &[("alias.ci", "commit")]);
    let c = classify(&i);
    assert_eq!(c.action.as_str(), "git.commit");
    assert_eq!(c.command.as_deref(), Some("commit"));
    assert_eq!(c.args, ["-m", "x"]);
}

#[test]
fn an_alias_name_is_case_insensitive_like_every_config_name() {
    assert_eq!(act(&inv("-c Alias.ST=push st")), "git.push");
}

#[test]
fn an_alias_chain_is_followed_and_a_loop_is_refused() {
    let i = with_config(inv("a"), &[("alias.a", "b"), ("alias.b", "push")]);
    assert_eq!(act(&i), "git.push");
    let looped = with_config(inv("a"), &[("alias.a", "b"), ("alias.b", "a")]);
    unknown_because(&looped, "expands into itself");
}

#[test]
fn an_alias_cannot_hide_a_git_command() {
    // git ignores an alias named like one of its commands.
    assert_eq!(act(&inv("-c alias.status=push status")), "git.status");
}

#[test]
fn a_shell_alias_is_unknown() {
    unknown_because(&inv("-c alias.x=!git${IFS}push x"), "runs a shell command");
}

#[test]
fn an_alias_may_carry_global_options_but_not_move_the_repository() {
    let i = with_config(inv("p"), &[("alias.p", "-c alias.q=push q")]);
    assert_eq!(act(&i), "git.push");
    let moved = with_config(inv("p"), &[("alias.p", "-C /elsewhere push")]);
    unknown_because(&moved, "changes which repository");
}

#[test]
fn an_alias_is_split_with_quotes_as_git_splits_it() {
    let i = with_config(inv("save"), &[("alias.save", "commit -m 'two words'")]);
    let c = classify(&i);
    assert_eq!(c.action.as_str(), "git.commit");
    assert_eq!(c.args, ["-m", "two words"]);
}

#[test]
fn git_config_parameters_in_the_environment_are_read() {
    let i = with_env(inv("ci"), &[("GIT_CONFIG_PARAMETERS", "'alias.ci'='push'")]);
    assert_eq!(act(&i), "git.push");
    let old = with_env(inv("ci"), &[("GIT_CONFIG_PARAMETERS", "'alias.ci=push'")]);
    assert_eq!(act(&old), "git.push");
    let quoted = with_env(
        inv("say"),
        &[(
            "GIT_CONFIG_PARAMETERS",
            r"'alias.say'='commit -m '\''hi'\'''",
        )],
    );
    assert_eq!(classify(&quoted).args, ["-m", "hi"]);
    let bad = with_env(inv("ci"), &[("GIT_CONFIG_PARAMETERS", "alias.ci=push")]);
    unknown_because(&bad, "GIT_CONFIG_PARAMETERS");
}

#[test]
fn git_config_count_pairs_are_read_and_a_missing_pair_is_refused() {
    let env = [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "alias.ci"),
        ("GIT_CONFIG_VALUE_0", "push"),
    ];
    assert_eq!(act(&with_env(inv("ci"), &env)), "git.push");
    unknown_because(
        &with_env(inv("ci"), &[("GIT_CONFIG_COUNT", "2")]),
        "GIT_CONFIG_KEY_0",
    );
}

#[test]
fn the_command_line_wins_over_the_environment_and_the_files() {
    let i = with_env(
        with_config(inv("-c alias.x=fetch x"), &[("alias.x", "status")]),
        &[("GIT_CONFIG_PARAMETERS", "'alias.x'='commit'")],
    );
    assert_eq!(act(&i), "git.fetch");
}

#[test]
fn config_env_takes_the_value_from_the_named_variable() {
    let i = with_env(inv("--config-env=alias.x=V x"), &[("V", "push")]);
    assert_eq!(act(&i), "git.push");
    unknown_because(&inv("--config-env=alias.x=MISSING x"), "MISSING");
}

#[test]
fn a_swapped_exec_path_is_unknown() {
    unknown_because(&inv("--exec-path=/tmp/x status"), "--exec-path");
    unknown_because(
        &with_env(inv("status"), &[("GIT_EXEC_PATH", "/tmp/x")]),
        "GIT_EXEC_PATH",
    );
}

#[test]
fn a_program_installed_by_the_invocation_is_unknown() {
    unknown_because(&inv("-c core.sshCommand=evil push"), "core.sshcommand");
    unknown_because(&inv("-c core.pager=evil log"), "core.pager");
    unknown_because(&inv("-c diff.x.textconv=evil diff"), "diff.x.textconv");
    unknown_because(
        &inv("-c protocol.ext.allow=always fetch"),
        "protocol.ext.allow",
    );
    unknown_because(
        &with_env(inv("push"), &[("GIT_SSH_COMMAND", "evil")]),
        "GIT_SSH_COMMAND",
    );
    unknown_because(&inv("push --receive-pack=evil origin"), "--receive-pack");
    unknown_because(&inv("push --rec=evil origin"), "--rec");
    unknown_because(&inv("clone -u evil https://example.org/x"), "-u");
    unknown_because(&inv("rebase -x evil HEAD~2"), "--exec");
    // A pager or editor that runs nothing is not a program.
    assert_eq!(act(&inv("-c core.pager=cat log")), "git.log");
    assert_eq!(
        act(&with_env(inv("log"), &[("GIT_PAGER", "cat")])),
        "git.log"
    );
}

#[test]
fn a_program_in_the_repository_s_own_configuration_does_not_reclassify() {
    let i = with_config(inv("push"), &[ORIGIN[0], ("core.sshcommand", "ssh -v")]);
    let c = classify(&i);
    assert_eq!(c.action.as_str(), "git.push");
    assert_eq!(c.target.unwrap().ssh_command.as_deref(), Some("ssh -v"));
}

#[test]
fn global_options_are_read_and_do_not_change_the_act() {
    let c = classify(&inv(
        "-C sub --no-pager -p --git-dir=.git --work-tree . push",
    ));
    assert_eq!(c.action.as_str(), "git.push");
    assert_eq!(c.location.chdir, ["sub"]);
    assert_eq!(c.location.git_dir.as_deref(), Some(".git"));
    assert_eq!(c.location.work_tree.as_deref(), Some("."));
    assert_eq!(act(&inv("--namespace=x --bare fetch")), "git.fetch");
    unknown_because(&inv("--frob push"), "--frob");
    unknown_because(&inv("-C"), "needs a value");
}

#[test]
fn locate_names_the_repository_before_its_configuration_is_read() {
    let env = [("GIT_DIR".to_owned(), "/w/.git".to_owned())];
    let args: Vec<String> = ["-C", "a", "-C", "b", "status"].map(String::from).to_vec();
    let location = locate(&args, &env);
    assert_eq!(location.chdir, ["a", "b"]);
    assert_eq!(location.git_dir.as_deref(), Some("/w/.git"));
}

#[test]
fn a_program_on_path_named_like_an_alias_wins_as_it_does_in_git() {
    let mut i = with_config(inv("st"), &[("alias.st", "status")]);
    i.path_commands = vec!["st".to_owned()];
    unknown_because(&i, "git-st");
}

#[test]
fn a_push_reports_the_url_git_will_use() {
    let c = classify(&with_config(inv("push origin main"), ORIGIN));
    let t = c.target.unwrap();
    assert_eq!(t.remote.as_deref(), Some("origin"));
    assert_eq!(t.urls, ["https://example.org/project.git"]);
    assert_eq!(t.refspecs, ["main"]);
}

#[test]
fn a_pushurl_is_what_a_push_reaches() {
    let config = [
        ORIGIN[0],
        ("remote.origin.pushurl", "ssh://elsewhere.example/x"),
    ];
    let t = classify(&with_config(inv("push"), &config)).target.unwrap();
    assert_eq!(t.urls, ["ssh://elsewhere.example/x"]);
    let fetched = classify(&with_config(inv("fetch"), &config))
        .target
        .unwrap();
    assert_eq!(fetched.urls, ["https://example.org/project.git"]);
}

#[test]
fn instead_of_rewrites_the_url_longest_prefix_first() {
    let config = [
        ORIGIN[0],
        (
            "url.https://evil.example/.insteadOf",
            "https://example.org/",
        ),
        (
            "url.https://worse.example/.insteadOf",
            "https://example.org/pro",
        ),
    ];
    let t = classify(&with_config(inv("fetch"), &config))
        .target
        .unwrap();
    assert_eq!(t.urls, ["https://worse.example/ject.git"]);
}

#[test]
fn push_instead_of_applies_to_a_push_only() {
    let config = [
        ORIGIN[0],
        (
            "url.ssh://push.example/.pushInsteadOf",
            "https://example.org/",
        ),
    ];
    let pushed = classify(&with_config(inv("push"), &config)).target.unwrap();
    assert_eq!(pushed.urls, ["ssh://push.example/project.git"]);
    let fetched = classify(&with_config(inv("fetch"), &config))
        .target
        .unwrap();
    assert_eq!(fetched.urls, ["https://example.org/project.git"]);
}

#[test]
fn an_invocation_cannot_rewrite_the_url_unseen() {
    let i = with_config(
        inv("-c remote.origin.url=https://evil.example/x push"),
        ORIGIN,
    );
    // remote.<name>.url is multi-valued: git pushes to every URL, so the host is shown both.
    let t = classify(&i).target.unwrap();
    assert_eq!(
        t.urls,
        ["https://example.org/project.git", "https://evil.example/x"]
    );
}

#[test]
fn the_default_remote_follows_the_branch_configuration() {
    let config = [
        ORIGIN[0],
        ("remote.up.url", "https://up.example/x"),
        ("remote.fork.url", "https://fork.example/x"),
        ("branch.main.remote", "up"),
        ("branch.main.pushRemote", "fork"),
    ];
    let mut i = with_config(inv("push"), &config);
    i.branch = Some("main".to_owned());
    assert_eq!(
        classify(&i).target.unwrap().urls,
        ["https://fork.example/x"]
    );
    i.args = vec!["fetch".to_owned()];
    assert_eq!(classify(&i).target.unwrap().urls, ["https://up.example/x"]);
}

#[test]
fn option_values_are_not_mistaken_for_the_remote() {
    let config = [ORIGIN[0], ("remote.up.url", "https://up.example/x")];
    let t = classify(&with_config(inv("push -o ci.skip up main"), &config))
        .target
        .unwrap();
    assert_eq!(t.remote.as_deref(), Some("up"));
    let t = classify(&with_config(inv("push --repo up main"), &config))
        .target
        .unwrap();
    assert_eq!(t.remote.as_deref(), Some("up"));
    let t = classify(&with_config(inv("fetch --depth 1 up"), &config))
        .target
        .unwrap();
    assert_eq!(t.remote.as_deref(), Some("up"));
    unknown_because(&with_config(inv("fetch --dep 1 up"), &config), "abbreviate");
}

#[test]
fn a_url_argument_is_its_own_target() {
    let t = classify(&inv("push https://other.example/x main"))
        .target
        .unwrap();
    assert_eq!(t.remote, None);
    assert_eq!(t.urls, ["https://other.example/x"]);
}

#[test]
fn the_shipped_defaults_allow_local_acts_and_ask_reaching_ones() {
    use crate::Decision;
    let defaults = crate::shipped_defaults().unwrap();
    let decide = |args: &str| {
        let a = classify(&with_config(inv(args), ORIGIN)).action;
        defaults.most_specific(&a).map(|r| r.decision)
    };
    assert_eq!(decide("commit -m x"), Some(Decision::Allow));
    assert_eq!(decide("branch -D x"), Some(Decision::Allow));
    assert_eq!(decide("push"), Some(Decision::Ask));
    assert_eq!(decide("-c alias.x=push x"), Some(Decision::Ask));
    assert_eq!(decide("--exec-path=/x status"), Some(Decision::Ask));
}
