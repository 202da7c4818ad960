//! The `chock` binary: `chock exec` runs here, in a binary that links only what it needs, and
//! every other command is handed to `chock-full`, the binary beside it that holds the whole tree
//! (lib.rs says why). The hand-over is an `execve` with the same arguments (its `argv[0]` too, so
//! usage and errors read as they would from one binary), environment and open files: nothing of
//! `chock` is left by the time the command runs. It executes the very file it checked (opened
//! once, executed through its descriptor), and only one of its own build (build_id.rs).

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::say::say_err;
use crate::{commands, exit};

/// The binary that holds every command, installed beside `chock` by the same `cargo install`.
pub const FULL_BINARY: &str = "chock-full";

/// `chock exec …`, parsed without the rest of the tree: building clap's whole tree of commands
/// costs about half a millisecond, which is a tenth of what `chock exec -- true` spends outside its
/// sandbox (docs/sandbox.md). The same arguments, help and errors as `chock exec` in the tree.
#[derive(Debug, Parser)]
#[command(name = "chock-exec", bin_name = "chock exec", about = commands::exec::ABOUT)]
struct ExecCli {
    #[command(flatten)]
    args: commands::exec::ExecArgs,
}

/// `chock exec`, given its arguments from `exec` on.
pub(crate) fn exec(args: &[String]) -> ExitCode {
    match ExecCli::try_parse_from(args) {
        Ok(exec) => exit::finish(commands::exec::run(exec.args)),
        Err(err) => exit::clap_error(&err),
    }
}

/// `chock`'s `main`.
pub fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("chock"));
    let rest: Vec<OsString> = args.collect();
    if rest.first().is_some_and(|a| a == "exec") {
        let rest: Vec<String> = rest
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return exec(&rest);
    }
    let full = match full_binary() {
        Ok(path) => path,
        Err(e) => {
            say_err!("chock: cannot find this binary's own path to start {FULL_BINARY}: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let cannot_start = |err: std::io::Error| {
        say_err!(
            "chock: cannot start {}: {err}; every command but `exec` is in {FULL_BINARY}, which \
             `cargo install --path crates/chock-cli` installs beside `chock`",
            full.display()
        );
        ExitCode::from(exit::FAILURE)
    };
    // Checked and executed as one open file: what is checked is what runs.
    let file = match std::fs::File::open(&full) {
        Ok(file) => file,
        Err(err) => return cannot_start(err),
    };
    if let Err(why) = crate::build_id::check_full(&file) {
        say_err!(
            "chock: refusing to run {}: {why}; `chock` hands every command but `exec` to the \
             {FULL_BINARY} built with it. Reinstall both together: `cargo install --path \
             crates/chock-cli`",
            full.display()
        );
        return ExitCode::from(exit::FAILURE);
    }
    // Only returns when the exec failed.
    let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    let err = std::process::Command::new(by_fd)
        .arg0(arg0)
        .args(rest)
        .exec();
    cannot_start(err)
}

/// `chock-full` in the directory of this binary's real path (`/proc/self/exe`, so a symlink to
/// `chock` elsewhere still finds it).
fn full_binary() -> std::io::Result<PathBuf> {
    Ok(std::env::current_exe()?.with_file_name(FULL_BINARY))
}
