//! The directories resolve from the environment as docs/daemon.md and docs/log.md say: the XDG
//! variable when it is absolute, else the place under `$HOME`, else a clear error; the daemon's
//! socket under `$XDG_RUNTIME_DIR/chock`, else under the state directory. The environment is the
//! process's, so each case runs this test binary again with only the variables it names.

use std::process::Command;

const CHILD: &str = "CHOCK_DIRS_TEST_CHILD";

/// In a child run: prints every resolution, one `dirs:name=value` a line.
#[test]
fn child_prints_the_directories() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let show = |r: Result<std::path::PathBuf, chock_dirs::DirsError>| match r {
        Ok(p) => p.display().to_string(),
        Err(e) => format!("error: {e}"),
    };
    println!("dirs:state={}", show(chock_dirs::state_root()));
    println!("dirs:sessions={}", show(chock_dirs::sessions_root()));
    println!("dirs:data={}", show(chock_dirs::data_root()));
    println!("dirs:runtime={}", show(chock_dirs::runtime_dir()));
    println!("dirs:socket={}", show(chock_dirs::socket_path()));
}

/// What the child resolves with exactly `env`.
fn resolved(env: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_prints_the_directories", "--nocapture"])
        .args(["--test-threads", "1"])
        .env_clear()
        .env(CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once("dirs:"))
        .filter_map(|(_, l)| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn home_alone_puts_everything_under_it() {
    let got = resolved(&[("HOME", "/h")]);
    assert_eq!(got["state"], "/h/.local/state/chock");
    assert_eq!(got["sessions"], "/h/.local/state/chock/sessions");
    assert_eq!(got["data"], "/h/.local/share/chock");
    assert_eq!(got["runtime"], "/h/.local/state/chock/run");
    assert_eq!(got["socket"], "/h/.local/state/chock/run/daemon.sock");
}

#[test]
fn the_xdg_variables_win_over_home() {
    let got = resolved(&[
        ("HOME", "/h"),
        ("XDG_STATE_HOME", "/s"),
        ("XDG_DATA_HOME", "/d"),
        ("XDG_RUNTIME_DIR", "/run/user/7"),
    ]);
    assert_eq!(got["sessions"], "/s/chock/sessions");
    assert_eq!(got["data"], "/d/chock");
    assert_eq!(got["runtime"], "/run/user/7/chock");
    assert_eq!(got["socket"], "/run/user/7/chock/daemon.sock");
}

#[test]
fn a_relative_value_is_ignored() {
    let got = resolved(&[
        ("HOME", "/h"),
        ("XDG_STATE_HOME", "rel/state"),
        ("XDG_DATA_HOME", "rel/data"),
        ("XDG_RUNTIME_DIR", "rel/run"),
    ]);
    assert_eq!(got["sessions"], "/h/.local/state/chock/sessions");
    assert_eq!(got["data"], "/h/.local/share/chock");
    assert_eq!(got["socket"], "/h/.local/state/chock/run/daemon.sock");
}

#[test]
fn no_home_is_an_error_naming_the_variable() {
    let got = resolved(&[("HOME", "relative")]);
    assert_eq!(
        got["state"],
        "error: cannot find the state directory: set $XDG_STATE_HOME or $HOME"
    );
    assert_eq!(
        got["data"],
        "error: cannot find the data directory: set $XDG_DATA_HOME or $HOME"
    );
    assert_eq!(got["socket"], got["state"]);
}
