//! The browser UI's assets, embedded in the binary at build time from `crates/chock-daemon/ui/`
//! (plain HTML, CSS and JavaScript modules: no Node build at install time, nothing fetched), served
//! with headers that keep the page to itself: a content security policy allowing only its own
//! files and its own WebSocket (no inline script or style, no `eval`), no framing, no sniffing, no
//! referrer. The JavaScript builds the page from text nodes only; the tests below refuse an HTML
//! sink (`innerHTML` and the like) in any asset, so model or tool text can never become markup.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One embedded file.
struct Asset {
    path: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! assets {
    ($(($path:literal, $file:literal, $mime:expr)),* $(,)?) => {
        &[$(Asset { path: $path, mime: $mime, body: include_bytes!(concat!("../ui/", $file)) }),*]
    };
}

/// Every file of the UI. A new file is added here and in `ui/`.
const ASSETS: &[Asset] = assets![
    ("/", "index.html", HTML),
    ("/style.css", "style.css", CSS),
    ("/icon.svg", "icon.svg", SVG),
    ("/app.js", "app.js", JS),
    ("/dom.js", "dom.js", JS),
    ("/rpc.js", "rpc.js", JS),
    ("/session.js", "session.js", JS),
    ("/timeline.js", "timeline.js", JS),
    ("/approvals.js", "approvals.js", JS),
    ("/review.js", "review.js", JS),
    ("/logview.js", "logview.js", JS),
];

/// The page may load only its own files and talk only to its own origin (`'self'` covers the
/// WebSocket at `/ws`); nothing inline, no plugins, no `<base>`, no framing.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The asset at `path` (`/index.html` is `/`), or 404.
pub(crate) fn asset(path: &str) -> Response {
    let path = if path == "/index.html" { "/" } else { path };
    let Some(asset) = ASSETS.iter().find(|a| a.path == path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(asset: &Asset) -> &'static str {
        std::str::from_utf8(asset.body).expect("assets are UTF-8")
    }

    #[test]
    fn every_asset_is_served_with_its_type_and_the_strict_policy() {
        for a in ASSETS {
            let r = asset(a.path);
            assert_eq!(r.status(), StatusCode::OK, "{}", a.path);
            let h = r.headers();
            assert_eq!(h[header::CONTENT_TYPE], a.mime, "{}", a.path);
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        }
        assert!(!CSP.contains("unsafe"), "no inline script or style: {CSP}");
        assert_eq!(asset("/index.html").status(), StatusCode::OK);
        assert_eq!(asset("/nope.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("/../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }

    /// Every file the page or a module names (`src=`, `href=`, `from "./x.js"`) is embedded: a
    /// file added to `ui/` but not to [`ASSETS`] would be a 404 only a browser would notice.
    #[test]
    fn every_file_the_page_names_is_embedded() {
        let served = |p: &str| ASSETS.iter().any(|a| a.path == p);
        let html = text(&ASSETS[0]);
        for attr in ["src=\"", "href=\""] {
            for part in html.split(attr).skip(1) {
                let target = part.split('"').next().unwrap_or("");
                if target.starts_with('#') {
                    continue;
                }
                assert!(served(target), "index.html names {target}, not embedded");
            }
        }
        for a in ASSETS.iter().filter(|a| a.mime == JS) {
            for part in text(a).split(" from \"./").skip(1) {
                let target = format!("/{}", part.split('"').next().unwrap_or(""));
                assert!(served(&target), "{} imports {target}, not embedded", a.path);
            }
        }
    }

    /// The page escapes what a person decides on with the same class as every other surface.
    #[test]
    fn the_page_escapes_the_characters_chock_protocol_names() {
        let dom = ASSETS.iter().find(|a| a.path == "/dom.js").expect("dom.js");
        let line = format!(
            "export const ESCAPED = /{}/gu;",
            chock_protocol::text::js_class()
        );
        assert!(text(dom).contains(&line), "dom.js lacks `{line}`");
    }

    /// The review shows a path and a changed line as they are applied: a bidi override in
    /// `harm\u{202e}txt.exe` or in a line is written as a visible escape, not obeyed (a changed
    /// line could otherwise read differently from what is applied). The page's own functions
    /// (`review.js`'s `diffLine` and `pathList`, through `dom.js`'s `shown`) run in node: a unit
    /// check of the rendering, not the whole page (crates/chock-daemon/tests/browser.rs drives
    /// that in chromium).
    #[test]
    fn the_review_shows_bidi_controls_in_paths_and_lines_escaped() {
        if std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "node is missing: .ci/run installs it"
            );
            eprintln!("skipped: node is not installed");
            return;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("package.json"), r#"{"type":"module"}"#).expect("write");
        for name in ["/dom.js", "/review.js"] {
            let asset = ASSETS.iter().find(|a| a.path == name).expect("embedded");
            std::fs::write(dir.path().join(&name[1..]), text(asset)).expect("write");
        }
        let script = r#"
import { diffLine, pathList } from "./review.js";
process.stdout.write(JSON.stringify([
  diffLine("+ok = \"\u202eeurt\" # admin\tx\r\u001b[2K"),
  pathList(["harm\u202etxt.exe", "a\nb", "plain.txt"]),
]));
"#;
        std::fs::write(dir.path().join("check.js"), script).expect("write");
        let out = std::process::Command::new("node")
            .arg("check.js")
            .current_dir(dir.path())
            .output()
            .expect("node runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown: Vec<String> = serde_json::from_slice(&out.stdout).expect("two strings");
        assert_eq!(
            shown,
            [
                "+ok = \"\\u{202e}eurt\" # admin\tx\\r\\u{1b}[2K\n",
                "harm\\u{202e}txt.exe, a\\nb, plain.txt",
            ]
        );
    }

    /// No asset parses a string as HTML or code, and the page has no inline script, style or
    /// handler: the policy would refuse them, and model text must never reach such a sink.
    #[test]
    fn no_asset_has_an_html_sink_or_inline_code() {
        let sinks = [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "createContextualFragment",
            "DOMParser",
            "srcdoc",
        ];
        for a in ASSETS {
            let body = text(a);
            for sink in sinks {
                assert!(!body.contains(sink), "{} uses {sink}", a.path);
            }
        }
        let html = text(&ASSETS[0]).to_ascii_lowercase();
        assert!(!html.contains("style="), "an inline style in index.html");
        assert!(
            !html.contains("<style"),
            "an inline stylesheet in index.html"
        );
        for part in html.split("<script").skip(1) {
            let tag = part.split('>').next().unwrap_or("");
            assert!(
                tag.contains("src="),
                "an inline script in index.html: <script{tag}>"
            );
        }
        for word in html.split_whitespace() {
            let is_handler = word.starts_with("on")
                && word.contains('=')
                && word[2..]
                    .split('=')
                    .next()
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphabetic()));
            assert!(!is_handler, "an inline handler in index.html: {word}");
        }
    }
}
