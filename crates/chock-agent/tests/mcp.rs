//! MCP tools in a whole agent session (the offline player as the model, everything else real):
//! the tools register in the registry under their model names without the loop knowing; a tool the
//! table denies is not among the tools the model can call; a server's sampling request is a model
//! call of the session, logged as `model.request`/`model.response` with its cost like the agent's
//! own. The servers are the real `mcp-server-time` and the MCP tests' own hostile.py, installed by
//! `.ci/run` under /opt/chock-mcp (missing: fails in CI, skipped elsewhere).

use std::path::{Path, PathBuf};

use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_log::read_events;
use chock_policy::mcp::RawServer;

fn prefix() -> PathBuf {
    std::env::var_os("CHOCK_MCP_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/chock-mcp"))
}

fn installed(relative: &str) -> Option<PathBuf> {
    let path = prefix().join(relative);
    chock_test_support::installed(&path).then_some(path)
}

fn config(servers: &[(&str, RawServer)]) -> Config {
    let mut config = Config::default();
    for (name, raw) in servers {
        config
            .mcp_servers
            .push(raw.check(Path::new("config.toml"), name).unwrap());
    }
    config
}

fn run(project: &Path, dir: &Path, config: Config, script: &str) -> PathBuf {
    let (dir, result) = try_run(project, dir, config, script);
    result.unwrap();
    dir
}

/// Runs one task; the task's result (the player fails a call of a tool the request did not offer).
fn try_run(
    project: &Path,
    dir: &Path,
    config: Config,
    script: &str,
) -> (PathBuf, Result<(), chock_agent::agent::AgentError>) {
    let script_path = dir.join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut session = SessionBuilder::new(config)
        .provider(Some(format!("script:{}", script_path.display())))
        .project(Some(project.to_path_buf()))
        .sessions_root(Some(dir.join("sessions")))
        .mcp_trust_file(dir.join("mcp-trust.json"))
        .build()
        .unwrap();
    // The servers start on the runtime that then drives the session (a front end's).
    rt.block_on(session.start_mcp()).unwrap();
    let log_dir = session.log().dir().to_path_buf();
    let result = rt.block_on(session.submit("use the clock")).map(|_| ());
    let _ = rt.block_on(session.end(chock_protocol::log::EndReason::Done));
    (log_dir, result)
}

#[test]
fn mcp_tools_register_and_a_denied_one_is_not_offered() {
    let Some(time) = installed("venv/bin/mcp-server-time") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        "[[rule]]\naction = \"mcp.time.tool.get_current_time\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.time.tool.convert_time\"\ndecision = \"deny\"\n\
         [[rule]]\naction = \"mcp.time.network\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    let server = RawServer {
        command: Some(time.display().to_string()),
        read: vec![prefix()],
        startup_timeout_secs: Some(60),
        ..RawServer::default()
    };
    let script = r#"
tools = ["mcp__time__get_current_time", "mcp__time__convert_time"]
[[turn]]
[[turn.call]]
tool = "mcp__time__get_current_time"
input = { timezone = "UTC" }
expect = { is_error = false, contains = "UTC" }
[[turn]]
text = "done"
"#;
    let dir = run(
        &project,
        tmp.path(),
        config(&[("time", server.clone())]),
        script,
    );
    let kinds: Vec<String> = read_events(&dir)
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert!(kinds.contains(&"mcp.server".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"mcp.definition".to_string()), "{kinds:?}");

    // The denied tool is not in the request's tools: the player (checking what the model was
    // offered) refuses to call it.
    let denied = r#"
tools = ["mcp__time__convert_time"]
[[turn]]
[[turn.call]]
tool = "mcp__time__convert_time"
input = { source_timezone = "UTC", time = "12:00", target_timezone = "Asia/Tokyo" }
[[turn]]
text = "done"
"#;
    let other = tmp.path().join("second");
    std::fs::create_dir(&other).unwrap();
    let (_, result) = try_run(&project, &other, config(&[("time", server)]), denied);
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("`mcp__time__convert_time`, which this session does not offer"),
        "{err}"
    );
}

#[test]
fn sampling_is_charged_like_the_agents_own_model_calls() {
    let Some(python) = installed("venv/bin/python") else {
        return;
    };
    let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../chock-mcp/tests/servers");
    let script_dir = script_dir.canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        "[[rule]]\naction = \"mcp.hostile.tool.ask_model\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.hostile.sampling\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.hostile.network\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    let server = RawServer {
        command: Some(python.display().to_string()),
        args: vec![script_dir.join("hostile.py").display().to_string()],
        read: vec![prefix(), script_dir],
        startup_timeout_secs: Some(60),
        ..RawServer::default()
    };
    // The player answers a request without tools (the sampling call) with `review`.
    let script = r#"
tools = ["mcp__hostile__ask_model"]
review = "forty-two"
[[turn]]
[[turn.call]]
tool = "mcp__hostile__ask_model"
input = { question = "six times seven?" }
expect = { is_error = false, contains = "model said: forty-two" }
[[turn]]
text = "done"
"#;
    let dir = run(&project, tmp.path(), config(&[("hostile", server)]), script);
    let events = read_events(&dir).unwrap();
    let at = events
        .iter()
        .position(|e| e.kind.to_string() == "mcp.sampling")
        .expect("the sampling request is logged");
    assert_eq!(events[at].data["called"], true);
    let request = events[at..]
        .iter()
        .find(|e| e.kind.to_string() == "model.request")
        .expect("the sampling call is a model.request of the session");
    assert_eq!(request.data["new_message"]["mcp_sampling"], "hostile");
    let response = events[at..]
        .iter()
        .find(|e| e.kind.to_string() == "model.response")
        .expect("and a model.response with its cost");
    assert!(
        response.data.get("cost_usd").is_some(),
        "{:?}",
        response.data
    );
}
