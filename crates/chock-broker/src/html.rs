//! HTML turned into readable text for a model: headings, paragraphs, list items and links survive;
//! scripts, styles and markup do not.
//!
//! This is a forgiving scanner, not a parser: a model reads the result, so a page with broken markup
//! must still give text, and nothing here ever executes or fetches anything.

/// How far a tag's closing `>` is looked for outside quotes. Past this (an unclosed quote in
/// broken markup) the first `>` ends the tag. The bound keeps a hostile page linear: without it
/// every `<a "` of a page would scan to the end of the page.
const MAX_QUOTED_TAG: usize = 4096;

/// Elements whose content is dropped entirely.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "head", "iframe", "object",
];

/// Elements that start a new line.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "nav",
    "aside",
    "ul",
    "ol",
    "table",
    "blockquote",
    "hr",
    "dl",
    "dt",
    "dd",
    "form",
    "figure",
    "figcaption",
    "pre",
    "title",
];

/// Readable text of `html`. Links keep their target as `text (href)`.
pub fn html_to_text(html: &str) -> String {
    let mut out = Writer::default();
    let mut rest = html;
    let mut skipping: Option<String> = None;
    let mut link: Option<String> = None;
    let mut pre_depth = 0usize;
    // Past the last `>` no tag can close: what is left is text, read once (a page of unclosed
    // `<a` would otherwise be scanned to its end at every `<`).
    let last_gt = html.rfind('>');
    while !rest.is_empty() {
        let offset = html.len() - rest.len();
        let lt = rest
            .find('<')
            .filter(|lt| last_gt.is_some_and(|gt| offset + lt < gt));
        let Some(lt) = lt else {
            if skipping.is_none() {
                out.text(&decode_entities(rest), pre_depth > 0);
            }
            break;
        };
        if skipping.is_none() && lt > 0 {
            out.text(&decode_entities(&rest[..lt]), pre_depth > 0);
        }
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(tag) = Tag::scan(rest) else {
            if skipping.is_none() {
                out.text("<", pre_depth > 0);
            }
            rest = &rest[1..];
            continue;
        };
        rest = &rest[tag.len..];
        if let Some(name) = &skipping {
            if tag.closing && &tag.name == name {
                skipping = None;
            }
            continue;
        }
        let name = tag.name.as_str();
        if !tag.closing && !tag.self_closing && SKIPPED.contains(&name) {
            skipping = Some(tag.name.clone());
            continue;
        }
        match (name, tag.closing) {
            ("a", false) => link = tag.href,
            ("a", true) => {
                if let Some(href) = link.take().filter(|h| !h.starts_with('#') && !h.is_empty()) {
                    out.text(&format!(" ({href})"), false);
                }
            }
            ("li", false) => {
                out.newline(1);
                out.raw("- ");
            }
            ("pre", false) => {
                pre_depth += 1;
                out.newline(2);
            }
            ("pre", true) => {
                pre_depth = pre_depth.saturating_sub(1);
                out.newline(2);
            }
            ("td" | "th", false) => out.text(" ", false),
            (h, false) if is_heading(h) => {
                out.newline(2);
                out.raw(&"#".repeat(usize::from(h.as_bytes()[1] - b'0')));
                out.raw(" ");
            }
            (h, true) if is_heading(h) => out.newline(2),
            (b, _) if BLOCKS.contains(&b) => {
                out.newline(if b == "br" || b == "tr" { 1 } else { 2 })
            }
            _ => {}
        }
    }
    out.finish()
}

fn is_heading(name: &str) -> bool {
    name.len() == 2 && name.starts_with('h') && (b'1'..=b'6').contains(&name.as_bytes()[1])
}

/// One scanned tag.
struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    href: Option<String>,
    /// Bytes the tag takes, `<` to `>` inclusive.
    len: usize,
}

impl Tag {
    /// Scan a tag at the start of `s` (which begins with `<`); `None` if it is not a tag.
    fn scan(s: &str) -> Option<Tag> {
        let body = &s[1..];
        let closing = body.starts_with('/');
        let body = if closing { &body[1..] } else { body };
        let first = body.chars().next()?;
        if !(first.is_ascii_alphabetic() || first == '!' || first == '?') {
            return None;
        }
        let end = tag_end(body)?;
        let inner = &body[..end];
        let name_end = inner
            .find(|c: char| c.is_whitespace() || c == '/' || c == '>')
            .unwrap_or(inner.len());
        let name = inner[..name_end].to_ascii_lowercase();
        let href = if name == "a" {
            attribute(inner, "href")
        } else {
            None
        };
        Some(Tag {
            name,
            closing,
            self_closing: inner.ends_with('/'),
            href,
            len: 1 + usize::from(closing) + end + 1,
        })
    }
}

/// Where the `>` closing a tag is in `body`: the first one outside quotes within
/// [`MAX_QUOTED_TAG`] bytes, else the first one at all.
fn tag_end(body: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in body.char_indices() {
        if i > MAX_QUOTED_TAG {
            break;
        }
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    body.find('>')
}

/// The value of attribute `wanted` in a tag's inside text.
fn attribute(inner: &str, wanted: &str) -> Option<String> {
    let lower = inner.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(wanted) {
        let at = from + pos;
        from = at + wanted.len();
        let before_ok = at > 0 && lower.as_bytes()[at - 1].is_ascii_whitespace();
        let after = lower[from..].trim_start();
        if !before_ok || !after.starts_with('=') {
            continue;
        }
        let value_start = inner.len() - after.len() + 1;
        let value = inner[value_start..].trim_start();
        let parsed = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or(""),
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        return Some(decode_entities(parsed));
    }
    None
}

/// Decode the common named entities and numeric references.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // Bytes, not a str slice: byte 12 may fall inside a multi-byte character.
        let semi = rest.bytes().take(12).position(|b| b == b';');
        let decoded = semi.and_then(|semi| entity(&rest[1..semi]).map(|c| (c, semi)));
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "laquo" => '«',
        "raquo" => '»',
        "rsquo" => '’',
        "lsquo" => '‘',
        "ldquo" => '“',
        "rdquo" => '”',
        _ => return None,
    })
}

/// Collects text, collapsing whitespace outside `<pre>` and keeping at most one blank line.
#[derive(Default)]
struct Writer {
    out: String,
    pending_space: bool,
}

impl Writer {
    fn text(&mut self, s: &str, preformatted: bool) {
        if preformatted {
            self.out.push_str(s);
            self.pending_space = false;
            return;
        }
        for c in s.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
            } else {
                if self.pending_space && !self.out.is_empty() && !self.out.ends_with(['\n', ' ']) {
                    self.out.push(' ');
                }
                self.pending_space = false;
                self.out.push(c);
            }
        }
    }

    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.pending_space = false;
    }

    fn newline(&mut self, count: usize) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        self.pending_space = false;
        if self.out.is_empty() {
            return;
        }
        let have = self.out.len() - self.out.trim_end_matches('\n').len();
        for _ in have..count {
            self.out.push('\n');
        }
    }

    fn finish(self) -> String {
        self.out.trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_headings_paragraphs_lists_and_links_and_drops_scripts() {
        let html = r#"<!doctype html><html><head><title>T</title><style>p{color:red}</style></head>
            <body><h1>Intro</h1><p>Hello &amp; <b>welcome</b>,
            friend.</p><script>alert("x<p>")</script><ul><li>one</li><li>two</li></ul>
            <p>See <a href="https://example.org/a?b=1&amp;c=2">the docs</a>.</p><!-- hidden --></body></html>"#;
        assert_eq!(
            html_to_text(html),
            "# Intro\n\nHello & welcome, friend.\n\n- one\n- two\n\nSee the docs (https://example.org/a?b=1&c=2)."
        );
    }

    #[test]
    fn pre_keeps_its_whitespace_and_entities_decode() {
        let html = "<p>x</p><pre>a  b\n  c &lt;d&gt;</pre><p>&#x41;&#66;&nbsp;&bogus;</p>";
        assert_eq!(html_to_text(html), "x\n\na  b\n  c <d>\n\nAB &bogus;");
    }

    #[test]
    fn broken_markup_still_gives_text() {
        assert_eq!(
            html_to_text("a < b and <p unclosed"),
            "a < b and <p unclosed"
        );
        assert_eq!(html_to_text("<script>never closed"), "");
    }

    /// A `&` near a multi-byte character once sliced a str inside that character and panicked:
    /// a web page could crash the fetch.
    #[test]
    fn an_ampersand_before_multibyte_text_does_not_panic() {
        assert_eq!(decode_entities("&aaaaaaaaaé;"), "&aaaaaaaaaé;");
        assert_eq!(
            decode_entities("a &\u{1F600}\u{1F600}\u{1F600}"),
            "a &\u{1F600}\u{1F600}\u{1F600}"
        );
        assert_eq!(html_to_text("<p>x &ééééééé y</p>"), "x &ééééééé y");
    }

    /// Pages of tags that never close, with and without quotes: each `<` once scanned to the end
    /// of the page, which made a 2 MiB hostile page take hours. This finishes, with the text kept.
    #[test]
    fn unclosed_tags_are_read_in_one_pass() {
        let unclosed = "<a".repeat(1 << 20);
        assert_eq!(html_to_text(&unclosed), unclosed);
        let quoted = format!("{}<b>done</b>", "<a \"".repeat(300_000));
        assert!(html_to_text(&quoted).ends_with("done"), "quoted");
        let broken = r#"<p title="x>one</p><p>two</p>"#;
        assert!(
            html_to_text(broken).contains("two"),
            "{}",
            html_to_text(broken)
        );
    }
}
