//! `chock memory list|show|edit|rm`: the person's view of the notes the agent keeps between
//! sessions of a project (docs/memory.md; the library is `chock_tools::memory`).

use std::path::PathBuf;
use std::process::ExitCode;

use chock_tools::memory::{MemoryError, MemoryStore};

use crate::exit::{self, Exit};
use crate::say::say;

/// `chock memory …`.
#[derive(Debug, clap::Subcommand)]
pub enum MemoryCommand {
    /// List the project's notes: name and size.
    List {
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Print one note (control characters spelled out).
    Show {
        /// The note's name.
        name: String,
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Edit one note in $EDITOR (else $VISUAL, else vi); it is kept only if it still fits.
    Edit {
        /// The note's name.
        name: String,
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Remove one note.
    Rm {
        /// The note's name.
        name: String,
        #[command(flatten)]
        project: ProjectArg,
    },
}

/// Which project's notes.
#[derive(Debug, clap::Args)]
pub struct ProjectArg {
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
}

fn store(project: &ProjectArg) -> anyhow::Result<MemoryStore> {
    let dir = match &project.project {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    MemoryStore::for_project(&dir).map_err(bad)
}

/// A note that is not there, a bad name or an oversized note is bad input (exit 2).
fn bad(e: MemoryError) -> anyhow::Error {
    match e {
        MemoryError::Io { op, .. } if op != "resolve the project" => anyhow::Error::new(e),
        other => Exit::new(exit::BAD_INPUT, other.to_string()).into(),
    }
}

pub fn run(cmd: MemoryCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        MemoryCommand::List { project } => {
            let store = store(&project)?;
            let notes = store.list().map_err(bad)?;
            if notes.is_empty() {
                say!("no notes for project {}", store.project().display());
            } else {
                say!("notes for project {}:", store.project().display());
                for note in notes {
                    say!("{:<32} {:>6} bytes", note.name, note.bytes);
                }
            }
        }
        MemoryCommand::Show { name, project } => {
            let text = store(&project)?.read(&name).map_err(bad)?;
            // A note's lines are lines; everything else the escaper names is escaped.
            crate::say::block(&text);
            if !text.ends_with('\n') {
                say!();
            }
        }
        MemoryCommand::Edit { name, project } => {
            let store = store(&project)?;
            let file = store.file(&name).map_err(bad)?;
            // The editor works on a private copy: the note is replaced (whole, checked) only when
            // it exits successfully, so a half-saved or oversized note never lands.
            let copy = Copy(
                std::env::temp_dir().join(format!("chock-note-{name}-{}.md", std::process::id())),
            );
            {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(copy.path())?
                    .write_all(&std::fs::read(&file)?)?;
            }
            let editor = ["EDITOR", "VISUAL"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|e| !e.trim().is_empty()))
                .unwrap_or_else(|| "vi".into());
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{editor} \"$1\""))
                .arg("sh")
                .arg(copy.path())
                .status()
                .map_err(|e| Exit::new(exit::FAILURE, format!("cannot run `{editor}`: {e}")))?;
            if !status.success() {
                return Err(Exit::new(
                    exit::FAILURE,
                    format!("`{editor}` failed ({status}); note `{name}` is unchanged"),
                )
                .into());
            }
            let text = String::from_utf8(std::fs::read(copy.path())?).map_err(|_| {
                Exit::new(
                    exit::BAD_INPUT,
                    format!("the edited note `{name}` is not UTF-8 text; it is unchanged"),
                )
            })?;
            let written = store.write(&name, &text).map_err(bad)?;
            say!("note `{name}` saved ({} bytes)", written.bytes);
        }
        MemoryCommand::Rm { name, project } => {
            store(&project)?.remove(&name).map_err(bad)?;
            say!("removed note `{name}`");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The editor's private copy of a note, removed when done.
struct Copy(PathBuf);

impl Copy {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
