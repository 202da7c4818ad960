//! The commands: which act each git command is, reading only the options that change it.

use super::Invocation;
use super::config::Config;
use super::remote::{self, Direction, Target};

/// Every command git 2.47 runs before it would look for an alias of the same name: its builtins
/// (`git --list-cmds=builtins`) and the programs it ships beside them (`git --list-cmds=main`). An
/// alias named like one of these is ignored by git (`git help config`, alias.*), and so here.
const GIT_COMMANDS: &str = "add am annotate apply archive bisect blame branch bugreport bundle cat-file \
check-attr check-ignore check-mailmap check-ref-format checkout checkout--worker checkout-index cherry \
cherry-pick clean clone column commit commit-graph commit-tree config count-objects credential \
credential-cache credential-cache--daemon credential-store describe diagnose diff diff-files diff-index \
diff-tree difftool fast-export fast-import fetch fetch-pack fmt-merge-msg for-each-ref for-each-repo \
format-patch fsck fsck-objects fsmonitor--daemon gc get-tar-commit-id grep hash-object help hook \
index-pack init init-db interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance \
merge merge-base merge-file merge-index merge-ours merge-recursive merge-recursive-ours \
merge-recursive-theirs merge-subtree merge-tree mktag mktree multi-pack-index mv name-rev notes \
pack-objects pack-redundant pack-refs patch-id pickaxe prune prune-packed pull push range-diff read-tree \
rebase receive-pack reflog refs remote remote-ext remote-fd repack replace replay rerere reset restore \
rev-list rev-parse revert rm send-pack shortlog show show-branch show-index show-ref sparse-checkout \
stage stash status stripspace submodule--helper switch symbolic-ref tag unpack-file unpack-objects \
update-index update-ref update-server-info upload-archive upload-archive--writer upload-pack var \
verify-commit verify-pack verify-tag version whatchanged worktree write-tree \
archimport cvsexportcommit cvsimport cvsserver daemon difftool--helper filter-branch http-backend \
http-fetch http-push imap-send instaweb merge-octopus merge-one-file merge-resolve mergetool p4 \
quiltimport remote-ftp remote-ftps remote-http remote-https request-pull send-email sh-i18n--envsubst \
shell submodule svn web--browse";

/// Is `name` a command git runs itself (so no alias can stand in for it)?
pub fn is_git_command(name: &str) -> bool {
    GIT_COMMANDS.split_whitespace().any(|c| c == name)
}

/// Commands that only read the workspace repository, each its own act.
const READS: &[(&str, &str)] = &[
    ("status", "status"),
    ("log", "log"),
    ("whatchanged", "log"),
    ("diff", "diff"),
    ("show", "show"),
    ("blame", "blame"),
    ("annotate", "blame"),
    ("grep", "grep"),
    ("help", "help"),
    ("version", "help"),
];

/// Read-only plumbing: `git.inspect`.
const INSPECT: &[&str] = &[
    "rev-parse",
    "ls-files",
    "ls-tree",
    "cat-file",
    "describe",
    "rev-list",
    "for-each-ref",
    "show-ref",
    "merge-base",
    "shortlog",
    "name-rev",
    "count-objects",
    "check-ignore",
    "check-attr",
    "diff-tree",
    "diff-files",
    "diff-index",
    "show-branch",
    "cherry",
    "range-diff",
];

/// Commands that change only the workspace repository, whose act is their own name.
const LOCAL: &[(&str, &str)] = &[
    ("init", "init"),
    ("add", "add"),
    ("rm", "rm"),
    ("mv", "mv"),
    ("restore", "restore"),
    ("commit", "commit"),
    ("apply", "apply"),
    ("am", "am"),
    ("format-patch", "format_patch"),
    ("checkout", "checkout"),
    ("switch", "switch"),
    ("tag", "tag"),
    ("merge", "merge"),
    ("cherry-pick", "cherry_pick"),
    ("revert", "revert"),
    ("reset", "reset"),
    ("stash", "stash"),
    ("clean", "clean"),
    ("submodule", "submodule"),
    // What git starts by itself after a commit (`maintenance run --auto`) and its older form.
    ("maintenance", "maintenance"),
    ("gc", "maintenance"),
];

/// The act `name args` is, and where it reaches if it reaches another host.
pub fn classify_command(
    name: &str,
    args: &[String],
    config: &Config,
    inv: &Invocation,
) -> Result<(String, Option<Target>), String> {
    if let Some((_, act)) = READS.iter().find(|(c, _)| *c == name) {
        return Ok(((*act).to_owned(), None));
    }
    // A pack written to standard output only reads the repository (what a push runs); one written
    // to files is not an inspection.
    let packs_to_stdout = name == "pack-objects" && args.iter().any(|a| a == "--stdout");
    if INSPECT.contains(&name) || packs_to_stdout {
        return Ok(("inspect".to_owned(), None));
    }
    if let Some((_, act)) = LOCAL.iter().find(|(c, _)| *c == name) {
        return Ok(((*act).to_owned(), None));
    }
    let branch = inv.branch.as_deref();
    match name {
        "rebase" => {
            let exec = args.iter().any(|a| {
                a == "-x" || a.starts_with("--exec") || (short_cluster(a) && a.contains('x'))
            });
            if exec {
                return Err("`git rebase --exec` runs a command after each commit".to_owned());
            }
            Ok(("rebase".to_owned(), None))
        }
        "branch" => Ok((branch_act(args).to_owned(), None)),
        "config" => Ok((config_act(args).to_owned(), None)),
        "remote" => remote_act(args, config),
        "push" => network("push", args, config, branch, &PUSH, Direction::Push),
        "fetch" => network("fetch", args, config, branch, &FETCH, Direction::Read),
        "pull" => network("pull", args, config, branch, &PULL, Direction::Read),
        "ls-remote" => network(
            "ls_remote",
            args,
            config,
            branch,
            &LS_REMOTE,
            Direction::Read,
        ),
        "clone" => {
            let (positional, _, clone_config) = scan(args, &CLONE)?;
            let mut checked = Config::default();
            checked.push_cli(&clone_config).map_err(String::from)?;
            checked.check_programs()?;
            let url = positional
                .first()
                .ok_or("`git clone` names no repository")?;
            let target = remote::resolve(config, url, Vec::new(), Direction::Read);
            Ok(("clone".to_owned(), Some(target)))
        }
        other => Err(format!(
            "`git {other}` is not a command this build classifies"
        )),
    }
}

fn short_cluster(arg: &str) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 1
}

fn branch_act(args: &[String]) -> &'static str {
    let has = |longs: &[&str], shorts: &str| {
        args.iter().any(|a| {
            longs
                .iter()
                .any(|l| a == l || a.starts_with(&format!("{l}=")))
                || (short_cluster(a) && a[1..].chars().any(|c| shorts.contains(c)))
        })
    };
    if has(&["--delete"], "dD") {
        "branch.delete"
    } else if has(&["--move", "--copy"], "mMcC") {
        "branch.rename"
    } else if has(
        &[
            "--set-upstream-to",
            "--unset-upstream",
            "--edit-description",
        ],
        "u",
    ) {
        "config"
    } else if has(
        &[
            "--list",
            "--all",
            "--remotes",
            "--show-current",
            "--contains",
            "--no-contains",
            "--merged",
            "--no-merged",
            "--points-at",
            "--format",
            "--sort",
            "--column",
            "--verbose",
        ],
        "larv",
    ) || !args.iter().any(|a| !a.starts_with('-'))
    {
        "branch.list"
    } else {
        "branch.create"
    }
}

fn config_act(args: &[String]) -> &'static str {
    const READ: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
    ];
    const WRITE: &[&str] = &[
        "--unset",
        "--unset-all",
        "--add",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "-e",
        "--edit",
    ];
    const VALUED: &[&str] = &["-f", "--file", "--blob", "--type", "--default", "--comment"];
    if args.iter().any(|a| WRITE.contains(&a.as_str())) {
        return "config";
    }
    if args.iter().any(|a| READ.contains(&a.as_str())) {
        return "config.read";
    }
    let mut positional = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if VALUED.contains(&a.as_str()) {
            skip = true;
        } else if !a.starts_with('-') {
            positional.push(a.as_str());
        }
    }
    match positional.as_slice() {
        ["list" | "get", ..] => "config.read",
        [_] => "config.read",
        _ => "config",
    }
}

fn remote_act(args: &[String], config: &Config) -> Result<(String, Option<Target>), String> {
    let positional: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let reach =
        |name: Option<&&str>| name.map(|n| remote::resolve(config, n, Vec::new(), Direction::Read));
    let act = match positional.first().copied() {
        None | Some("get-url") => "remote.list",
        Some("add") if flag("-f") || flag("--fetch") => {
            let url = positional.get(2).ok_or("`git remote add` names no URL")?;
            let target = remote::resolve(config, url, Vec::new(), Direction::Read);
            return Ok(("fetch".to_owned(), Some(target)));
        }
        Some("add") => "remote.add",
        Some("set-url") => "remote.set_url",
        Some("rename") => "remote.rename",
        Some("remove" | "rm") => "remote.remove",
        Some("show") if flag("-n") => "remote.list",
        Some("show" | "prune" | "update") => {
            return Ok(("fetch".to_owned(), reach(positional.get(1))));
        }
        Some("set-head") if flag("-a") || flag("--auto") => {
            return Ok(("fetch".to_owned(), reach(positional.get(1))));
        }
        Some("set-head" | "set-branches") => "config",
        Some(other) => return Err(format!("`git remote {other}` is not classified")),
    };
    Ok((act.to_owned(), None))
}

/// The options of a command that reaches a remote: which take a value, and which name a program git
/// would run.
struct NetOptions {
    values: &'static [&'static str],
    shorts: &'static str,
    programs: &'static [&'static str],
    short_programs: &'static str,
}

const PUSH: NetOptions = NetOptions {
    values: &["--push-option", "--repo", "--receive-pack", "--exec"],
    shorts: "o",
    programs: &["--receive-pack", "--exec"],
    short_programs: "",
};
const FETCH: NetOptions = NetOptions {
    values: &[
        "--depth",
        "--deepen",
        "--shallow-since",
        "--shallow-exclude",
        "--negotiation-tip",
        "--refmap",
        "--jobs",
        "--submodule-prefix",
        "--recurse-submodules-default",
        "--upload-pack",
        "--server-option",
        "--filter",
    ],
    shorts: "oj",
    programs: &["--upload-pack"],
    short_programs: "",
};
const PULL: NetOptions = NetOptions {
    values: &[
        "--depth",
        "--deepen",
        "--shallow-since",
        "--shallow-exclude",
        "--negotiation-tip",
        "--refmap",
        "--jobs",
        "--upload-pack",
        "--server-option",
        "--cleanup",
        "--strategy",
        "--strategy-option",
    ],
    shorts: "ojsX",
    programs: &["--upload-pack"],
    short_programs: "",
};
const LS_REMOTE: NetOptions = NetOptions {
    values: &["--upload-pack", "--sort", "--server-option"],
    shorts: "o",
    programs: &["--upload-pack"],
    short_programs: "",
};
const CLONE: NetOptions = NetOptions {
    values: &[
        "--reference",
        "--reference-if-able",
        "--server-option",
        "--filter",
        "--origin",
        "--branch",
        "--upload-pack",
        "--template",
        "--config",
        "--depth",
        "--shallow-since",
        "--shallow-exclude",
        "--separate-git-dir",
        "--jobs",
        "--bundle-uri",
    ],
    shorts: "obucj",
    programs: &["--upload-pack"],
    short_programs: "u",
};

/// The positional arguments, the `--repo` value, and each `-c`/`--config` (clone) of `args`. git
/// accepts a unique prefix of a long option, so a prefix of a program option is refused, and a prefix
/// of a value option too (its value could not be told from the remote).
type Scanned = (Vec<String>, Option<String>, Vec<(String, Option<String>)>);

fn scan(args: &[String], opts: &NetOptions) -> Result<Scanned, String> {
    let mut positional = Vec::new();
    let mut repo = None;
    let mut config = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            positional.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v.to_owned())),
                None => (arg.clone(), None),
            };
            let exact = opts.values.contains(&name.as_str());
            let abbreviates = |list: &[&str]| {
                list.iter()
                    .any(|o| o.len() > name.len() && o.starts_with(name.as_str()) && name.len() > 2)
            };
            if opts.programs.contains(&name.as_str()) || abbreviates(opts.programs) {
                return Err(format!("`{name}` names a program git would run"));
            }
            if !exact && abbreviates(opts.values) {
                return Err(format!(
                    "`{name}` may abbreviate an option that takes a value"
                ));
            }
            if exact {
                let value = match attached {
                    Some(v) => v,
                    None => {
                        let v = args
                            .get(i)
                            .cloned()
                            .ok_or(format!("`{name}` needs a value"))?;
                        i += 1;
                        v
                    }
                };
                match name.as_str() {
                    "--repo" => repo = Some(value),
                    "--config" => config.push(split_kv(&value)),
                    _ => {}
                }
            }
            continue;
        }
        if short_cluster(arg) {
            for (at, c) in arg[1..].char_indices() {
                if opts.short_programs.contains(c) {
                    return Err(format!("`-{c}` names a program git would run"));
                }
                if opts.shorts.contains(c) {
                    let rest = &arg[1 + at + c.len_utf8()..];
                    let value = if rest.is_empty() {
                        let v = args
                            .get(i)
                            .cloned()
                            .ok_or(format!("`-{c}` needs a value"))?;
                        i += 1;
                        v
                    } else {
                        rest.to_owned()
                    };
                    if c == 'c' {
                        config.push(split_kv(&value));
                    }
                    break;
                }
            }
            continue;
        }
        positional.push(arg.clone());
    }
    Ok((positional, repo, config))
}

fn split_kv(spec: &str) -> (String, Option<String>) {
    match spec.split_once('=') {
        Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
        None => (spec.to_owned(), None),
    }
}

fn network(
    act: &str,
    args: &[String],
    config: &Config,
    branch: Option<&str>,
    opts: &NetOptions,
    direction: Direction,
) -> Result<(String, Option<Target>), String> {
    let (mut positional, repo, _) = scan(args, opts)?;
    let name = match repo {
        Some(repo) => repo,
        None if positional.is_empty() => remote::default_remote(config, branch, direction),
        None => positional.remove(0),
    };
    let target = remote::resolve(config, &name, positional, direction);
    Ok((act.to_owned(), Some(target)))
}
