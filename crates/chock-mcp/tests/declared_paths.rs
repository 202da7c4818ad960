//! What a server is given is checked again each time it starts (docs/mcp.md, "What a server may
//! be given"): a cache swapped for a link to a host directory since the last session is refused,
//! with the file, server, field and path, and the link's target is never bound; a variable the
//! person's configuration keeps a key in is refused as `[sandbox] env` withholds it.

mod support;

use std::path::Path;

use chock_mcp::{CallOutcome, McpError};
use chock_session::{Session, SessionOptions};
use serde_json::json;
use support::{World, hostile_script, python_server, user_server};

const ALLOW_ALL: &str = "[[rule]]\naction = \"mcp.hostile.tool.*\"\ndecision = \"allow\"\n\
                         [[rule]]\naction = \"mcp.hostile.network\"\ndecision = \"deny\"\n";

fn peek(world: &World, hub: &chock_mcp::McpHub, path: &Path) -> String {
    let pipeline = world.pipeline(None);
    let offered = hub.offered(&pipeline);
    let tool = offered.iter().find(|t| t.def().name == "peek").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let outcome = rt
        .block_on(tool.call(
            "c1",
            &json!({"path": path.display().to_string(), "port": 9}),
            &pipeline,
        ))
        .unwrap();
    match outcome {
        CallOutcome::Answered { text, .. } => text,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_cache_swapped_for_a_link_is_refused_at_the_next_start() {
    let host = tempfile::tempdir().unwrap();
    let base = host.path().canonicalize().unwrap();
    let cache = base.join("npm-cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("entry"), "cached\n").unwrap();
    let secret = base.join("dot-ssh");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("id_ed25519"), "the host's key\n").unwrap();
    let Some(mut raw) = python_server(&hostile_script(), &[]) else {
        return;
    };
    raw.cache = vec![cache.clone()];
    let server = user_server("hostile", &raw);

    // The first session: the cache is a directory, bound read-write.
    let world = World::new(ALLOW_ALL);
    let pipeline = world.pipeline(None);
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    assert!(peek(&world, &hub, &cache.join("entry")).contains("cached"));
    drop(hub);

    // Between sessions, something that could write beside it swaps the cache for a link.
    std::fs::rename(&cache, base.join("npm-cache.old")).unwrap();
    std::os::unix::fs::symlink(&secret, &cache).unwrap();

    let world = World::new(ALLOW_ALL);
    let pipeline = world.pipeline(None);
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    assert!(hub.servers().is_empty(), "the server started over a link");
    let [(name, err)] = hub.failures() else {
        panic!("{:?}", hub.failures());
    };
    assert_eq!(name, "hostile");
    assert!(matches!(err, McpError::Refused { .. }), "{err:?}");
    let expected = format!(
        "MCP server `hostile` refused: config.toml: mcp.servers.hostile.cache: `{}` is a symlink (to {})",
        cache.display(),
        secret.display()
    );
    assert!(err.to_string().starts_with(&expected), "{err}");
    let log = std::fs::read_to_string(world.session.log().dir().join("log.jsonl")).unwrap();
    assert!(
        log.contains("\"refused\"") && log.contains("is a symlink"),
        "{log}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_server_s_env_cannot_name_a_configured_key_variable() {
    let Some(mut raw) = python_server(&hostile_script(), &[]) else {
        return;
    };
    raw.env = vec!["MY_PROVIDER_KEY".into()];
    let server = user_server("hostile", &raw);
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("chock.toml"), ALLOW_ALL).unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let session = Session::open(
        project.path(),
        SessionOptions {
            sessions_root: Some(sessions.path().to_path_buf()),
            withheld_env: vec!["MY_PROVIDER_KEY".into()],
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let world = World {
        project,
        sessions,
        data: tempfile::tempdir().unwrap(),
        session,
        runtime: Some(support::servers_runtime()),
    };
    let pipeline = world.pipeline(None);
    let hub = world.start(std::slice::from_ref(&server), &pipeline, false, None);
    assert!(hub.servers().is_empty());
    let [(_, err)] = hub.failures() else {
        panic!("{:?}", hub.failures());
    };
    assert!(
        err.to_string()
            .contains("config.toml: mcp.servers.hostile.env: `MY_PROVIDER_KEY` holds a key your configuration names"),
        "{err}"
    );
}
