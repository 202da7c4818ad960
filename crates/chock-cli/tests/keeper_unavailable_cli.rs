//! A keeper that is installed but cannot start is said, not swallowed (docs/handover.md): the
//! background command runs in the owner's process, as with no keeper, and the session's log
//! says once why it will not move with a handover.

mod run_support;

use std::path::Path;

use run_support::*;

const TWO_IN_THE_BACKGROUND: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo first", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo second", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 1" }

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "first" }

[[turn]]
text = "both ran"
"#;

/// `chock` and its helper programs, linked into `dir`, with a `chock-keeper` there that exits
/// at once: installed, but never answering.
fn install_with_a_broken_keeper(dir: &Path) -> std::path::PathBuf {
    let built = Path::new(CHOCK).parent().unwrap();
    for entry in std::fs::read_dir(built).unwrap().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if name.starts_with("chock")
            && !name.contains('.')
            && path.is_file()
            && name != "chock-keeper"
        {
            std::fs::hard_link(&path, dir.join(&*name))
                .or_else(|_| std::fs::copy(&path, dir.join(&*name)).map(drop))
                .unwrap();
        }
    }
    let keeper = dir.join("chock-keeper");
    std::fs::write(&keeper, "#!/bin/sh\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&keeper, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.join("chock")
}

#[test]
fn a_keeper_that_cannot_start_is_noted_once_and_the_commands_run_here() {
    let w = World::with_git_project();
    let bin = tempfile::tempdir().unwrap();
    let chock = install_with_a_broken_keeper(bin.path());
    let provider = w.script(TWO_IN_THE_BACKGROUND);
    let out = w
        .program(&chock)
        .args(["run", "--provider", &provider, "two in the background"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = w.events_exact();
    let noted: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, d)| k == "note" && d["about"] == "keeper_unavailable")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(noted.len(), 1, "{events:#?}");
    let why = noted[0]["why"].as_str().unwrap();
    assert!(why.contains("chock-keeper"), "{why}");
    // Both commands ran in the owner and their ends are recorded.
    for call in ["play_1_1", "play_2_1"] {
        let result = events
            .iter()
            .find(|(k, c, _)| k == "command.result" && c.as_deref() == Some(call))
            .map(|(_, _, d)| d)
            .unwrap_or_else(|| panic!("no command.result for {call}: {events:#?}"));
        assert_eq!(result["exit_code"], 0, "{result}");
    }
    assert!(
        !w.session().join("background/bg-play_1_1.stdout").exists(),
        "a command was recorded as kept"
    );
    w.assert_log_verifies();
}
