//! Every action name in the catalogue has a caller: a rule that matches nothing looks exactly like a
//! rule that allows, so a name nothing asks must say so ([`State::Pending`]) or go.
//!
//! The test walks the catalogue against [`CALLERS`]: for each name some code asks, the text that
//! builds the name, which must appear in a crate's non-test source outside this catalogue. A name
//! added to the catalogue without a line here, a line whose text no longer appears, and a pending
//! name that has gained a line all fail.

use std::path::{Path, PathBuf};

use chock_policy::catalogue::{CATALOGUE, State};

/// (template, text in some crate's source that builds that name and asks the table about it).
const CALLERS: &[(&str, &str)] = &[
    ("exec.system.<program>", "ExecClass::System"),
    ("exec.workspace.<program>", "ExecClass::Workspace"),
    ("exec.extra.<program>", "ExecClass::Extra"),
    ("exec.devshell.<program>", "ExecClass::Devshell"),
    ("exec.nix.store.<program>", "ExecClass::NixStore"),
    ("nix.devshell", "Action::parse(\"nix.devshell\")"),
    ("nix.build", "Action::parse(\"nix.build\")"),
    ("exec.unparsed", "Action::exec_unparsed()"),
    ("fs.read", "one(\"fs.read\""),
    ("fs.write", "one(\"fs.write\""),
    ("net.fetch.<host>", "Action::net_fetch("),
    ("net.connect.<host>.<port>", "Action::net_connect("),
    ("workspace.apply", "Action::parse(\"workspace.apply\")"),
    ("workspace.adopt", "approve(&pipeline, \"workspace.adopt\""),
    (
        "ratchet.widen_action",
        "Action::parse(\"ratchet.widen_action\")",
    ),
    ("web.search", "Action::parse(\"web.search\")"),
    ("subagent.spawn", "Action::parse(\"subagent.spawn\")"),
    ("subagent.take", "Action::parse(\"subagent.take\")"),
    ("secret.password.<host>", "Action::secret_password("),
    ("memory.read", "Action::parse(\"memory.read\")"),
    ("memory.write", "Action::parse(\"memory.write\")"),
    ("mcp.<server>.tool.<tool>", "Action::mcp_tool("),
    ("mcp.<server>.network", "Action::mcp_network("),
    ("mcp.<server>.sampling", "\"mcp.{server}.sampling\""),
    ("plugin.<plugin>.tool.<tool>", "Action::plugin_tool("),
    ("plugin.<plugin>.network", "\"plugin.{plugin}.network\""),
];

/// The line that classifies a git invocation and asks the table about its act.
const GIT_CALLER: &str = "git::classify(&invocation)";

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crates directory")
        .to_path_buf()
}

/// The non-test Rust source of every crate, except the catalogue and the action constructors
/// themselves (a constructor is not a caller). A file's own `#[cfg(test)]` module is cut off.
fn non_test_source() -> String {
    let mut all = String::new();
    let mut stack = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).expect("read crates/") {
        stack.push(krate.expect("a crate").path().join("src"));
    }
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
                continue;
            }
            let skipped = !name.ends_with(".rs")
                || name == "tests.rs"
                || name.ends_with("_tests.rs")
                || path.ends_with("chock-policy/src/action.rs")
                || path.starts_with(crates_dir().join("chock-policy/src/catalogue"));
            if skipped {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read a source file");
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            all.push_str(text);
            all.push('\n');
        }
    }
    all
}

#[test]
fn every_catalogue_name_is_asked_or_marked_pending() {
    let source = non_test_source();
    let mut orphans = Vec::new();
    for entry in CATALOGUE {
        // Every `git.*` name is built by the classifier and asked by the session's channel
        // handler, one line for all of them.
        let git = ("git.*", GIT_CALLER);
        let caller = CALLERS
            .iter()
            .find(|(t, _)| *t == entry.template)
            .or_else(|| entry.template.starts_with("git.").then_some(&git));
        match (entry.state, caller) {
            (State::Asked, None) => orphans.push(format!(
                "{}: nothing is known to ask it (add its caller to CALLERS, or mark it pending)",
                entry.template
            )),
            (State::Asked, Some((_, text))) if !source.contains(text) => orphans.push(format!(
                "{}: its caller `{text}` appears in no crate's source",
                entry.template
            )),
            (State::Pending(why), Some(_)) => orphans.push(format!(
                "{}: marked pending ({why}) but CALLERS names a caller",
                entry.template
            )),
            _ => {}
        }
    }
    for (template, _) in CALLERS {
        if !CATALOGUE.iter().any(|e| e.template == *template) {
            orphans.push(format!("{template}: in CALLERS but not in the catalogue"));
        }
    }
    assert!(orphans.is_empty(), "{}", orphans.join("\n"));
}

#[test]
fn no_name_is_pending() {
    // `secret.password.<host>` was the last: `chock askpass` settles it for every password git
    // asks for. A name reserved again must say why here.
    let pending: Vec<&str> = CATALOGUE
        .iter()
        .filter(|e| matches!(e.state, State::Pending(_)))
        .map(|e| e.template)
        .collect();
    assert!(pending.is_empty(), "{pending:?}");
}
