//! An MCP server's `read` and `cache` go through the same checker as `[sandbox]` paths: each
//! hole below was open when only "absolute and not `/`" was asked (issue: the boundary, round
//! two). Every refusal names the file, the server, the field and the path.

mod common;

use std::path::{Path, PathBuf};

use chock_policy::{Policy, Sources};
use common::{load, source};

fn refused(project: &str, org: Option<&str>) -> String {
    load(Some(project), org)
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn a_server_cannot_read_chock_s_own_directories_nor_an_org_forbidden_path() {
    let err = refused(
        "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"/nonexistent/home/.config/chock\"]\n",
        None,
    );
    assert!(
        err.starts_with("chock.toml:1:1: ") && err.contains("mcp.servers.x.read: `/nonexistent/home/.config/chock` overlaps Chock's own directory"),
        "{err}"
    );
    let err = refused(
        "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"/nonexistent/xdg-state\"]\n",
        None,
    );
    assert!(
        err.contains("mcp.servers.x.read") && err.contains("Chock's own directory"),
        "{err}"
    );
    let err = refused(
        "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"/srv\"]\n",
        Some("[sandbox]\nforbid = [\"/srv/secrets\"]\n"),
    );
    assert!(
        err.contains("mcp.servers.x.read: `/srv` overlaps /srv/secrets, which the org bundle forbids at org.toml:2"),
        "{err}"
    );
}

#[test]
fn a_server_s_cache_cannot_be_the_real_project_nor_under_a_write_path() {
    let err = refused(
        "[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"/nonexistent/proj/node_modules\"]\n",
        None,
    );
    assert!(
        err.contains(
            "mcp.servers.x.cache: `/nonexistent/proj/node_modules` overlaps the real project"
        ),
        "{err}"
    );
    // A cache under a path every command may write: one command could swap it for a link.
    let err = refused(
        "[sandbox]\nwrite = [\"/opt/cargo\"]\n[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"/opt/cargo/npm\"]\n",
        None,
    );
    assert!(
        err.contains("mcp.servers.x.cache: `/opt/cargo/npm` lies under the write path /opt/cargo (sandbox.write)"),
        "{err}"
    );
    // And a `[sandbox]` path under a server's cache, the other way round.
    let err = refused(
        "[sandbox]\nread = [\"/opt/npm/bin\"]\n[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"/opt/npm\"]\n",
        None,
    );
    assert!(
        err.contains(
            "`/opt/npm/bin` (sandbox.read) lies under the write path /opt/npm (mcp.servers.x.cache)"
        ),
        "{err}"
    );
    // `~/` is expanded as in `[sandbox]`; an ordinary cache passes.
    let policy = load(
        Some("[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"~/.npm\"]\nread = [\"/opt/tools\"]\n"),
        None,
    )
    .unwrap();
    assert_eq!(
        policy.mcp_servers()[0].cache,
        vec![PathBuf::from("/nonexistent/home/.npm")]
    );
}

#[test]
fn a_cache_swapped_for_a_link_is_refused_when_the_server_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let cache = base.join("npm-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let text = format!(
        "[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"{}\"]\n",
        cache.display()
    );
    let policy = Policy::from_sources(Sources {
        project: Some(source("chock.toml", &text)),
        project_dir: Some(base.join("proj")),
        home: Some(base.join("home")),
        ..Sources::default()
    })
    .unwrap();
    let def = &policy.mcp_servers()[0];
    let around = policy.sandbox().declared();
    def.check_paths(Path::new("chock.toml"), policy.host_paths(), &around)
        .unwrap();
    // Between two sessions, something replaces the cache with a link to a secret.
    let secret = base.join("home/.ssh");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::remove_dir(&cache).unwrap();
    std::os::unix::fs::symlink(&secret, &cache).unwrap();
    let err = def
        .check_paths(Path::new("chock.toml"), policy.host_paths(), &around)
        .unwrap_err();
    assert_eq!((err.server.as_str(), err.field.as_str()), ("x", "cache"));
    assert!(
        err.to_string().contains(&format!(
            "`{}` is a symlink (to {})",
            cache.display(),
            secret.display()
        )),
        "{err}"
    );
}

#[test]
fn no_declared_write_path_may_reach_chock_s_binaries() {
    let bin = chock_policy::binaries_dir().unwrap();
    let parent = bin.parent().unwrap();
    let err = refused(
        &format!("[sandbox]\nwrite = [\"{}\"]\n", parent.display()),
        None,
    );
    assert!(err.contains("where Chock's own binaries are"), "{err}");
    let err = refused(
        &format!(
            "[mcp.servers.x]\ncommand = \"srv\"\ncache = [\"{}\"]\n",
            bin.display()
        ),
        None,
    );
    assert!(
        err.contains("mcp.servers.x.cache") && err.contains("Chock's own binaries"),
        "{err}"
    );
    // Reading them is harmless: nothing in them is secret.
    load(
        Some(&format!("[sandbox]\nread = [\"{}\"]\n", parent.display())),
        None,
    )
    .unwrap();
}

#[test]
fn a_server_answers_only_for_nesting_it_is_part_of() {
    use chock_policy::{Access, DeclaredPath};
    let declared = |path: &str, access, field: &str| DeclaredPath {
        path: PathBuf::from(path),
        access,
        field: field.into(),
    };
    let policy = load(
        Some(
            "[mcp.servers.x]\ncommand = \"srv\"\nread = [\"/opt/x\"]\ncache = [\"/opt/x-cache\"]\n",
        ),
        None,
    )
    .unwrap();
    let def = &policy.mcp_servers()[0];
    // Another server's cache under `[sandbox] write`: not this server's to answer for.
    let around = [
        declared("/opt/shared", Access::Write, "sandbox.write"),
        declared("/opt/shared/y", Access::Write, "mcp.servers.y.cache"),
    ];
    def.check_paths(Path::new("chock.toml"), policy.host_paths(), &around)
        .unwrap();
    // Another server's path under this one's cache is.
    let around = [declared(
        "/opt/x-cache/bin",
        Access::Read,
        "mcp.servers.y.read",
    )];
    let err = def
        .check_paths(Path::new("chock.toml"), policy.host_paths(), &around)
        .unwrap_err();
    assert_eq!(err.field, "cache");
    assert!(err.problem.contains("`/opt/x-cache/bin` (mcp.servers.y.read) lies under the write path /opt/x-cache (mcp.servers.x.cache)"), "{err}");
}
