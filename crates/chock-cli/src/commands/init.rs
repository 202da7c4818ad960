//! `chock init`: a first chock.toml for a project, from what the project and this host hold.
//!
//! It looks for each stack's marker files (Cargo.toml, package.json and its lockfile,
//! pyproject.toml or requirements.txt, go.mod, a Makefile, flake.nix), keeps the stacks whose
//! programs this host has, and writes a commented table naming their toolchains and the registry
//! rules a first session may want. It never overwrites a chock.toml: with one there, it prints
//! what it would have written and says so.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chock_policy::toolchains;

use crate::exit;
use crate::say::{say, say_err};

/// Arguments of `chock init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// One stack: its toolchain, the files that mark it, and the registry its installs fetch from.
struct Stack {
    toolchain: &'static str,
    markers: &'static [&'static str],
    /// `(action, what it is)`: the fetch a first install makes.
    registry: &'static [(&'static str, &'static str)],
}

const STACKS: &[Stack] = &[
    Stack {
        toolchain: "rust",
        markers: &["Cargo.toml", "Cargo.lock", "rust-toolchain.toml"],
        registry: &[("net.fetch.io.crates.*", "crates.io's index and crates")],
    },
    Stack {
        toolchain: "node",
        markers: &[
            "package.json",
            "package-lock.json",
            "yarn.lock",
            "pnpm-lock.yaml",
        ],
        registry: &[("net.fetch.org.npmjs.registry", "the npm registry")],
    },
    Stack {
        toolchain: "python",
        markers: &[
            "pyproject.toml",
            "requirements.txt",
            "setup.py",
            "Pipfile",
            "uv.lock",
        ],
        registry: &[
            ("net.fetch.org.pypi", "PyPI's index"),
            ("net.fetch.org.pythonhosted.files", "PyPI's files"),
        ],
    },
    Stack {
        toolchain: "go",
        markers: &["go.mod"],
        registry: &[
            ("net.fetch.org.golang.proxy", "the Go module proxy"),
            ("net.fetch.org.golang.sum", "the Go checksum database"),
        ],
    },
    Stack {
        toolchain: "c",
        markers: &[
            "Makefile",
            "makefile",
            "GNUmakefile",
            "CMakeLists.txt",
            "meson.build",
        ],
        registry: &[],
    },
];

/// What `chock init` found: each stack's present markers and whether this host has it.
struct Found<'a> {
    stack: &'a Stack,
    markers: Vec<&'static str>,
    on_host: bool,
}

/// The chock.toml for `project`, as text. `on_host` says whether a toolchain is installed here.
fn table(project: &Path, on_host: &dyn Fn(&str) -> bool) -> String {
    let found: Vec<Found<'_>> = STACKS
        .iter()
        .filter_map(|stack| {
            let markers: Vec<&'static str> = stack
                .markers
                .iter()
                .copied()
                .filter(|m| project.join(m).exists())
                .collect();
            (!markers.is_empty()).then(|| Found {
                stack,
                markers,
                on_host: on_host(stack.toolchain),
            })
        })
        .collect();
    let mut out = String::new();
    out.push_str(
        "# chock.toml: the policy of this project's Chock sessions (docs/policy.md).\n\
         # Read before any sandbox exists; nothing inside a session can change it.\n\
         # Written by `chock init`; `chock policy show` prints what it opens on this host.\n\n",
    );
    if found.is_empty() {
        out.push_str("# No Cargo.toml, package.json, pyproject.toml, go.mod or Makefile here.\n");
    }
    for f in &found {
        let profile = toolchains::profile(f.stack.toolchain);
        out.push_str(&format!(
            "# {}: {}{}\n",
            f.markers.join(", "),
            profile.map_or("", |p| p.what),
            if f.on_host {
                String::new()
            } else {
                format!(
                    " -- not installed on this host, so left out (add \"{}\" once it is)",
                    f.stack.toolchain
                )
            }
        ));
    }
    if project.join("flake.nix").exists() {
        out.push_str(
            "# flake.nix: a Nix dev shell is not a toolchain profile (docs/toolchains.md).\n",
        );
    }
    let names: Vec<String> = found
        .iter()
        .filter(|f| f.on_host)
        .map(|f| format!("\"{}\"", f.stack.toolchain))
        .collect();
    out.push_str(
        "\n[sandbox]\n\
         # Each toolchain shows its programs read-only and shares its download caches with the\n\
         # host (docs/toolchains.md). Credentials (~/.cargo/credentials.toml, ~/.npmrc,\n\
         # ~/.pypirc, ~/.netrc, ~/.config/gh, ...) are never shown.\n",
    );
    out.push_str(&format!("toolchains = [{}]\n", names.join(", ")));
    let registries: Vec<&(&str, &str)> = found
        .iter()
        .filter(|f| f.on_host)
        .flat_map(|f| f.stack.registry)
        .collect();
    if !registries.is_empty() {
        out.push_str(
            "\n# Installing dependencies fetches from a registry through Chock's broker, which asks\n\
             # you first. To let a session fetch from it without asking, uncomment its rule.\n",
        );
        for (action, what) in registries {
            out.push_str(&format!(
                "# [[rule]]\n# action = \"{action}\"\n# decision = \"allow\"\n# why = \"{what}\"\n"
            ));
        }
    }
    out
}

pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let project = match args.project {
        Some(p) => p,
        None => std::env::current_dir().context("the current directory")?,
    };
    if !project.is_dir() {
        return Err(exit::Exit::new(
            exit::BAD_INPUT,
            format!("--project {}: not a directory", project.display()),
        )
        .into());
    }
    let on_host = |name: &str| {
        toolchains::profile(name).is_some_and(|p| !toolchains::found_on_this_host(p).is_empty())
    };
    let text = table(&project, &on_host);
    let file = chock_policy::project_file_path(&project);
    if std::fs::symlink_metadata(&file).is_ok() {
        say_err!(
            "chock: {} exists and is left as it is; this is what `chock init` would write:",
            file.display()
        );
        // A line at a time: one `say!` shows a newline inside its text escaped.
        for line in text.lines() {
            say!("{line}");
        }
        return Ok(ExitCode::from(exit::FAILURE));
    }
    // `create_new`: a file made meanwhile is not overwritten either.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
        .with_context(|| format!("creating {}", file.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    say_err!("chock: wrote {}", file.display());
    Ok(ExitCode::SUCCESS)
}
