//! The one escaper: how text that came from outside (a model, a command, a plugin, an MCP server,
//! a log, a workspace path) is shown to a person. Control characters would move the cursor, erase
//! or recolour what is around them, or reach the terminal's clipboard (OSC 52); bidirectional
//! controls reorder what is shown (`harmless\u{202e}txt.exe`); invisible characters hide where
//! words begin and end; line and paragraph separators break a line where the viewer does not.
//! Each is written as a visible escape instead.
//!
//! Every surface escapes the same set with this code: the CLI (every print goes through
//! [`Shown`]), the terminal prompt, the terminal interface, ACP, the workspace's diff, and the
//! browser UI (its `dom.js` copies [`ESCAPED`] as [`js_class`], and a test holds the two equal).
//! It lives here because chock-protocol is the leaf crate every surface already depends on.

use std::fmt::{self, Write as _};

/// The code points escaped, as inclusive ranges: C0 controls (ESC, carriage return, newline and
/// tab among them; [`Layout`] decides on the last two), DEL and the C1 controls (CSI is `\u{9b}`,
/// OSC `\u{9d}`), the Arabic letter mark, zero-width space, joiners and the LRM/RLM marks, the
/// line and paragraph separators, the bidi embeddings and overrides, the word joiner and invisible
/// operators, the bidi isolates, and the byte-order mark.
pub const ESCAPED: &[(char, char)] = &[
    ('\u{0000}', '\u{001f}'),
    ('\u{007f}', '\u{009f}'),
    ('\u{061c}', '\u{061c}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{2028}', '\u{202e}'),
    ('\u{2060}', '\u{2069}'),
    ('\u{feff}', '\u{feff}'),
];

/// Whether `c` is one of [`ESCAPED`] (shown as an escape, but for the newline and tab a
/// [`Layout::Block`] keeps).
pub fn must_escape(c: char) -> bool {
    ESCAPED.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// What a shown text may keep of its own layout. Which one fits is the caller's choice: a field
/// printed on a line of Chock's own is a [`Layout::Line`]; text whose lines the reader reads as
/// lines (the model's prose, a diff line, a note) is a [`Layout::Block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Newline and tab escaped too (`\n`, `\t`): the text stays on the one line it is put on, so
    /// it cannot forge a line of what is around it.
    Line,
    /// Newline and tab kept; everything else [`ESCAPED`] (a carriage return too) is escaped.
    Block,
}

impl Layout {
    fn keeps(self, c: char) -> bool {
        self == Self::Block && matches!(c, '\n' | '\t')
    }
}

/// A value shown through the escaper: its `Display` writes what the value's own `Display` would,
/// with every [`ESCAPED`] character (but those the [`Layout`] keeps) as a visible escape (`\t`,
/// `\r`, `\n`, else `\u{…}` as Rust's `escape_default` writes them). A width or precision in the
/// format (`{:<30}`) pads the escaped text. Escaping twice changes nothing.
#[derive(Debug, Clone, Copy)]
pub struct Shown<T> {
    value: T,
    layout: Layout,
}

/// `value` shown on one line ([`Layout::Line`]).
pub fn line<T: fmt::Display>(value: T) -> Shown<T> {
    Shown {
        value,
        layout: Layout::Line,
    }
}

/// `value` shown with its newlines and tabs kept ([`Layout::Block`]).
pub fn block<T: fmt::Display>(value: T) -> Shown<T> {
    Shown {
        value,
        layout: Layout::Block,
    }
}

impl<T: fmt::Display> fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.width().is_some() || f.precision().is_some() {
            let mut text = String::new();
            write!(Escaping::new(&mut text, self.layout), "{}", self.value)?;
            return f.pad(&text);
        }
        write!(Escaping::new(f, self.layout), "{}", self.value)
    }
}

/// `text` as [`Shown`] writes it.
pub fn escaped(text: &str, layout: Layout) -> String {
    Shown {
        value: text,
        layout,
    }
    .to_string()
}

/// A writer that escapes what is written through it before it reaches `out`.
struct Escaping<W> {
    out: W,
    layout: Layout,
}

impl<W: fmt::Write> Escaping<W> {
    fn new(out: W, layout: Layout) -> Self {
        Self { out, layout }
    }
}

impl<W: fmt::Write> fmt::Write for Escaping<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut clean = 0;
        for (at, c) in s.char_indices() {
            if !must_escape(c) || self.layout.keeps(c) {
                continue;
            }
            self.out.write_str(&s[clean..at])?;
            clean = at + c.len_utf8();
            match c {
                '\t' => self.out.write_str("\\t")?,
                '\r' => self.out.write_str("\\r")?,
                '\n' => self.out.write_str("\\n")?,
                _ => write!(self.out, "\\u{{{:x}}}", u32::from(c))?,
            }
        }
        self.out.write_str(&s[clean..])
    }
}

/// A JSON text (as serde_json writes it) with every [`ESCAPED`] character it left raw — DEL, the
/// C1 controls, the bidi and invisible characters, all inside strings — written as a JSON `\uXXXX`
/// escape. A JSON reader reads the same value; a terminal shown the line is not driven by it. A C0
/// control in serde_json's output is its own layout (a pretty form's newlines): it escapes every
/// one inside a string itself, so those are left.
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if must_escape(c) && c > '\u{1f}' {
            // Every escaped character is in the basic plane: one `\uXXXX` names it.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// [`ESCAPED`] as the character class of a JavaScript regular expression (what the browser UI's
/// `dom.js` holds).
pub fn js_class() -> String {
    let mut out = String::from("[");
    for &(lo, hi) in ESCAPED {
        let u = |c: char| format!("\\u{:04x}", u32::from(c));
        if lo == hi {
            out.push_str(&u(lo));
        } else {
            out.push_str(&format!("{}-{}", u(lo), u(hi)));
        }
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisibles_are_escaped_and_the_rest_is_not() {
        assert_eq!(
            escaped(
                "a\u{1b}[2K\r\u{202e}b\u{200b}c\u{2028}d\u{61c}é\t\u{9b}\u{7f}\u{2066}\u{200e}",
                Layout::Line
            ),
            "a\\u{1b}[2K\\r\\u{202e}b\\u{200b}c\\u{2028}d\\u{61c}é\\t\\u{9b}\\u{7f}\\u{2066}\\u{200e}"
        );
        assert_eq!(escaped("one\ntwo\tx\r", Layout::Block), "one\ntwo\tx\\r");
        assert_eq!(escaped("one\ntwo", Layout::Line), "one\\ntwo");
        assert!(!must_escape(' ') && !must_escape('λ') && !must_escape('\u{2030}'));
    }

    #[test]
    fn shown_escapes_any_display_pads_and_is_idempotent() {
        let osc52 = "t\u{1b}]52;c;aGk=\u{7}";
        assert_eq!(line(osc52).to_string(), "t\\u{1b}]52;c;aGk=\\u{7}");
        assert_eq!(format!("[{:<6}]", line("a\rb")), "[a\\rb  ]");
        assert_eq!(
            format!("{}", line(format_args!("x{}y", '\u{202e}'))),
            "x\\u{202e}y"
        );
        let once = line(osc52).to_string();
        assert_eq!(line(&once).to_string(), once);
    }

    #[test]
    fn json_stays_the_same_value_with_nothing_raw() {
        let value = serde_json::json!({"t": "a\u{1b}\u{9b}\u{202e}b\n"});
        let safe = json_safe(&serde_json::to_string(&value).expect("json"));
        assert!(!safe.chars().any(must_escape), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).expect("still json");
        assert_eq!(back, value);
        let pretty = json_safe(&serde_json::to_string_pretty(&value).expect("json"));
        assert!(
            !pretty.contains('\u{9b}') && pretty.contains("{\n"),
            "{pretty}"
        );
        let back: serde_json::Value = serde_json::from_str(&pretty).expect("still json");
        assert_eq!(back, value);
    }

    #[test]
    fn the_javascript_class_names_every_range() {
        assert!(js_class().starts_with("[\\u0000-\\u001f\\u007f-\\u009f\\u061c"));
    }
}
