//! The one rule for showing text that came from outside (a model, a command, a server) where a
//! person decides on it: which characters are written as a visible `\u{…}` escape instead of
//! being drawn. Control characters would move the cursor, erase or recolour what is around
//! them; bidirectional controls reorder what is shown (`harmless\u{202e}txt.exe`); invisible
//! characters hide where words begin and end; line and paragraph separators break a line where
//! the viewer does not. Every surface — the terminal prompt, the terminal interface, ACP, the
//! browser UI (its `dom.js` copies [`ESCAPED`], and a test holds the two equal) — escapes the same
//! set.

/// The code points escaped, as inclusive ranges: C0 and C1 controls and DEL (newline and tab are
/// the caller's choice), the Arabic letter mark, zero-width space, joiners and the LRM/RLM
/// marks, the line and paragraph separators, the bidi embeddings and overrides, the word joiner
/// and invisible operators, the bidi isolates, and the byte-order mark.
pub const ESCAPED: &[(char, char)] = &[
    ('\u{0000}', '\u{001f}'),
    ('\u{007f}', '\u{009f}'),
    ('\u{061c}', '\u{061c}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{2028}', '\u{202e}'),
    ('\u{2060}', '\u{2069}'),
    ('\u{feff}', '\u{feff}'),
];

/// Whether `c` is shown as an escape.
pub fn must_escape(c: char) -> bool {
    ESCAPED.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// `text` with every character [`must_escape`] says written as an escape (`\t`, `\r`, `\n`, else
/// `\u{…}`, as Rust's `escape_default` writes them), except those in `keep`
/// (a caller that lays out lines itself keeps `\n`, one that shows tabs keeps `\t`).
pub fn escaped(text: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !must_escape(c) || keep.contains(&c) {
            out.push(c);
            continue;
        }
        match c {
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            _ => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
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
            escaped("a\u{1b}[2K\r\u{202e}b\u{200b}c\u{2028}d\u{61c}é\t", &[]),
            "a\\u{1b}[2K\\r\\u{202e}b\\u{200b}c\\u{2028}d\\u{61c}é\\t"
        );
        assert_eq!(escaped("one\ntwo\tx", &['\n', '\t']), "one\ntwo\tx");
        assert!(!must_escape(' ') && !must_escape('λ') && !must_escape('\u{2030}'));
    }

    #[test]
    fn the_javascript_class_names_every_range() {
        assert!(js_class().starts_with("[\\u0000-\\u001f\\u007f-\\u009f\\u061c"));
    }
}
