//! `chock run` against a loopback server speaking the Anthropic wire format: keys (file, OS keyring,
//! environment) that never reach the log or a tool call, retries, and background commands.

mod run_support;

use std::process::Stdio;

use run_support::*;

#[test]
fn a_run_through_a_loopback_anthropic_server_with_a_stored_key() {
    let w = World::new();
    w.write("hello.txt", "hello from the project\n");
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            1000,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply("msg_2", 1200, "It says hello.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_UNSET_KEY");
    let key = "sk-ant-test-0123456789abcdef";
    let login = w.chock_with_input(
        &["login", "--provider", "fake"],
        format!("{key}\n").as_bytes(),
    );
    assert_eq!(login.status.code(), Some(0), "{}", text(&login.stderr));
    assert!(!text(&login.stdout).contains(key));
    let stored = w.data.join("chock/credentials/fake");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let out = w.chock(&["run", "--provider", "fake", "what does hello.txt say?"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Reading it.") && stdout.contains("It says hello."),
        "{stdout}"
    );
    assert!(stdout.contains("2200 input"), "{stdout}");
    assert!(
        !stdout.contains("unknown (no price"),
        "a known model has a price: {stdout}"
    );
    let requests = server.join().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {key}")),
        "{}",
        requests[0]
    );
    assert!(
        requests[1].contains("hello from the project"),
        "the tool result went back: {}",
        requests[1]
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key), "the key never reaches the log");
    w.assert_log_verifies();
    let events = w.events();
    assert_decisions_precede_results(&events);
    let read = events
        .iter()
        .find(|(k, c, _)| k == "tool.call" && c.as_deref() == Some("toolu_01"))
        .unwrap();
    assert_eq!(read.2["input"]["path"], "hello.txt");
}

#[test]
#[cfg_attr(
    not(feature = "keyring"),
    ignore = "needs dbus, gnome-keyring and secret-tool: the `keyring` feature (.ci/run tests with --all-features)"
)]
fn login_uses_a_running_os_keyring_and_run_finds_the_key_there() {
    let missing = ["dbus-run-session", "gnome-keyring-daemon", "secret-tool"]
        .into_iter()
        .find(|p| !on_path(p));
    if !chock_test_support::requires(
        missing.is_none(),
        format_args!(
            "{} is not installed (apt-get install dbus libsecret-tools gnome-keyring)",
            missing.unwrap_or_default()
        ),
    ) {
        return;
    }
    let w = World::new();
    w.write("hello.txt", "hello from the project\n");
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Reading it.",
            Some(("toolu_01", "read_file", r#"{"path": "hello.txt"}"#)),
        ),
        reply("msg_2", 10, "It says hello.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_UNSET_KEY");
    let key = "sk-ant-keyring-0123456789";
    let looked_up = w.base.join("looked-up");
    let script = format!(
        "printf pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1\n\
         printf %s '{key}' | \"$CHOCK\" login --provider fake || exit 10\n\
         secret-tool lookup application chock provider fake > '{}' || exit 11\n\
         \"$CHOCK\" run --provider fake 'what does hello.txt say?' || exit 12\n",
        looked_up.display()
    );
    let out = w
        .program("dbus-run-session")
        .args(["--", "sh", "-c", &script])
        .env("CHOCK", CHOCK)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("stored the key for fake in the OS keyring"),
        "{stdout}"
    );
    assert!(
        !w.data.join("chock/credentials/fake").exists(),
        "no file copy when the keyring took it"
    );
    assert_eq!(std::fs::read_to_string(&looked_up).unwrap().trim(), key);
    let requests = server.join().unwrap();
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {key}"))
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key), "the key never reaches the log");
}

#[test]
fn the_key_never_reaches_a_tool_call_or_the_log() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Looking around.",
            Some((
                "toolu_env",
                "run_command",
                r#"{"command": "env; echo done"}"#,
            )),
        ),
        reply("msg_2", 10, "Nothing there.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let key = "sk-ant-never-in-a-tool-call-987654";
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "look at the environment"],
        &[("CHOCK_TEST_KEY", key), ("ANTHROPIC_API_KEY", key)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let requests = server.join().unwrap();
    let result = &requests[1];
    assert!(
        result.contains("done") && result.contains("PATH="),
        "the command ran: {result}"
    );
    let body = result.split("\r\n\r\n").nth(1).unwrap();
    assert!(
        !body.contains(key),
        "the key is not in the command's environment: {body}"
    );
    assert!(!body.contains("CHOCK_TEST_KEY") && !body.contains("ANTHROPIC_API_KEY"));
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(key));
}

#[test]
fn an_overloaded_model_is_retried_and_the_retry_is_logged() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        Reply::Error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        reply("msg_1", 10, "Fine now.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "hi"],
        &[("CHOCK_TEST_KEY", "sk-test-retry-key-123456")],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("retrying"), "{stdout}");
    assert_eq!(server.join().unwrap().len(), 2);
    let events = w.events();
    let retry = events
        .iter()
        .find(|(k, _, _)| k == "model.retry")
        .expect("a model.retry event");
    assert_eq!(retry.2["attempt"], 1);
    assert!(
        retry.2["reason"].as_str().unwrap().contains("529"),
        "{}",
        retry.2
    );
    w.assert_log_verifies();
}

#[test]
fn a_background_command_returns_a_handle_and_its_end_is_recorded() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            10,
            "Starting a slow job.",
            Some((
                "toolu_bg",
                "run_command",
                r#"{"command": "sleep 1; echo slow-job-done", "background": true}"#,
            )),
        ),
        reply(
            "msg_2",
            10,
            "Checking on it.",
            Some(("toolu_read", "read_output", r#"{"handle": "bg-toolu_bg"}"#)),
        ),
        reply("msg_3", 10, "It runs on; I am done.", None),
    ]);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let out = w.chock_with_env(
        &["run", "--provider", "fake", "run the slow job"],
        &[("CHOCK_TEST_KEY", "sk-test-bg-key-1234567")],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let requests = server.join().unwrap();
    assert!(
        requests[1].contains("started in the background as bg-toolu_bg"),
        "{}",
        requests[1]
    );
    assert!(requests[2].contains("still running"), "{}", requests[2]);
    let events = w.events();
    let ended = events
        .iter()
        .position(|(k, _, d)| {
            k == "note" && d["background"] == "bg-toolu_bg" && d["about"] == "background_ended"
        })
        .expect("the background command's end is recorded");
    assert_eq!(events[ended].2["status"], 0);
    let end = events
        .iter()
        .position(|(k, _, _)| k == "session.end")
        .unwrap();
    assert!(ended < end);
    assert_decisions_precede_results(&events);
    w.assert_log_verifies();
}

#[test]
fn login_refuses_an_empty_key_and_a_name_that_is_not_a_file_name() {
    let w = World::new();
    let login = |provider: &str, input: &str| {
        w.chock_with_input(&["login", "--provider", provider], input.as_bytes())
    };
    let out = login("anthropic", "\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no key was given"),
        "{}",
        text(&out.stderr)
    );
    let out = login("../evil", "sk-ant-0123456789\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not usable"),
        "{}",
        text(&out.stderr)
    );
    assert!(!w.data.join("chock/evil").exists() && !w.data.join("chock/credentials").exists());
}

/// A key variable stays on the host even when the project's `[sandbox] env` names it: the agent reads a
/// call's environment, so a provider's `key_env` (any configured one, not only this run's) and the
/// search backend's are withheld, while other named variables pass.
#[test]
fn key_variables_never_reach_a_command_even_when_the_policy_passes_them() {
    let w = World::new();
    w.write(
        "chock.toml",
        "[sandbox]\nenv = [\"MY_PROVIDER_KEY\", \"MY_SEARCH_KEY\", \"HARMLESS_NAME\"]\n",
    );
    w.config_toml(
        "[providers.mine]\nkind = \"anthropic\"\nkey_env = \"MY_PROVIDER_KEY\"\n\
         [web_search]\nbackend = \"brave\"\nkey_env = \"MY_SEARCH_KEY\"\n",
    );
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "env" }
expect = { is_error = false, contains = "HARMLESS_NAME=visible" }
[[turn.call]]
tool = "run_command"
input = { command = "echo provider-secret-value" }
expect = { is_error = false }

[[turn]]
text = "done"
"#,
    );
    let out = w.chock_with_env(
        &["run", "--provider", &provider, "show the environment"],
        &[
            ("MY_PROVIDER_KEY", "provider-secret-value"),
            ("MY_SEARCH_KEY", "search-secret-value"),
            ("HARMLESS_NAME", "visible"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(log.contains("HARMLESS_NAME=visible"), "{log}");
    // Not in the call's environment; and a configured key's value that shows up anyway (here echoed
    // by the command itself) is redacted from the log.
    for leaked in ["provider-secret-value", "search-secret-value"] {
        assert!(!log.contains(leaked), "{leaked} reached the log: {log}");
    }
    assert!(
        !log.contains("MY_PROVIDER_KEY=") && !log.contains("MY_SEARCH_KEY="),
        "{log}"
    );
}

/// A recording can call read_output, fetch_url and web_search, so each has an offline path: the
/// background command's output is read back, and the network tools are decided (nobody to ask for the
/// fetch, no search backend configured) and answered as refusals the model can read.
#[test]
fn a_recording_reads_background_output_and_meets_the_network_tools() {
    let w = World::new();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo from-the-background", background = true }
expect = { is_error = false, contains = "bg-play_1_1" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 1" }
expect = { is_error = false }

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "from-the-background" }
[[turn.call]]
tool = "fetch_url"
input = { url = "http://127.0.0.1:9/" }
expect = { is_error = true }
[[turn.call]]
tool = "web_search"
input = { query = "chock" }
expect = { is_error = true }

[[turn]]
text = "done"
"#,
    );
    let out = w.chock(&["run", "--provider", &provider, "use every tool"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let events = w.events();
    for call in ["play_3_2", "play_3_3"] {
        let kinds: Vec<&str> = events
            .iter()
            .filter(|(_, c, _)| c.as_deref() == Some(call))
            .map(|(k, _, _)| k.as_str())
            .collect();
        assert_eq!(kinds.first(), Some(&"tool.call"), "{call}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"tool.result"), "{call}: {kinds:?}");
        assert!(kinds.contains(&"decision"), "{call}: {kinds:?}");
    }
}

/// `idle_timeout_secs` in a provider's table is how long its reply may stay silent: a reply that
/// stalls past it is asked again (a stall, not the cut the server's close would make later).
#[test]
fn a_providers_idle_timeout_from_config_toml_asks_again_when_a_reply_stalls() {
    let w = World::new();
    let (port, server) = anthropic_server(vec![
        Reply::Stall(std::time::Duration::from_secs(4)),
        reply("msg_1", 10, "Hello.", None),
    ]);
    w.config_toml(&format!(
        "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\n\
         key_env = \"CHOCK_TEST_KEY\"\nmodel = \"claude-sonnet-4-5\"\nidle_timeout_secs = 1\n"
    ));
    let out = w.chock_with_env(
        &["run", "--json", "--provider", "fake", "say hello"],
        &[("CHOCK_TEST_KEY", "sk-test-idle-key-12345")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let retry = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "model_retry")
        .expect("the stalled reply was asked again");
    assert!(
        retry["reason"].as_str().unwrap().contains("stalled"),
        "after one silent second, not at the server's close: {retry}"
    );
    assert_eq!(server.join().unwrap().len(), 2);

    w.config_toml("[providers.fake]\nkind = \"anthropic\"\nidle_timeout_secs = 0\n");
    let out = w.chock(&["run", "--provider", "fake", "say hello"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("providers.fake.idle_timeout_secs = 0"),
        "{}",
        text(&out.stderr)
    );
}
