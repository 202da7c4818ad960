//! The browser UI's assets, embedded in the binary at build time from `crates/chock-daemon/ui/`
//! (no Node build at install time), served with headers that keep the page to itself: a content
//! security policy allowing only its own scripts and its own WebSocket, no framing, no sniffing.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One embedded file.
struct Asset {
    path: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

/// Every file of the UI. A new file is added here and in `ui/`.
const ASSETS: &[Asset] = &[Asset {
    path: "/",
    mime: "text/html; charset=utf-8",
    body: include_bytes!("../ui/index.html"),
}];

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
        HeaderValue::from_static(
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
