//! docs/daemon.md's method reference, generated from the method, notification and error types.
//!
//! The page holds the output of [`method_reference`] between two marker lines; the crate's test
//! `daemon_page` compares them and fails when a type changed and the page did not
//! (`CHOCK_BLESS=1` rewrites the page).

use super::{ErrorKind, METHODS, NOTIFICATIONS, method_doc, notice_doc};
use crate::doc::{render_type, render_type_except};

/// The line before the generated reference in docs/daemon.md.
pub const BEGIN_MARK: &str =
    "<!-- BEGIN method reference: generated from crates/chock-protocol; do not edit -->";
/// The line after it.
pub const END_MARK: &str = "<!-- END method reference -->";

/// The reference: every method (its params and its result), every notification, every error kind.
pub fn method_reference() -> String {
    let mut out = String::from("### Methods\n\n");
    for &method in METHODS {
        let (doc, params, result) = method_doc(method).expect("every method has its doc");
        out.push_str(&format!("#### `{method}`\n\n{doc}\n\n"));
        out.push_str("Params:\n\n");
        render_type(&mut out, params.as_value());
        out.push_str("Result:\n\n");
        render_type(&mut out, result.as_value());
    }
    out.push_str("### Notifications\n\n");
    for &name in NOTIFICATIONS {
        let (doc, params) = notice_doc(name).expect("every notification has its doc");
        out.push_str(&format!("#### `{name}`\n\n{doc}\n\n"));
        // The live items are the `--json` events, documented on their own page.
        render_type_except(&mut out, params.as_value(), &["AgentEvent"]);
    }
    out.push_str("### Errors\n\n");
    out.push_str("| `data.kind` | `code` | meaning |\n|---|---|---|\n");
    let schema = schemars::schema_for!(ErrorKind);
    let variants = schema
        .as_value()
        .get("oneOf")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    for kind in ErrorKind::ALL {
        let name = serde_json::to_value(kind).expect("kinds serialise");
        let meaning = variants
            .iter()
            .find(|v| v.get("const") == Some(&name))
            .and_then(crate::doc::description)
            .unwrap_or_default();
        out.push_str(&format!(
            "| `{}` | {} | {meaning} |\n",
            name.as_str().unwrap_or_default(),
            kind.code()
        ));
    }
    out.push('\n');
    out
}
