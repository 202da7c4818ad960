//! One test per rule of `chock migrate`, over fixtures written from each harness's documented
//! file formats (tests/fixtures).

use std::path::{Path, PathBuf};

use chock_migrate::{Harness, Input, Migration, Options, Row, read, render, vet};
use chock_policy::{Decision, Policy, Source, Sources};
use sha2::{Digest, Sha256};

fn fixture(harness: &str, file: &str) -> Input {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(harness)
        .join(file);
    let bytes = std::fs::read(&path).unwrap();
    Input { path, bytes }
}

fn all(harness: Harness) -> Vec<Input> {
    let files: &[&str] = match harness {
        Harness::ClaudeCode => &["settings.json", ".mcp.json"],
        Harness::Codex => &["config.toml"],
        Harness::OpenCode => &["opencode.json"],
        Harness::Zed => &["settings.json"],
        Harness::OhMyPi => &["mcp.json"],
    };
    files.iter().map(|f| fixture(harness.name(), f)).collect()
}

fn migrate(harness: Harness, options: &Options) -> Migration {
    read(harness, &all(harness), options).unwrap()
}

fn decision(m: &Migration, action: &str) -> Option<Decision> {
    m.rows
        .iter()
        .find(|r| r.action == action)
        .map(|r| r.decision)
}

fn refused(m: &Migration, item: &str) -> bool {
    m.refused.iter().any(|r| r.item.contains(item))
}

const ALL: [Harness; 5] = [
    Harness::ClaudeCode,
    Harness::Codex,
    Harness::OpenCode,
    Harness::Zed,
    Harness::OhMyPi,
];

#[test]
fn a_harness_this_build_does_not_read_is_refused_against_the_list() {
    let err = Harness::parse("cursor").unwrap_err().to_string();
    assert!(err.contains("`cursor`"), "{err}");
    assert!(
        err.contains("claude-code, codex, opencode, zed, oh-my-pi"),
        "{err}"
    );
    for (name, h) in chock_migrate::HARNESSES {
        assert_eq!(Harness::parse(name).unwrap(), *h);
    }
}

#[test]
fn a_foreign_deny_is_deny_and_a_foreign_allow_is_ask() {
    let m = migrate(Harness::ClaudeCode, &Options::default());
    assert_eq!(decision(&m, "net.fetch.example.evil"), Some(Decision::Deny));
    assert_eq!(decision(&m, "mcp.shell.tool.*"), Some(Decision::Deny));
    assert_eq!(decision(&m, "net.fetch.rs.docs"), Some(Decision::Ask));
    assert_eq!(
        decision(&m, "mcp.github.tool.get_issue"),
        Some(Decision::Ask)
    );
    assert_eq!(decision(&m, "web.search"), Some(Decision::Ask));
    let o = migrate(Harness::OpenCode, &Options::default());
    assert_eq!(decision(&o, "net.fetch.*"), Some(Decision::Ask));
    assert_eq!(decision(&o, "web.search"), Some(Decision::Deny));
    for h in ALL {
        let m = migrate(h, &Options::default());
        assert!(
            m.rows.iter().all(|r| r.decision != Decision::Allow),
            "{h}: {:?}",
            m.rows
        );
    }
}

#[test]
fn only_named_fetch_hosts_become_allow_under_permission_net_fetch() {
    let on = Options {
        carry_net_fetch: true,
        ..Options::default()
    };
    let m = migrate(Harness::ClaudeCode, &on);
    assert_eq!(decision(&m, "net.fetch.rs.docs"), Some(Decision::Allow));
    assert_eq!(
        decision(&m, "net.fetch.com.github.*"),
        Some(Decision::Allow)
    );
    // Everything else stays where it was.
    assert_eq!(decision(&m, "net.fetch.example.evil"), Some(Decision::Deny));
    assert_eq!(decision(&m, "web.search"), Some(Decision::Ask));
    assert_eq!(
        decision(&m, "mcp.github.tool.get_issue"),
        Some(Decision::Ask)
    );
    let allowed: Vec<&Row> = m
        .rows
        .iter()
        .filter(|r| r.decision == Decision::Allow)
        .collect();
    assert_eq!(allowed.len(), 2, "{allowed:?}");
    // A bare `webfetch: allow` names no host: it stays ask.
    let o = migrate(Harness::OpenCode, &on);
    assert_eq!(decision(&o, "net.fetch.*"), Some(Decision::Ask));
}

#[test]
fn a_host_that_cannot_be_read_exactly_is_refused() {
    let m = migrate(
        Harness::ClaudeCode,
        &Options {
            carry_net_fetch: true,
            ..Options::default()
        },
    );
    assert!(
        refused(&m, "WebFetch(domain:exa*mple.com)"),
        "{:?}",
        m.refused
    );
    assert!(m.rows.iter().all(|r| !r.why.contains("exa*mple")));
}

#[test]
fn what_has_no_equivalent_is_refused_and_named() {
    let c = migrate(Harness::ClaudeCode, &Options::default());
    for item in [
        "hooks",
        "enabledPlugins",
        "Bash(cargo test:*)",
        "Bash(git push:*)",
        "Read(./.env)",
        "permissions.defaultMode = acceptEdits",
    ] {
        assert!(refused(&c, item), "{item}: {:?}", c.refused);
    }
    let x = migrate(Harness::Codex, &Options::default());
    assert!(refused(&x, "sandbox_mode"), "{:?}", x.refused);
    assert!(refused(&x, "approval_policy"), "{:?}", x.refused);
    let z = migrate(Harness::Zed, &Options::default());
    assert!(
        refused(&z, "^cargo\\s+(build|test|check)"),
        "{:?}",
        z.refused
    );
    assert!(refused(&z, "rm\\s+-rf"), "{:?}", z.refused);
    assert!(
        refused(&z, "agent.tool_permissions.default"),
        "{:?}",
        z.refused
    );
    let o = migrate(Harness::OpenCode, &Options::default());
    for item in ["permission.bash", "permission.edit", "plugin", "command"] {
        assert!(refused(&o, item), "{item}: {:?}", o.refused);
    }
}

#[test]
fn the_vetting_pass_moves_a_row_no_code_acts_on_into_the_refusals() {
    // Through a reader: `mcp__github__list_*` is no well-formed pattern.
    let m = migrate(Harness::ClaudeCode, &Options::default());
    assert!(refused(&m, "mcp.github.tool.list_*"), "{:?}", m.refused);
    // Directly, as a reader added later might write it.
    let mut found = Migration::default();
    for action in ["fs.read.etc", "net.fetch.rs.docs"] {
        found.rows.push(Row {
            action: action.into(),
            decision: Decision::Ask,
            why: "a later reader".into(),
            file: PathBuf::from("x"),
        });
    }
    vet(&mut found);
    let kept: Vec<&str> = found.rows.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(kept, ["net.fetch.rs.docs"]);
    assert!(refused(&found, "fs.read.etc"));
}

#[test]
fn mcp_servers_carry_variable_names_never_values() {
    for h in ALL {
        let m = migrate(h, &Options::default());
        assert!(!m.servers.is_empty(), "{h}");
        let text = render(&m, h.name(), "0.0.0", "2026-01-01");
        let report = chock_migrate::report(&m);
        for out in [&text, &report] {
            assert!(!out.contains("never"), "{h} carried a value:\n{out}");
            assert!(!out.contains("ghp_") && !out.contains("sk-"), "{h}:\n{out}");
        }
    }
    let c = migrate(Harness::ClaudeCode, &Options::default());
    let github = c.servers.iter().find(|s| s.name == "github").unwrap();
    assert_eq!(github.env, ["GITHUB_PERSONAL_ACCESS_TOKEN"]);
    assert_eq!(github.command.as_deref(), Some("npx"));
    let legacy = c.servers.iter().find(|s| s.name == "legacy").unwrap();
    assert_eq!(legacy.transport.as_deref(), Some("sse"));
    assert!(refused(&c, "server `bad name`"), "{:?}", c.refused);
    let o = migrate(Harness::OpenCode, &Options::default());
    let jira = o.servers.iter().find(|s| s.name == "jira").unwrap();
    assert_eq!(jira.command.as_deref(), Some("bun"));
    assert_eq!(jira.args, ["x", "my-mcp-command"]);
    assert_eq!(jira.env, ["JIRA_TOKEN"]);
    let z = migrate(Harness::Zed, &Options::default());
    let older = z.servers.iter().find(|s| s.name == "older").unwrap();
    assert_eq!(older.command.as_deref(), Some("/usr/local/bin/older-mcp"));
}

#[test]
fn the_header_names_version_date_and_every_file_with_its_sha256() {
    for h in ALL {
        let inputs = all(h);
        let m = read(h, &inputs, &Options::default()).unwrap();
        let text = render(&m, h.name(), "9.8.7", "2026-12-05");
        let report = chock_migrate::report(&m);
        assert!(
            text.starts_with("# Written by chock migrate --from"),
            "{text}"
        );
        assert!(text.lines().next().unwrap().contains("Chock 9.8.7"));
        assert!(text.lines().next().unwrap().contains("2026-12-05"));
        for input in &inputs {
            let line = format!(
                "{}  sha256:{}",
                input.path.display(),
                hex::encode(Sha256::digest(&input.bytes))
            );
            assert!(text.contains(&format!("#   {line}")), "{text}");
            assert!(report.contains(&line), "{report}");
        }
        let carried = report.split("rows:").next().unwrap();
        assert!(carried.starts_with("carried:"), "{report}");
    }
}

#[test]
fn every_generated_file_loads_through_the_policy_parser() {
    for h in ALL {
        for carry in [false, true] {
            let m = migrate(
                h,
                &Options {
                    carry_net_fetch: carry,
                    ..Options::default()
                },
            );
            let text = render(&m, h.name(), "0.0.0", "2026-01-01");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("chock.toml");
            std::fs::write(&path, &text).unwrap();
            let policy = Policy::from_sources(Sources {
                project: Some(Source {
                    path,
                    text: text.clone(),
                }),
                project_dir: Some(dir.path().to_owned()),
                home: Some(dir.path().join("home")),
                ..Sources::default()
            })
            .unwrap_or_else(|e| panic!("{h}: {e}\n{text}"));
            assert_eq!(policy.project_rules().rules().len(), m.rows.len(), "{h}");
            assert_eq!(policy.mcp_servers().len(), m.servers.len(), "{h}");
        }
    }
}

#[test]
fn a_file_not_in_its_documented_format_is_an_error_naming_it() {
    let input = Input {
        path: PathBuf::from("/x/opencode.json"),
        bytes: b"{ \"permission\": [] }".to_vec(),
    };
    let err = read(Harness::OpenCode, &[input], &Options::default())
        .unwrap_err()
        .to_string();
    assert_eq!(err, "/x/opencode.json: permission is not an object");
}

#[test]
fn notes_come_in_as_data_naming_their_file_and_each_fits_a_note() {
    let input = fixture("claude-code", "CLAUDE.md");
    let sha = hex::encode(Sha256::digest(&input.bytes));
    let notes =
        chock_migrate::notes(Harness::ClaudeCode, std::slice::from_ref(&input), 8192).unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].name, "claude-code-1-claude");
    let first = notes[0].text.lines().next().unwrap();
    assert!(first.contains(&format!("sha256:{sha}")), "{first}");
    assert!(first.contains("kept as data"), "{first}");
    assert!(
        notes[0]
            .text
            .ends_with(std::str::from_utf8(&input.bytes).unwrap())
    );
    // A long file is cut at line ends into parts that each fit, and nothing is lost.
    let long: String = (0..400)
        .map(|i| format!("line {i} of the notes\n"))
        .collect();
    let big = Input {
        path: PathBuf::from("/p/AGENTS.md"),
        bytes: long.clone().into_bytes(),
    };
    let parts = chock_migrate::notes(Harness::Codex, &[big], 1024).unwrap();
    assert!(parts.len() > 1);
    let mut joined = String::new();
    for p in &parts {
        assert!(p.text.len() <= 1024, "{}", p.text.len());
        let (_, body) = p.text.split_once('\n').unwrap();
        joined.push_str(body);
    }
    assert_eq!(joined, long);
    assert_eq!(parts[1].name, "codex-1-agents-p2");
}

#[test]
fn a_transcript_is_checked_and_counted_never_read_as_events() {
    let input = fixture("claude-code", "transcript.jsonl");
    let t = chock_migrate::transcript(Harness::ClaudeCode, &input).unwrap();
    assert_eq!(t.lines, 3);
    assert_eq!(t.sha256, hex::encode(Sha256::digest(&input.bytes)));
    assert_eq!(t.file_name, format!("{}.jsonl", t.sha256));
    let bad = Input {
        path: PathBuf::from("/t.jsonl"),
        bytes: b"{}\nnot json\n".to_vec(),
    };
    let err = chock_migrate::transcript(Harness::ClaudeCode, &bad).unwrap_err();
    assert_eq!(err.to_string(), "/t.jsonl: line 2: not a JSON object");
    let err = chock_migrate::transcript(Harness::Codex, &input).unwrap_err();
    assert!(
        err.to_string().contains("only claude-code transcripts"),
        "{err}"
    );
    assert_eq!(
        Harness::ClaudeCode.transcript_dir(Path::new("/h"), Path::new("/home/u/my.proj")),
        Some(PathBuf::from("/h/.claude/projects/-home-u-my-proj"))
    );
}

#[test]
fn of_claude_json_only_this_projects_servers_are_read() {
    let input = Input {
        path: PathBuf::from("/h/.claude.json"),
        bytes: br#"{"numStartups": 3,
            "mcpServers": {"mine": {"command": "a"}},
            "projects": {"/p/this": {"mcpServers": {"here": {"command": "b"}}},
                         "/p/other": {"mcpServers": {"there": {"command": "c"}}}}}"#
            .to_vec(),
    };
    let options = Options {
        project: Some(PathBuf::from("/p/this")),
        ..Options::default()
    };
    let m = read(Harness::ClaudeCode, &[input], &options).unwrap();
    let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["mine", "here"]);
}
