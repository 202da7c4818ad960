//! `chock mcp list|test|trust` as the built binary in the hermetic test world, with the real
//! `mcp-server-time` (installed by `.ci/run` under /opt/chock-mcp; missing: fails in CI, skipped
//! elsewhere). A project's server is listed as not trusted and refused a start until `chock mcp
//! trust` (which needs a terminal or `--yes`); then its tools show with the decision each call
//! would get.

mod run_support;

use std::path::PathBuf;

use run_support::World;

fn prefix() -> PathBuf {
    std::env::var_os("CHOCK_MCP_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/chock-mcp"))
}

fn transcript(w: &World, runs: &[&[&str]]) -> String {
    let mut out = String::new();
    for args in runs {
        let o = w.chock(args);
        out.push_str(&format!(
            "$ chock {}\nstatus: {}\n--- stdout\n{}--- stderr\n{}\n",
            args.join(" "),
            o.status
                .code()
                .map_or_else(|| "signal".into(), |c| c.to_string()),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    out
}

#[test]
fn list_test_and_trust_a_project_server() {
    let command = prefix().join("venv/bin/mcp-server-time");
    if !command.exists() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "{} is missing: .ci/run installs it",
            command.display()
        );
        eprintln!("skipped: {} is not installed", command.display());
        return;
    }
    let w = World::new();
    w.write(
        "chock.toml",
        &format!(
            "[[rule]]\naction = \"mcp.time.tool.get_current_time\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"mcp.time.tool.convert_time\"\ndecision = \"deny\"\n\n\
             [mcp.servers.time]\ncommand = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\nread = [\"{}\"]\nstartup_timeout_secs = 60\n",
            command.display(),
            prefix().display()
        ),
    );
    let text = transcript(
        &w,
        &[
            &["mcp", "list"],
            &["mcp", "test", "time"],
            &["mcp", "trust", "time"],
            &["mcp", "trust", "time", "--yes"],
            &["mcp", "list"],
            &["mcp", "test", "time"],
            &["mcp", "test", "nope"],
        ],
    );
    let mut settings = w.settings();
    settings.add_filter(
        &run_support::regex_escape(&prefix().display().to_string()),
        "[MCP]",
    );
    settings.add_filter("[0-9a-f]{64}", "[SHA256]");
    settings.bind(|| insta::assert_snapshot!(text));
}

#[test]
fn a_bad_server_table_names_the_file_and_field() {
    let w = World::new();
    w.write(
        "chock.toml",
        "[mcp.servers.time]\ncommand = \"x\"\nenv = [\"LD_PRELOAD\"]\n",
    );
    let text = transcript(&w, &[&["mcp", "list"]]);
    w.settings().bind(|| insta::assert_snapshot!(text));
}
