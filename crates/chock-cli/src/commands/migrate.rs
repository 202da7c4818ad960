//! `chock migrate --from HARNESS`: another harness's permission rules and MCP servers as
//! chock.toml rows (the library is `chock_migrate`; docs/migrate.md). Offline and one-shot: it
//! reads files, prints, and writes one new file; no session, model, network or sandbox.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chock_migrate::{Harness, Input, Options};

use crate::exit;
use crate::say::{say, say_err};

/// Arguments of `chock migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The harness whose files are read: claude-code, codex, opencode, zed or oh-my-pi.
    #[arg(long, value_name = "HARNESS")]
    pub from: String,
    /// Read this file instead of the harness's documented locations (repeatable).
    #[arg(long, value_name = "PATH")]
    pub file: Vec<PathBuf>,
    /// The project (default: the current directory): its files are read, its chock.toml written.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Carry more than `ask` for one kind of act. Only `net.fetch`: the hosts a source itself
    /// named as allowed for fetching become `allow`.
    #[arg(long, value_name = "ACTION")]
    pub permission: Vec<String>,
    /// Bring the harness's notes (CLAUDE.md, AGENTS.md, .rules) in as this project's memory notes
    /// instead, as data; chock.toml is not touched.
    #[arg(long, conflicts_with = "sessions")]
    pub memory: bool,
    /// Import the harness's transcripts of this project (Claude Code only), each as a new session
    /// holding `session.start` and `session.imported`, the transcript copied beside its log.
    #[arg(long)]
    pub sessions: bool,
}

fn bad(message: String) -> anyhow::Error {
    exit::Exit::new(exit::BAD_INPUT, message).into()
}

/// Runs `chock migrate`.
pub fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let harness = Harness::parse(&args.from).map_err(|e| bad(format!("--from: {e}")))?;
    let mut options = Options::default();
    for p in &args.permission {
        match p.as_str() {
            "net.fetch" => options.carry_net_fetch = true,
            other => {
                return Err(bad(format!(
                    "--permission {other}: only net.fetch may be carried as allow"
                )));
            }
        }
    }
    let project = match args.project {
        Some(p) => p,
        None => std::env::current_dir().context("the current directory")?,
    };
    let paths = if args.file.is_empty() {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| bad("HOME is not set: give --file".into()))?;
        let candidates = if args.sessions {
            transcripts_of(harness, &home, &project)?
        } else if args.memory {
            harness.memory_files(&home, &project)
        } else {
            harness.default_files(&home, &project)
        };
        let found: Vec<PathBuf> = candidates.iter().filter(|p| p.is_file()).cloned().collect();
        if found.is_empty() {
            let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
            return Err(bad(format!(
                "no {harness} file found; looked at {}",
                looked.join(", ")
            )));
        }
        found
    } else {
        args.file
    };
    let mut inputs = Vec::new();
    for path in paths {
        let bytes = std::fs::read(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        inputs.push(Input { path, bytes });
    }
    if args.memory {
        return memory(harness, &inputs, &project);
    }
    if args.sessions {
        return sessions(harness, &inputs, &project);
    }
    options.project = project.canonicalize().ok();
    let found = chock_migrate::read(harness, &inputs, &options).map_err(|e| bad(e.to_string()))?;
    let date = time::OffsetDateTime::now_utc().date().to_string();
    let text = chock_migrate::render(&found, harness.name(), env!("CARGO_PKG_VERSION"), &date);
    // A line at a time: one `say!` shows a newline inside its text escaped.
    for line in text.lines() {
        say!("{line}");
    }
    say!("");
    for line in chock_migrate::report(&found).lines() {
        say!("{line}");
    }
    let file = chock_policy::project_file_path(&project);
    if std::fs::symlink_metadata(&file).is_ok() {
        say_err!(
            "chock: {} exists and is left as it is; the rows above were not written",
            file.display()
        );
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

/// `--memory`: each file as one or more notes; a note name already there is left as it is.
fn memory(harness: Harness, inputs: &[Input], project: &Path) -> anyhow::Result<ExitCode> {
    let notes = chock_migrate::notes(harness, inputs, chock_tools::memory::MAX_NOTE_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    let store =
        chock_tools::memory::MemoryStore::for_project(project).map_err(|e| bad(e.to_string()))?;
    say!("carried:");
    for input in inputs {
        say!(
            "  {}  sha256:{}",
            input.path.display(),
            chock_migrate::sha256_hex(&input.bytes)
        );
    }
    let mut left = 0;
    for note in notes {
        if store.file(&note.name).is_ok() {
            say!("  note `{}` exists and is left as it is", note.name);
            left += 1;
            continue;
        }
        let written = store.write(&note.name, &note.text)?;
        say!("  note `{}`: {} bytes", note.name, written.bytes);
    }
    Ok(ExitCode::from(if left == 0 {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

/// The `*.jsonl` files of the harness's transcript directory for `project`, sorted.
fn transcripts_of(harness: Harness, home: &Path, project: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let project = project
        .canonicalize()
        .map_err(|e| bad(format!("--project {}: {e}", project.display())))?;
    let dir = harness.transcript_dir(home, &project).ok_or_else(|| {
        bad(format!(
            "--sessions: this build imports only claude-code transcripts, not {harness}'s"
        ))
    })?;
    let mut found: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect(),
        Err(_) => Vec::new(),
    };
    found.sort();
    if found.is_empty() {
        return Err(bad(format!(
            "no {harness} transcript found in {}",
            dir.display()
        )));
    }
    Ok(found)
}

/// `--sessions`: every transcript is checked first; then each becomes a new session whose log
/// holds `session.start` and `session.imported` only, its copy written before the event names it.
fn sessions(harness: Harness, inputs: &[Input], project: &Path) -> anyhow::Result<ExitCode> {
    let mut checked = Vec::new();
    for input in inputs {
        let t = chock_migrate::transcript(harness, input).map_err(|e| bad(e.to_string()))?;
        checked.push((input, t));
    }
    let project = project
        .canonicalize()
        .map_err(|e| bad(format!("--project {}: {e}", project.display())))?;
    let root = chock_log::sessions_root()?;
    for (input, t) in checked {
        let log = chock_log::Log::create(
            &root,
            chock_log::SessionHeader {
                project: Some(project.clone()),
                command: Some("migrate".into()),
                ..Default::default()
            },
        )?;
        let copy = log.dir().join(&t.file_name);
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&copy)
                .with_context(|| format!("creating {}", copy.display()))?;
            f.write_all(&input.bytes)
                .and_then(|()| f.sync_all())
                .with_context(|| format!("writing {}", copy.display()))?;
        }
        log.record(
            None,
            chock_protocol::log::SessionImported {
                from: format!("{harness} {}", input.path.display()),
                events: t.lines,
                transcript: Some(t.file_name.clone()),
                sha256: Some(t.sha256.clone()),
            },
        )?;
        say!(
            "session {}: {}  sha256:{}, {} lines, copied as {}",
            log.id(),
            input.path.display(),
            t.sha256,
            t.lines,
            t.file_name
        );
    }
    Ok(ExitCode::SUCCESS)
}
