//! The real third-party `mcp-server-time` (PyPI), confined by Chock: a project's server starts
//! only once trusted; a call the table allows runs, one it puts to a person runs or not by the
//! answer (the question shows the raw server, tool and arguments), a denied tool is never
//! offered, and a ratchet that denies mid-session refuses the next call.

mod support;

use chock_mcp::{CallOutcome, McpHub};
use chock_policy::Decision;
use serde_json::json;
use support::{Person, World, installed, prefix};

fn chock_toml(rules: &str) -> Option<String> {
    let command = installed("venv/bin/mcp-server-time")?;
    Some(format!(
        "{rules}\n[mcp.servers.time]\ncommand = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\nread = [\"{}\"]\nstartup_timeout_secs = 60\n",
        command.display(),
        prefix().display()
    ))
}

const RULES: &str = "[[rule]]\naction = \"mcp.time.tool.get_current_time\"\ndecision = \"allow\"\n\
                     [[rule]]\naction = \"mcp.time.tool.convert_time\"\ndecision = \"ask\"\n";

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_project_server_starts_only_once_its_definition_is_trusted() {
    let Some(toml) = chock_toml(RULES) else {
        return;
    };
    let world = World::new(&toml);
    let servers = world.project_servers();
    assert_eq!(servers.len(), 1);
    let pipeline = world.pipeline(None);
    let hub = world.start(&servers, &pipeline, false, None);
    assert!(
        hub.servers().is_empty(),
        "an untrusted server must not start"
    );
    let (name, err) = &hub.failures()[0];
    assert_eq!(name, "time");
    assert!(err.to_string().contains("chock mcp trust time"), "{err}");
    assert!(world.kinds().contains(&"mcp.server".to_string()));
    assert!(
        !world.kinds().iter().any(|k| k == "decision"),
        "nothing was even decided"
    );
    drop(hub);

    // Trusting records the definition's hash outside the project; the next start needs nothing.
    let hub = world.start(&servers, &pipeline, true, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    drop(hub);
    let hub = world.start(&servers, &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    drop(hub);

    // A changed definition (another argument) is a new definition: not trusted.
    let changed = toml.replace("\"UTC\"", "\"Europe/Paris\"");
    std::fs::write(world.project.path().join("chock.toml"), changed).unwrap();
    let policy = chock_policy::Policy::load(world.project.path()).unwrap();
    let servers = chock_mcp::configured(&policy, world.project.path(), &[], None);
    let hub = world.start(&servers, &pipeline, false, None);
    assert!(hub.servers().is_empty());
    assert!(
        hub.failures()[0]
            .1
            .to_string()
            .contains("changed since trusted")
    );
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn calls_are_allowed_asked_and_denied_by_the_table() {
    let Some(toml) = chock_toml(RULES) else {
        return;
    };
    let world = World::new(&toml);
    let servers = world.project_servers();
    let person = Person::new(true);
    let pipeline = world.pipeline(Some(person.clone()));
    let hub = world.start(&servers, &pipeline, true, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let names: Vec<&str> = offered.iter().map(|t| t.model_name()).collect();
    assert_eq!(
        names,
        ["mcp__time__get_current_time", "mcp__time__convert_time"]
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let now = &offered[0];
    let allowed = rt
        .block_on(now.call("c1", &json!({"timezone": "UTC"}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = allowed else {
        panic!("allowed call refused: {allowed:?}")
    };
    assert!(!is_error, "{text}");
    assert!(text.contains("UTC"), "{text}");
    // The person was asked one thing so far: whether the server may have the network.
    let asked: Vec<_> = person
        .questions()
        .iter()
        .filter_map(|q| q.action.clone())
        .collect();
    assert_eq!(asked, ["mcp.time.network"], "an allowed call asks nobody");

    let convert = &offered[1];
    let args = json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"});
    let asked = rt.block_on(convert.call("c2", &args, &pipeline)).unwrap();
    assert!(
        matches!(
            asked,
            CallOutcome::Answered {
                is_error: false,
                ..
            }
        ),
        "{asked:?}"
    );
    let q = &person.questions()[1];
    assert_eq!(q.action.as_deref(), Some("mcp.time.tool.convert_time"));
    assert!(
        q.text.contains("Asia/Tokyo") && q.text.contains("`time`"),
        "{}",
        q.text
    );
    assert!(
        q.context
            .iter()
            .any(|l| l.contains("\"target_timezone\":\"Asia/Tokyo\"")),
        "{:?}",
        q.context
    );

    // A person's no refuses: the server never hears of it.
    let no = Person::new(false);
    let refusing = world.pipeline(Some(no.clone()));
    let refused = rt.block_on(convert.call("c3", &args, &refusing)).unwrap();
    assert!(
        matches!(refused, CallOutcome::Refused { .. }),
        "{refused:?}"
    );

    // Nobody to ask: a tool that asks is not offered at all.
    let alone = world.pipeline(None);
    let names: Vec<String> = hub
        .offered(&alone)
        .iter()
        .map(|t| t.model_name().to_string())
        .collect();
    assert_eq!(names, ["mcp__time__get_current_time"]);

    // The ratchet denies mid-session: the tool offered before is refused by the table.
    pipeline
        .policy()
        .write()
        .unwrap()
        .restrict("mcp.time.*", Decision::Deny)
        .unwrap();
    let denied = rt
        .block_on(now.call("c4", &json!({"timezone": "UTC"}), &pipeline))
        .unwrap();
    let CallOutcome::Refused { reason } = denied else {
        panic!("{denied:?}")
    };
    assert!(reason.contains("denied by ratchet"), "{reason}");
    assert!(
        hub.offered(&pipeline).is_empty(),
        "denied tools are not offered"
    );

    // Each call's decision is in the log, in the call's name.
    let decisions: Vec<_> = world
        .events()
        .into_iter()
        .filter(|e| e.kind.to_string() == "decision")
        .filter_map(|e| e.call_id)
        .collect();
    for id in ["c1", "c2", "c3", "c4"] {
        assert!(
            decisions.iter().any(|d| d == id),
            "{id} has no decision: {decisions:?}"
        );
    }
    let _ = McpHub::decision_for;
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_denied_tool_is_never_offered() {
    let rules = "[[rule]]\naction = \"mcp.time.tool.*\"\ndecision = \"allow\"\n\
                 [[rule]]\naction = \"mcp.time.tool.convert_time\"\ndecision = \"deny\"\n";
    let Some(toml) = chock_toml(rules) else {
        return;
    };
    let world = World::new(&toml);
    let pipeline = world.pipeline(Some(Person::new(true)));
    let hub = world.start(&world.project_servers(), &pipeline, true, None);
    let names: Vec<String> = hub
        .offered(&pipeline)
        .iter()
        .map(|t| t.model_name().to_string())
        .collect();
    assert_eq!(names, ["mcp__time__get_current_time"]);
}
