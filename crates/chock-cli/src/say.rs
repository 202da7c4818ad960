//! Every byte the command line puts on its stdout or stderr goes through here, and through the
//! one escaper ([`chock_protocol::text`]) on its way.
//!
//! Untrusted is the default: [`say!`] and [`say_err!`] escape the whole line they
//! format (its arguments, since the format string is Chock's own), as [`text::Layout::Line`]: a title
//! the model set, a tool's description from a plugin, a tool's name from an MCP server, a path in
//! the workspace or a line of a log cannot drive the terminal (OSC 52 writes the clipboard), move
//! the cursor to rewrite what was shown, reorder itself with a bidi control or forge a line. Text
//! whose own lines are meant to be read as lines (the model's words, a note) goes through
//! [`block`]. The only ways around the escaper are named here, each saying why: [`json`] (a
//! script's JSON, every escaped character written as a JSON escape instead), [`rendered`] (a diff
//! `chock_workspace::render` escaped itself, with Chock's own colours) and [`passthrough`] (what a
//! command the person runs with `chock exec` writes, byte for byte). A test
//! (`tests/print_paths.rs`) fails when any other file of the command line prints.
//!
//! A closed stdout (`chock sessions verify S | head -2`) ends the process quietly with status 0,
//! as ripgrep does, from here: no command panics on a broken pipe. SIGPIPE stays ignored (Rust's
//! default), so a pipe to an MCP server or a plugin that has gone is an error, not a kill; the
//! sandbox resets every signal to its default for a confined command.

use std::fmt;
use std::io::{self, Write};

use chock_protocol::text;

use crate::exit;

/// One line on stdout, every argument escaped ([`text::Layout::Line`]). `say!()` is an empty line.
macro_rules! say {
    () => {
        $crate::say::out(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::say::out(format_args!($($arg)*))
    };
}

/// One line on stderr, every argument escaped ([`text::Layout::Line`]). `say_err!()` is an empty line.
macro_rules! say_err {
    () => {
        $crate::say::err(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::say::err(format_args!($($arg)*))
    };
}

pub(crate) use {say, say_err};

/// Writes `line` escaped and a newline on stdout.
pub(crate) fn out(line: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    stdout_done(to(&mut out, line).and_then(|()| out.flush()));
}

/// Writes `line` escaped and a newline on stderr. A stderr that cannot be written to has nobody
/// to tell: the error is dropped.
pub(crate) fn err(line: fmt::Arguments<'_>) {
    let _ = to(&mut io::stderr().lock(), line);
}

/// Writes `text` and a newline on stderr with its own lines kept and everything else escaped
/// ([`text::Layout::Block`]): an error, whose hint may be a line of its own.
pub(crate) fn err_block(text: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{}", text::block(text));
}

/// Writes `line` escaped and a newline on `w`.
pub(crate) fn to(w: &mut impl Write, line: fmt::Arguments<'_>) -> io::Result<()> {
    writeln!(w, "{}", text::line(line))
}

/// Writes `text` on stdout with its newlines and tabs kept and everything else escaped
/// ([`text::Layout::Block`]), without adding a newline: text the model, a command or a note wrote,
/// whose own lines are read as lines.
pub(crate) fn block(text: impl fmt::Display) {
    let mut out = io::stdout().lock();
    stdout_done(write!(out, "{}", text::block(text)).and_then(|()| out.flush()));
}

/// Writes `question` escaped on stdout with no newline, for an answer typed after it.
pub(crate) fn ask(question: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    stdout_done(write!(out, "{}", text::line(question)).and_then(|()| out.flush()));
}

/// Writes `question` escaped on stderr with no newline, for an answer typed after it.
pub(crate) fn ask_err(question: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = write!(err, "{}", text::line(question)).and_then(|()| err.flush());
}

/// One JSON line on stdout: `value` as serde_json writes it, with every character the escaper
/// names written as a JSON `\uXXXX` escape ([`text::json_safe`]): the same value to a script, and
/// nothing a terminal acts on.
pub(crate) fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    json_with(value, serde_json::to_string)
}

/// [`json`], pretty-printed.
pub(crate) fn json_pretty(value: &impl serde::Serialize) -> anyhow::Result<()> {
    json_with(value, serde_json::to_string_pretty)
}

fn json_with<T: serde::Serialize>(
    value: &T,
    write: fn(&T) -> serde_json::Result<String>,
) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    let line = text::json_safe(&write(value)?);
    stdout_done(writeln!(out, "{line}").and_then(|()| out.flush()));
    Ok(())
}

/// Text `chock_workspace::render` made: every path and line in it already went through the one
/// escaper, and the only escape sequences left are its own colours (`--color`). Written as is.
pub(crate) fn rendered(diff: &str) {
    let mut out = io::stdout().lock();
    stdout_done(out.write_all(diff.as_bytes()).and_then(|()| out.flush()));
}

/// What a command run with `chock exec` wrote, byte for byte, on the stream it wrote it to: the
/// person runs that command as they would without Chock (a file it prints can be piped into
/// another), so its output is not Chock's to escape.
pub(crate) fn passthrough(to_stderr: bool, bytes: &[u8]) {
    // Straight through (no line buffer left behind), so nothing the command wrote reaches the
    // terminal later than exec's output hold says.
    // A reader that went away is the command's to meet (its status is exec's): not ended here.
    let _ = if to_stderr {
        io::stderr().lock().write_all(bytes)
    } else {
        let mut out = io::stdout().lock();
        out.write_all(bytes).and_then(|()| out.flush())
    };
}

/// Flushes what [`passthrough`] wrote before `chock exec` ends with the command's status.
pub(crate) fn flush_passthrough() {
    let _ = io::stdout().lock().flush();
}

/// What a write on stdout came to: a reader that went away (`| head`) ends the process quietly
/// with status 0; another failure (a full disk) is said on stderr and ends it with status 1.
fn stdout_done(written: io::Result<()>) {
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(i32::from(exit::OK)),
        Err(e) => {
            err(format_args!("chock: cannot write to stdout: {e}"));
            std::process::exit(i32::from(exit::FAILURE));
        }
    }
}

/// Whether `err` is, at its root, a write on a closed pipe (a write that failed and was returned
/// with `?`): [`exit::finish`] ends such a command quietly.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_escapes_every_argument_and_chocks_own_words_stay() {
        let title = "fix\u{1b}]52;c;ZXZpbA==\u{7}\rdone\u{202e}txt";
        let mut buf = Vec::new();
        to(&mut buf, format_args!("title       {title}")).expect("written");
        assert_eq!(
            String::from_utf8(buf).expect("utf-8"),
            "title       fix\\u{1b}]52;c;ZXZpbA==\\u{7}\\rdone\\u{202e}txt\n"
        );
    }

    #[test]
    fn a_broken_pipe_is_found_through_the_context() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("printing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
