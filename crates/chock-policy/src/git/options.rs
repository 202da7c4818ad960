//! git's global options (those before the command, `man git`) and the environment variables that
//! change what git runs or where it looks.

use super::Location;

/// What the global options leave.
pub enum Globals {
    /// An option that only prints (`--version`, `--help`, `--exec-path` alone, `--html-path`, …).
    Info,
    /// The command and its arguments.
    Command(Vec<String>),
}

/// Options that take no value and change nothing the classifier reads.
const FLAGS: &[&str] = &[
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
];

/// Options that print something and run no command.
const INFO: &[&str] = &[
    "-v",
    "--version",
    "-h",
    "--help",
    "--html-path",
    "--man-path",
    "--info-path",
    "--exec-path",
];

/// Reads the global options of `args` into `location` and `config` (each `-c` and `--config-env`, in
/// order). An option this build does not know is refused, so no option can hide from it.
pub fn parse_globals(
    args: &[String],
    env: &[(String, String)],
    location: &mut Location,
    config: &mut Vec<(String, Option<String>)>,
) -> Result<Globals, String> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let arg = arg.as_str();
        if !arg.starts_with('-') {
            return Ok(Globals::Command(args[i..].to_vec()));
        }
        i += 1;
        let mut value = |name: &str| -> Result<String, String> {
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| format!("`{name}` needs a value"))?;
            i += 1;
            Ok(v)
        };
        if FLAGS.contains(&arg) {
            continue;
        }
        if INFO.contains(&arg) || arg.starts_with("--list-cmds=") {
            return Ok(Globals::Info);
        }
        if let Some(path) = arg.strip_prefix("--exec-path=") {
            return Err(format!(
                "`--exec-path={path}` swaps the programs git runs for its commands"
            ));
        }
        match arg {
            "-C" => {
                let path = value("-C")?;
                // An empty `-C ""` leaves the directory as it is.
                if !path.is_empty() {
                    location.chdir.push(path);
                }
            }
            "-c" => {
                let spec = value("-c")?;
                config.push(match spec.split_once('=') {
                    Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                    None => (spec, None),
                });
            }
            "--bare" => {
                if location.git_dir.is_none() {
                    location.git_dir = Some(".".to_owned());
                }
            }
            "--git-dir" => location.git_dir = Some(value(arg)?),
            "--work-tree" => location.work_tree = Some(value(arg)?),
            "--namespace" => location.namespace = Some(value(arg)?),
            "--super-prefix" => {
                value(arg)?;
            }
            _ => {
                if let Some(spec) = arg.strip_prefix("--config-env=") {
                    // The environment variable's name follows the last `=`.
                    let Some((key, var)) = spec.rsplit_once('=') else {
                        return Err(format!("`{arg}`: expected --config-env=<name>=<envvar>"));
                    };
                    let Some((_, v)) = env.iter().rev().find(|(k, _)| k == var) else {
                        return Err(format!("`{arg}`: the environment has no `{var}`"));
                    };
                    config.push((key.to_owned(), Some(v.clone())));
                } else if let Some(p) = arg.strip_prefix("--git-dir=") {
                    location.git_dir = Some(p.to_owned());
                } else if let Some(p) = arg.strip_prefix("--work-tree=") {
                    location.work_tree = Some(p.to_owned());
                } else if let Some(p) = arg.strip_prefix("--namespace=") {
                    location.namespace = Some(p.to_owned());
                } else if arg.starts_with("--super-prefix=") {
                } else {
                    return Err(format!(
                        "`{arg}` is not a git global option this build reads"
                    ));
                }
            }
        }
    }
    Ok(Globals::Info)
}

/// Where the environment points git.
pub fn env_location(env: &[(String, String)]) -> Location {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    Location {
        chdir: Vec::new(),
        git_dir: get("GIT_DIR"),
        work_tree: get("GIT_WORK_TREE"),
        common_dir: get("GIT_COMMON_DIR"),
        namespace: get("GIT_NAMESPACE"),
    }
}

/// Environment variables that make git run a program of the caller's choosing, or read its programs
/// or its configuration from elsewhere. A pager or editor set to nothing (`cat`, `true`) is allowed.
const PROGRAM_ENV: &[&str] = &[
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_ALLOW_PROTOCOL",
    "GIT_TEMPLATE_DIR",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
];

/// Refuses an environment that swaps git's programs or installs one.
pub fn check_env(env: &[(String, String)]) -> Result<(), String> {
    for (name, value) in env {
        if !PROGRAM_ENV.contains(&name.as_str()) {
            continue;
        }
        let harmless = match name.as_str() {
            "GIT_PAGER" | "GIT_EDITOR" | "GIT_SEQUENCE_EDITOR" => {
                matches!(value.trim(), "" | "cat" | "true" | ":")
            }
            // No global or system file at all: the caller's configuration simply lacks that layer.
            "GIT_CONFIG_GLOBAL" | "GIT_CONFIG_SYSTEM" => value == "/dev/null",
            _ => false,
        };
        if !harmless {
            return Err(format!(
                "the environment sets {name}=`{value}`, which changes the programs or configuration git uses"
            ));
        }
    }
    Ok(())
}
