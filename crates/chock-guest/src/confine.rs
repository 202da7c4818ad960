//! The command line of `chock-confine`, the host's Landlock step around a guest's monitor and
//! its file servers (docs/microvm.md, "The monitor's sandbox"), as both sides read it.
//!
//! chock-vm decides what each process may reach (its reviewed table, `chock-vm/src/confine`)
//! and writes it as arguments; `chock-confine` applies exactly that, then becomes the program.
//! The vocabulary is a handful of [`Grant`]s rather than raw access bits, so that a row of the
//! table says what it is for and the binary maps each grant onto the kernel's Landlock ABI.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What a rule lets the confined process do beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// Read and execute files, list directories: programs and their libraries.
    Exec,
    /// Read files and list directories.
    Read,
    /// Read, write and ioctl one device node.
    Device,
    /// Create, write and truncate regular files in a directory (a console log), and connect to
    /// the unix sockets in it (where the kernel's Landlock controls that, ABI 9).
    WriteFiles,
    /// Create unix sockets in a directory (a server's listening socket), nothing else there.
    MakeSockets,
    /// Everything beneath a directory: a read-write share, a server's own /run.
    ReadWrite,
}

impl Grant {
    /// Every grant.
    pub const ALL: [Grant; 6] = [
        Grant::Exec,
        Grant::Read,
        Grant::Device,
        Grant::WriteFiles,
        Grant::MakeSockets,
        Grant::ReadWrite,
    ];

    /// How the command line and the docs name it.
    pub fn name(self) -> &'static str {
        match self {
            Grant::Exec => "exec",
            Grant::Read => "read",
            Grant::Device => "device",
            Grant::WriteFiles => "write-files",
            Grant::MakeSockets => "make-sockets",
            Grant::ReadWrite => "read-write",
        }
    }

    fn parse(name: &str) -> Option<Grant> {
        Grant::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// One rule: a grant beneath a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What is allowed.
    pub grant: Grant,
    /// Where: a directory (and everything beneath it) or a file. Read in the new root, if any.
    pub path: PathBuf,
}

/// What `chock-confine` is asked to do: `[--root DIR] (--rule GRANT:PATH)... -- PROGRAM ARGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// A mount point to make the process's root before the rules' paths are opened: it is
    /// pivoted to and the old root detached, so that nothing above it is left (Landlock walks a
    /// path up to the mount namespace's root, and a chroot would leave the host's directories
    /// above it on that walk, with whatever a rule grants there).
    pub root: Option<PathBuf>,
    /// The rules; nothing else of the filesystem is reachable.
    pub rules: Vec<Rule>,
    /// The program to become, and its arguments.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl Invocation {
    /// The arguments that ask for this invocation.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out = Vec::new();
        if let Some(root) = &self.root {
            out.push("--root".into());
            out.push(root.clone().into_os_string());
        }
        for r in &self.rules {
            out.push("--rule".into());
            let mut spec = OsString::from(r.grant.name());
            spec.push(":");
            spec.push(&r.path);
            out.push(spec);
        }
        out.push("--".into());
        out.push(self.program.clone());
        out.extend(self.args.iter().cloned());
        out
    }

    /// Reads the arguments; anything malformed is an error naming it.
    pub fn parse(args: &[OsString]) -> Result<Invocation, String> {
        let mut it = args.iter();
        let mut root = None;
        let mut rules = Vec::new();
        loop {
            let Some(a) = it.next() else {
                return Err("no `--` and program to run".into());
            };
            match a.to_str() {
                Some("--") => break,
                Some("--root") => {
                    let dir = it.next().ok_or("`--root` without a directory")?;
                    root = Some(PathBuf::from(dir));
                }
                Some("--rule") => {
                    let spec = it.next().ok_or("`--rule` without GRANT:PATH")?;
                    rules.push(parse_rule(spec)?);
                }
                _ => return Err(format!("unknown argument `{}`", a.to_string_lossy())),
            }
        }
        let program = it.next().ok_or("no program after `--`")?.clone();
        Ok(Invocation {
            root,
            rules,
            program,
            args: it.cloned().collect(),
        })
    }
}

fn parse_rule(spec: &OsStr) -> Result<Rule, String> {
    let bytes = spec.as_bytes();
    let colon = bytes
        .iter()
        .position(|b| *b == b':')
        .ok_or_else(|| format!("`--rule {}`: expected GRANT:PATH", spec.to_string_lossy()))?;
    let name = std::str::from_utf8(&bytes[..colon]).unwrap_or_default();
    let grant = Grant::parse(name).ok_or_else(|| {
        format!(
            "`--rule {}`: unknown grant `{name}` (expected one of {})",
            spec.to_string_lossy(),
            Grant::ALL.map(Grant::name).join(", ")
        )
    })?;
    let path = PathBuf::from(OsStr::from_bytes(&bytes[colon + 1..]));
    if !path.is_absolute() {
        return Err(format!(
            "`--rule {}`: the path must be absolute",
            spec.to_string_lossy()
        ));
    }
    Ok(Rule { grant, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_reads_back_as_written() {
        let inv = Invocation {
            root: Some("/r".into()),
            rules: vec![
                Rule {
                    grant: Grant::Exec,
                    path: "/usr".into(),
                },
                Rule {
                    grant: Grant::WriteFiles,
                    path: "/vm:odd".into(),
                },
            ],
            program: "/usr/bin/qemu".into(),
            args: vec!["--".into(), "-m".into()],
        };
        assert_eq!(Invocation::parse(&inv.to_args()).unwrap(), inv);
    }

    #[test]
    fn bad_arguments_are_named() {
        let parse = |a: &[&str]| {
            Invocation::parse(&a.iter().map(OsString::from).collect::<Vec<_>>()).unwrap_err()
        };
        assert!(parse(&["--rule", "all:/x", "--", "p"]).contains("unknown grant `all`"));
        assert!(parse(&["--rule", "read:x", "--", "p"]).contains("absolute"));
        assert!(parse(&["--rule", "read:/x"]).contains("no `--`"));
        assert!(parse(&["--"]).contains("no program"));
        assert!(parse(&["--bogus", "--", "p"]).contains("`--bogus`"));
    }
}
