//! Helpers shared by the policy tests: load a policy from text, with no host files read.
#![allow(dead_code)]

use std::path::PathBuf;

use chock_policy::{Action, Policy, PolicyError, Source, Sources};

pub fn source(name: &str, text: &str) -> Source {
    Source {
        path: PathBuf::from(name),
        text: text.to_owned(),
    }
}

pub fn load(project: Option<&str>, org: Option<&str>) -> Result<Policy, PolicyError> {
    Policy::from_sources(Sources {
        project: project.map(|t| source("chock.toml", t)),
        org: org.map(|t| source("org.toml", t)),
        project_dir: Some(PathBuf::from("/nonexistent/proj")),
        home: Some(PathBuf::from("/nonexistent/home")),
        chock_dirs: vec![PathBuf::from("/nonexistent/xdg-state/chock")],
        user: None,
    })
}

pub fn action(name: &str) -> Action {
    Action::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `[[rule]]` rows from (pattern, decision) pairs.
pub fn rules(rows: &[(&str, &str)]) -> String {
    rows.iter()
        .map(|(a, d)| format!("[[rule]]\naction = \"{a}\"\ndecision = \"{d}\"\n\n"))
        .collect()
}
