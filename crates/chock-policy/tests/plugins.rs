//! `[plugins.NAME]` in chock.toml: parsed with defaults, and every bad field named by file, line
//! and field.

use std::path::PathBuf;
use std::time::Duration;

use chock_policy::{Policy, PolicyError, Source, Sources};

fn load(project: &str, org: Option<&str>) -> Result<Policy, PolicyError> {
    Policy::from_sources(Sources {
        project: Some(Source {
            path: PathBuf::from("chock.toml"),
            text: project.to_string(),
        }),
        org: org.map(|text| Source {
            path: PathBuf::from("org.toml"),
            text: text.to_string(),
        }),
        project_dir: None,
        home: None,
        chock_dirs: Vec::new(),
        user: None,
    })
}

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn a_plugin_table_parses_with_its_defaults() {
    let policy = load(
        &format!("[plugins.lint]\npath = \"tools/lint.wasm\"\nsha256 = \"{SHA}\"\nmemory_mb = 8\n"),
        None,
    )
    .unwrap();
    let plugin = &policy.plugins()[0];
    assert_eq!(plugin.name, "lint");
    assert_eq!(plugin.path, PathBuf::from("tools/lint.wasm"));
    assert_eq!(plugin.timeout, Duration::from_secs(10));
    assert_eq!(plugin.memory_bytes, 8 << 20);
    assert_eq!(plugin.output_bytes, 256 << 10);
    assert_eq!(plugin.place, "chock.toml:1");
}

#[test]
fn bad_plugin_fields_are_named() {
    let cases = [
        (
            "[plugins.lint]\npath = \"lint.wasm\"\nsha256 = \"ABC\"\n".to_string(),
            "chock.toml:3:10: plugin refused: plugins.lint.sha256 must be the SHA-256",
        ),
        (
            format!("[plugins.lint]\nsha256 = \"{SHA}\"\n"),
            "plugins.lint needs `path`",
        ),
        (
            format!("[plugins.lint]\npath = \"../x.wasm\"\nsha256 = \"{SHA}\"\n"),
            "chock.toml:2:8: plugin refused: plugins.lint.path must be a path inside the project",
        ),
        (
            format!("[plugins.lint]\npath = \"/abs.wasm\"\nsha256 = \"{SHA}\"\n"),
            "plugins.lint.path must be a path inside the project",
        ),
        (
            format!("[plugins.lint]\npath = \"x.wasm\"\nsha256 = \"{SHA}\"\ntimeout_secs = 0\n"),
            "chock.toml:4:16: plugin refused: must be between 1 and 600",
        ),
        (
            format!("[plugins.lint]\npath = \"x.wasm\"\nsha256 = \"{SHA}\"\nwhat = 1\n"),
            "unknown field `what`",
        ),
        (
            format!("[plugins.\"a.b\"]\npath = \"x.wasm\"\nsha256 = \"{SHA}\"\n"),
            "a plugin's name is one action label",
        ),
    ];
    for (text, want) in cases {
        let err = load(&text, None).unwrap_err().to_string();
        assert!(err.contains(want), "{text}\n→ {err}");
    }
}

#[test]
fn an_org_bundle_cannot_configure_a_plugin() {
    let err = load(
        "",
        Some(&format!(
            "[plugins.lint]\npath = \"x.wasm\"\nsha256 = \"{SHA}\"\n"
        )),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(
            "org.toml:1:1: plugin refused: plugins are configured by a project's chock.toml"
        ),
        "{err}"
    );
}
