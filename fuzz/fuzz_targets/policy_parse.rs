//! Fuzz the policy parser: any text either loads, or is refused with an error that points inside the
//! file. It must never panic, and a loaded table must answer for every action its rules name.
#![no_main]

use std::path::PathBuf;

use chock_policy::{Action, Pattern, Policy, Source, Sources};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The name and action parsers on their own.
    let _ = Pattern::parse(text);
    let _ = Action::parse(text);

    let sources = Sources {
        project: Some(Source { path: PathBuf::from("chock.toml"), text: text.to_owned() }),
        project_dir: Some(PathBuf::from("/nonexistent/fuzz-project")),
        home: Some(PathBuf::from("/nonexistent/fuzz-home")),
        ..Sources::default()
    };
    match Policy::from_sources(sources) {
        Ok(policy) => {
            for rule in policy.project_rules().rules() {
                // A rule's own literal prefix, made concrete, must get an answer without panicking.
                let mut name = rule.pattern.literals().join(".");
                if rule.pattern.is_wildcard() {
                    if !name.is_empty() {
                        name.push('.');
                    }
                    name.push('x');
                }
                if let Ok(action) = Action::parse(&name) {
                    let _ = policy.decide(&action);
                }
            }
        }
        Err(err) => {
            let lines = text.lines().count().max(1);
            assert!(err.line >= 1 && err.line <= lines + 1, "line {} outside a {lines}-line file: {err}", err.line);
            assert!(err.column >= 1, "{err}");
            assert!(err.to_string().starts_with("chock.toml:"), "{err}");
        }
    }
});
