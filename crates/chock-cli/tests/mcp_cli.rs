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
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn list_test_and_trust_a_project_server() {
    let command = prefix().join("venv/bin/mcp-server-time");
    if !chock_test_support::installed(&command) {
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

/// A server's `env` naming a variable the configuration keeps a key in is refused when it would
/// start (`chock mcp test` too), as `[sandbox] env` withholds it: the key never reaches it.
#[test]
fn a_server_naming_a_configured_key_variable_is_refused_at_start() {
    let w = World::new();
    w.config_toml(
        "[providers.mine]\nkind = \"anthropic\"\nkey_env = \"MY_PROVIDER_KEY\"\n\
         [mcp.servers.leaky]\ncommand = \"/bin/cat\"\nenv = [\"MY_PROVIDER_KEY\"]\n",
    );
    let out = w.chock(&["mcp", "test", "leaky"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("MCP server `leaky` refused: ")
            && stderr.contains("config.toml: mcp.servers.leaky.env: `MY_PROVIDER_KEY` holds a key your configuration names"),
        "{stderr}"
    );
}

/// server-everything's streamable HTTP transport on a free loopback port, killed when dropped.
struct EverythingHttp {
    child: std::process::Child,
    port: u16,
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn everything_http() -> Option<EverythingHttp> {
    use std::io::BufRead;
    let entry =
        prefix().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !chock_test_support::installed(&entry) {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = std::process::Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start node");
    let stderr = child.stderr.take().expect("its stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("listening on port") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("server-everything listens");
    Some(EverythingHttp { child, port })
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn list_and_test_a_streamable_http_server() {
    let Some(server) = everything_http() else {
        return;
    };
    let port = server.port;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let denied_port = closed.local_addr().expect("addr").port();
    let w = World::new();
    w.write(
        "chock.toml",
        &format!(
            "[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"net.connect.1.0.0.127.{denied_port}\"\ndecision = \"deny\"\n\n\
             [[rule]]\naction = \"mcp.everything.tool.echo\"\ndecision = \"allow\"\n\n\
             [mcp.servers.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
             [mcp.servers.blocked]\nurl = \"http://127.0.0.1:{denied_port}/mcp\"\n"
        ),
    );
    let run = |args: &[&str]| {
        let o = w.chock(args);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, _) = run(&["mcp", "list"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("how:     http: http://127.0.0.1:{port}/mcp")),
        "{out}"
    );
    assert!(
        out.contains(&format!("reached: allow as `net.connect.1.0.0.127.{port}`")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "reached: deny as `net.connect.1.0.0.127.{denied_port}`"
        )),
        "{out}"
    );
    let (code, out, err) = run(&["mcp", "trust", "everything", "--yes"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = run(&["mcp", "test", "everything"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!(
            "everything: reached at http://127.0.0.1:{port}/mcp through the broker"
        )),
        "{out}"
    );
    assert!(
        out.contains("tool echo: allow as `mcp.everything.tool.echo` (approved"),
        "{out}"
    );
    assert!(out.contains("tool get-sum: ask as"), "{out}");

    let (code, _, _) = run(&["mcp", "trust", "blocked", "--yes"]);
    assert_ne!(code, Some(0), "a denied destination does not start");
    let (code, out, err) = run(&["mcp", "test", "blocked"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(
        err.contains("MCP server `blocked` did not start")
            && err.contains(&format!("net.connect.1.0.0.127.{denied_port}"))
            && err.contains("chock.toml"),
        "{err}"
    );
    closed.set_nonblocking(true).expect("nonblocking");
    assert!(
        closed.accept().is_err(),
        "nothing connected to the denied destination"
    );
}

/// The events of the session in `dir`: (kind, data).
fn events_of(dir: &std::path::Path) -> Vec<(String, serde_json::Value)> {
    std::fs::read_to_string(dir.join("log.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["kind"].as_str().unwrap().to_string(), v["data"].clone())
        })
        .collect()
}

const PROJECT_SERVER: &str = r#"import os
from mcp.server.mcpserver import MCPServer

VERSION = "the real v1"
server = MCPServer("chock-test-project")


@server.tool(description="Says which srv.py runs.")
def which() -> str:
    return VERSION


if __name__ == "__main__":
    server.run("stdio")
"#;

/// A trusted project server `python srv.py`: the agent rewrites `srv.py` in its workspace, and
/// the resumed session's server is still the real project's; an edit of the real `srv.py` is
/// "changed" (listed, refused by `chock mcp test` and by the next resume, naming the file) until
/// it is trusted again.
#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_project_server_runs_the_trusted_file_across_a_resume() {
    let python = prefix().join("venv/bin/python");
    if !chock_test_support::installed(&python) {
        return;
    }
    let w = World::with_git_project();
    w.write(
        "chock.toml",
        &format!(
            "[[rule]]\naction = \"mcp.proj.tool.*\"\ndecision = \"allow\"\n\n\
             [[rule]]\naction = \"mcp.proj.network\"\ndecision = \"deny\"\n\n\
             [mcp.servers.proj]\ncommand = \"{}\"\nargs = [\"srv.py\"]\nread = [\"{}\"]\nstartup_timeout_secs = 60\n",
            python.display(),
            prefix().display()
        ),
    );
    w.write("srv.py", PROJECT_SERVER);
    w.git(&["add", "-A"]);
    w.git(&["commit", "-q", "-m", "a server"]);

    let trusted = w.chock(&["mcp", "trust", "proj", "--yes"]);
    let said = run_support::text(&trusted.stdout);
    assert!(
        trusted.status.success(),
        "{said}{}",
        run_support::text(&trusted.stderr)
    );
    assert!(said.contains("  file:     srv.py sha256:"), "{said}");

    let script = w.script(
        r#"
tools = ["mcp__proj__which"]
[[turn]]
text = "asking the server, then rewriting it"
[[turn.call]]
tool = "mcp__proj__which"
input = {}
expect = { contains = "the real v1" }
[[turn.call]]
tool = "write_file"
input = { path = "srv.py", content = "import sys\nsys.exit('the agent wrote this')\n" }

[[turn]]
text = "first task done"

[[turn]]
text = "asking again after the resume"
[[turn.call]]
tool = "mcp__proj__which"
input = {}
expect = { contains = "the real v1" }

[[turn]]
text = "second task done"
"#,
    );
    let before = w.sessions();
    let first = w.chock(&["run", "--provider", &script, "use the server"]);
    assert!(
        first.status.success(),
        "{}",
        run_support::text(&first.stderr)
    );
    let session = w
        .sessions()
        .into_iter()
        .find(|s| !before.contains(s))
        .expect("the run's session");
    let id = session.file_name().unwrap().to_string_lossy().into_owned();
    let second = w.chock(&["run", "--provider", &script, "--resume", &id, "again"]);
    assert!(
        second.status.success(),
        "{}{}",
        run_support::text(&second.stdout),
        run_support::text(&second.stderr)
    );
    let answers: Vec<String> = events_of(&session)
        .into_iter()
        .filter(|(k, _)| k == "tool.result")
        .map(|(_, d)| d.to_string())
        .filter(|d| d.contains("the real v1"))
        .collect();
    assert_eq!(
        answers.len(),
        2,
        "both runs asked the real server: {answers:?}"
    );
    let started = events_of(&session)
        .into_iter()
        .filter(|(k, d)| k == "mcp.server" && d["phase"] == "started")
        .count();
    assert_eq!(started, 2, "the server started in each run");
    assert_eq!(
        w.read("srv.py"),
        PROJECT_SERVER,
        "the real srv.py is untouched"
    );

    // The real srv.py changes (an applied diff, an edit): changed until trusted again.
    w.write(
        "srv.py",
        &PROJECT_SERVER.replace("the real v1", "the real v2"),
    );
    let listed = run_support::text(&w.chock(&["mcp", "list"]).stdout);
    assert!(
        listed.contains("trust:   its file `srv.py` in the project differs from the one trusted"),
        "{listed}"
    );
    let tested = w.chock(&["mcp", "test", "proj"]);
    assert_eq!(tested.status.code(), Some(123));
    let err = run_support::text(&tested.stderr);
    assert!(
        err.contains("MCP server `proj` is changed since trusted: its file `srv.py`")
            && err.contains("run `chock mcp trust proj`"),
        "{err}"
    );
    let third = w.chock(&["run", "--provider", "demo", "--resume", &id, "once more"]);
    let refused = events_of(&session).into_iter().any(|(k, d)| {
        k == "mcp.server"
            && d["phase"] == "refused"
            && d["reason"].as_str().is_some_and(|r| r.contains("`srv.py`"))
    });
    assert!(
        refused,
        "the resume refused the changed server: {}",
        run_support::text(&third.stderr)
    );
    let again = w.chock(&["mcp", "trust", "proj", "--yes"]);
    assert!(
        again.status.success(),
        "{}",
        run_support::text(&again.stderr)
    );
    let tested = w.chock(&["mcp", "test", "proj"]);
    assert!(
        tested.status.success(),
        "{}",
        run_support::text(&tested.stderr)
    );
}

/// An MCP server's tool name reaches the person's terminal through the one escaper, in
/// `chock mcp trust` and `chock mcp test`: a name that would write the clipboard (OSC 52), erase
/// and redraw its line and reverse what follows is shown escaped.
#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn a_hostile_tool_name_is_shown_escaped() {
    let python = prefix().join("venv/bin/python");
    if !chock_test_support::installed(&python) {
        return;
    }
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let w = World::new();
    w.write(
        "chock.toml",
        &format!(
            "[mcp.servers.masq]\ncommand = \"{}\"\nargs = [\"{}\"]\nread = [\"{}\", \"{}\"]\nstartup_timeout_secs = 60\n",
            python.display(),
            fixtures.join("mcp_masquerade.py").display(),
            prefix().display(),
            fixtures.display()
        ),
    );
    for args in [
        &["mcp", "trust", "masq", "--yes"][..],
        &["mcp", "test", "masq"][..],
    ] {
        let o = w.chock(args);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {out}{err}");
        for (stream, text) in [("stdout", &out), ("stderr", &err)] {
            let raw: Vec<char> = text
                .chars()
                .filter(|&c| chock_protocol::text::must_escape(c) && c != '\n')
                .collect();
            assert_eq!(raw, Vec::<char>::new(), "{args:?} {stream}: {text:?}");
        }
        let line = out
            .lines()
            .find(|l| l.starts_with("  tool "))
            .unwrap_or_else(|| panic!("{args:?}: the tool is listed: {out}{err}"));
        assert!(
            line.starts_with(r"  tool ok\u{1b}]52;c;ZXZpbA==\u{7}\r\u{1b}[2Kfine\u{202e}txt"),
            "{args:?}: {line}"
        );
    }
}
