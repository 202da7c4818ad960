//! A project's stdio server runs what the person trusted, never what the agent wrote: a trusted
//! `python srv.py` starts from the real project (read-only), whatever the session's workspace
//! holds; the files its command line names are pinned by content, so an edit of the real
//! `srv.py` is refused as "changed" until it is trusted again; and it cannot write the project.
//! Real processes throughout: the session's sandbox, a confined call as the agent, the real `mcp`
//! Python SDK (installed by `.ci/run`).

mod support;

use chock_mcp::{CallOutcome, McpError, McpHub};
use chock_session::{CallOptions, NoApprover};
use serde_json::json;
use support::{World, prefix, python};

const SERVER: &str = r#"import os
from mcp.server.mcpserver import MCPServer

VERSION = "the real v1"
server = MCPServer("chock-test-project")


@server.tool(description="Says which srv.py runs, and where.")
def which() -> str:
    return VERSION + " in " + os.getcwd()


@server.tool(description="Tries to write a file of the project.")
def scribble(name: str) -> str:
    try:
        with open(name, "w") as f:
            f.write("from the server")
        return "wrote " + name
    except OSError as e:
        return "write failed: " + e.__class__.__name__


if __name__ == "__main__":
    server.run("stdio")
"#;

fn policy(python: &std::path::Path) -> String {
    format!(
        "[mcp.servers.proj]\ncommand = \"{}\"\nargs = [\"srv.py\"]\nread = [\"{}\"]\n\
         startup_timeout_secs = 60\n\
         [[rule]]\naction = \"mcp.proj.tool.*\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.proj.network\"\ndecision = \"deny\"\n\
         [[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n",
        python.display(),
        prefix().display()
    )
}

/// Calls `tool` of the only running server; its answer.
fn call(hub: &McpHub, world: &World, tool: &str, args: &serde_json::Value) -> String {
    let pipeline = world.pipeline(None);
    let offered = hub.offered(&pipeline);
    let tool = offered
        .iter()
        .find(|t| t.def().name == tool)
        .unwrap_or_else(|| panic!("`{tool}` is not offered; failures: {:?}", hub.failures()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    match rt.block_on(tool.call("c", args, &pipeline)).unwrap() {
        CallOutcome::Answered { text, .. } => text,
        other => panic!("expected an answer, got {other:?}"),
    }
}

/// A confined `sh -c script` of the session: the agent at work in its workspace.
fn agent(world: &World, script: &str) -> String {
    let argv = ["sh", "-c", script].map(String::from).to_vec();
    // The session's one confined call, awaited on a runtime of this call's own (the test is
    // not async).
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(
            world
                .session
                .confined_call_async(&argv, &CallOptions::default(), &NoApprover),
        )
        .unwrap();
    let chock_session::CallOutcome::Ran { stdout, .. } = result.outcome else {
        panic!("the agent's call did not run: {:?}", result.outcome);
    };
    String::from_utf8_lossy(&stdout).into_owned()
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_trusted_project_server_runs_the_real_project_and_a_changed_file_is_refused() {
    let Some(python) = python() else {
        return;
    };
    let world = World::new(&policy(&python));
    let real = world.project.path().join("srv.py");
    std::fs::write(&real, SERVER).unwrap();
    let pipeline = world.pipeline(None);

    // `chock mcp trust`: the definition and `srv.py`'s content are recorded.
    let mut hub = world.start(&world.project_servers(), &pipeline, true, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let said = call(&hub, &world, "which", &json!({}));
    assert!(said.starts_with("the real v1 in "), "{said}");
    world.stop(&mut hub, "trusted");
    drop(hub);
    let record = std::fs::read_to_string(world.trust_path()).unwrap();
    assert!(record.contains("\"srv.py\": \"sha256:"), "{record}");

    // The agent rewrites srv.py in its workspace.
    let seen = agent(
        &world,
        "sed -i 's/the real v1/the agent v1/' srv.py && cat srv.py",
    );
    assert!(seen.contains("the agent v1"), "{seen}");
    assert!(
        std::fs::read_to_string(&real)
            .unwrap()
            .contains("the real v1")
    );

    // The next start (a resume's, a fork's) runs the real project's srv.py, from the project.
    let hub = world.start(&world.project_servers(), &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let said = call(&hub, &world, "which", &json!({}));
    assert_eq!(
        said,
        format!("the real v1 in {}", world.session.project().display())
    );

    // It cannot write the project: not a new file, not its own srv.py; and the agent's
    // workspace is not where its writes would go either.
    for name in ["NOTES", "srv.py"] {
        let said = call(&hub, &world, "scribble", &json!({ "name": name }));
        assert!(said.starts_with("write failed: "), "{name}: {said}");
    }
    drop(hub);
    assert!(!world.project.path().join("NOTES").exists());
    assert_eq!(std::fs::read_to_string(&real).unwrap(), SERVER);
    let diff = world.session.workspace().diff().unwrap();
    assert!(
        diff.files.iter().all(|f| f.path != "NOTES"),
        "{:?}",
        diff.files
    );

    // A change of the real srv.py (an applied diff, say) is a changed server: refused, logged,
    // and the error names the file.
    std::fs::write(&real, SERVER.replace("the real v1", "the real v2")).unwrap();
    let hub = world.start(&world.project_servers(), &pipeline, false, None);
    assert!(hub.servers().is_empty());
    let (name, err) = &hub.failures()[0];
    assert_eq!(name, "proj");
    assert!(matches!(err, McpError::FileChanged { .. }), "{err:?}");
    assert_eq!(
        chock_mcp::server::is_untrusted(err),
        Some(chock_mcp::TrustState::Changed)
    );
    let words = err.to_string();
    assert!(
        words.contains("`proj`")
            && words.contains("`srv.py`")
            && words.contains("chock mcp trust proj"),
        "{words}"
    );
    let refused = world
        .events()
        .into_iter()
        .rev()
        .find(|e| e.kind.to_string() == "mcp.server" && e.data["phase"] == "refused");
    let refused = refused.expect("an mcp.server refused event");
    assert!(
        refused.data["reason"]
            .as_str()
            .unwrap()
            .contains("`srv.py`"),
        "{:?}",
        refused.data
    );
    drop(hub);

    // Trusted again, it starts with the new file.
    let hub = world.start(&world.project_servers(), &pipeline, true, None);
    let said = call(&hub, &world, "which", &json!({}));
    assert!(said.starts_with("the real v2 in "), "{said}");
    drop(hub);

    // A pinned file that is gone is a change too.
    std::fs::remove_file(&real).unwrap();
    let hub = world.start(&world.project_servers(), &pipeline, false, None);
    assert!(hub.servers().is_empty());
    let words = hub.failures()[0].1.to_string();
    assert!(
        words.contains("`srv.py`") && words.contains("gone"),
        "{words}"
    );
}

/// A trusted `srv.py` that, like a `uvx` or `npx` server running from its cache, imports what a
/// host directory holds: `helper.py` there, else its own version.
fn importing_server(shared: &std::path::Path) -> String {
    SERVER.replace(
        "VERSION = \"the real v1\"\n",
        &format!(
            "import sys\nsys.path.insert(0, {:?})\ntry:\n    from helper import VERSION\n\
             except ImportError:\n    VERSION = \"the real v1\"\n",
            shared.display().to_string()
        ),
    )
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_trusted_server_sees_no_place_the_agents_commands_write() {
    let Some(python) = python() else {
        return;
    };
    // The project lets the agent's commands write a host directory (a package cache, say).
    let shared = tempfile::tempdir().unwrap();
    let shared = shared.path().canonicalize().unwrap();
    let sandbox = format!("[sandbox]\nwrite = [\"{}\"]\n", shared.display());
    let world = World::new(&format!("{sandbox}{}", policy(&python)));
    std::fs::write(
        world.project.path().join("srv.py"),
        importing_server(&shared),
    )
    .unwrap();
    let pipeline = world.pipeline(None);
    let hub = world.start(&world.project_servers(), &pipeline, true, None);
    let said = call(&hub, &world, "which", &json!({}));
    assert!(said.starts_with("the real v1 in "), "{said}");
    drop(hub);

    // The agent plants a module there; the file lands on the host.
    let planted = shared.join("helper.py");
    agent(
        &world,
        &format!("echo 'VERSION = \"the agent v1\"' > {}", planted.display()),
    );
    assert!(
        std::fs::read_to_string(&planted)
            .unwrap()
            .contains("the agent v1")
    );

    // The trusted server's next start runs what the person trusted: the agent's write path is
    // not in its sandbox.
    let hub = world.start(&world.project_servers(), &pipeline, false, None);
    let said = call(&hub, &world, "which", &json!({}));
    assert!(said.starts_with("the real v1 in "), "{said}");
    drop(hub);

    // A server whose own cache is a place the agent writes does not start, and says why (a cache
    // strictly inside one is refused sooner, when chock.toml is read: the one checker's nesting).
    let cached = format!(
        "{sandbox}{}",
        policy(&python).replace(
            "startup_timeout_secs",
            &format!("cache = [\"{}\"]\nstartup_timeout_secs", shared.display())
        )
    );
    let world = World::new(&cached);
    std::fs::write(
        world.project.path().join("srv.py"),
        importing_server(&shared),
    )
    .unwrap();
    let pipeline = world.pipeline(None);
    let hub = world.start(&world.project_servers(), &pipeline, true, None);
    assert!(hub.servers().is_empty());
    let words = hub.failures()[0].1.to_string();
    assert!(
        words.contains("[sandbox] write")
            && words.contains(&shared.display().to_string())
            && words.contains("its write path"),
        "{words}"
    );
}
