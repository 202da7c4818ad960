//! Nix dev shells and provisioning through real sessions (the scripted model; everything else is
//! real: nix on the host, the sandbox, the log). Every flake here has no inputs and builds from
//! local files into a store of the test's own, so no binary cache or network is needed, as root
//! and as an unprivileged user alike. Without nix the scenarios are skipped, except in CI.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_agent::agent::TaskEnd;
use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_log::{EventData, read_events};
use chock_tools::events::AgentEvent;

/// A derivation that makes `bin/<name>` print `<name> ran` and, for the dev shell's tool, the
/// shell's GREETING.
fn tool(name: &str) -> String {
    format!(
        r#"derivation {{
      name = "{name}"; inherit system; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      args = [ "-c" "mkdir -p $out/bin; printf '#!/bin/sh\necho {name} ran $GREETING\n' > $out/bin/{name}; chmod +x $out/bin/{name}" ];
    }}"#
    )
}

/// A derivation whose build sleeps (`sleep <marker>`) until it is killed.
fn slow(marker: &str) -> String {
    format!(
        r#"derivation {{
      name = "slow"; inherit system; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      args = [ "-c" "sleep {marker}; mkdir $out" ];
    }}"#
    )
}

const FLAKE: &str = r#"{
  outputs = { self }: let
    system = "x86_64-linux";
    shelltool = SHELLTOOL;
  in {
    devShells.${system}.default = derivation {
      name = "shell"; inherit system; builder = "/bin/bash"; outputs = [ "out" ];
      args = [ "-c" "echo > $out" ];
      PATH = "${shelltool}/bin";
      GREETING = "hello-from-the-shell";
    };
    packages.${system} = {
      other = OTHER;
      asked = ASKED;
      slow = SLOW1;
      slower = SLOW2;
    };
  };
}
"#;

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    /// A flake outside the project holding the programs the agent asks for.
    tools: PathBuf,
}

impl Env {
    /// A project whose flake has a dev shell, and a tools flake, with `chock_toml` as the
    /// project's table.
    fn new(chock_toml: &str) -> Env {
        Env::with_shell_tool(chock_toml, &tool("shelltool"))
    }

    /// As [`Env::new`], the dev shell's one tool being `shell_tool` (a derivation).
    fn with_shell_tool(chock_toml: &str, shell_tool: &str) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let project = root.join("project");
        let tools = root.join("tools");
        let flake = FLAKE
            .replace("SHELLTOOL", shell_tool)
            .replace("OTHER", &tool("other"))
            .replace("ASKED", &tool("asked"))
            .replace("SLOW1", &slow("987651"))
            .replace("SLOW2", &slow("987652"));
        for dir in [&project, &tools] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("flake.nix"), &flake).unwrap();
        }
        std::fs::write(project.join("chock.toml"), chock_toml).unwrap();
        // Without a dev shell in the tools flake, it would be one too: drop it there.
        let tools_flake = flake.replace("devShells", "unusedShells");
        std::fs::write(tools.join("flake.nix"), tools_flake).unwrap();
        Env {
            _tmp: tmp,
            root,
            project,
            tools,
        }
    }

    fn script(&self, name: &str, toml: &str) -> String {
        let path = self.root.join(name);
        std::fs::write(&path, toml).unwrap();
        format!("script:{}", path.display())
    }

    fn session(&self, script: &str) -> chock_agent::runtime::SessionRuntime {
        self.session_with(script, Arc::new(|_: &AgentEvent| {}))
    }

    fn session_with(
        &self,
        script: &str,
        sink: Arc<dyn chock_tools::events::EventSink>,
    ) -> chock_agent::runtime::SessionRuntime {
        let spec = self.script("script.toml", script);
        SessionBuilder::new(Config::parse("", Path::new("config.toml")).unwrap())
            .sink(sink)
            .provider(Some(spec))
            .project(Some(self.project.clone()))
            .sessions_root(Some(self.root.join("sessions")))
            .build()
            .unwrap()
    }

    /// Builds `attr` of the tools flake directly (outside any session) and returns its path.
    fn build_directly(&self, attr: &str) -> PathBuf {
        let out = std::process::Command::new("nix")
            .args(["--extra-experimental-features", "nix-command flakes"])
            .args(["build", "--no-link", "--json", "--no-write-lock-file", "--"])
            .arg(format!("path:{}#{attr}", self.tools.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        PathBuf::from(json[0]["outputs"]["out"].as_str().unwrap())
    }
}

/// Each tool.result's tool and output, in order.
fn results(dir: &Path) -> Vec<(String, bool, String)> {
    read_events(dir)
        .unwrap()
        .into_iter()
        .filter_map(|e| match EventData::parse_exact(e.kind, &e.data).unwrap() {
            EventData::ToolResult(r) => Some((r.tool, r.is_error, r.output)),
            _ => None,
        })
        .collect()
}

/// Each tool.call's action (`nix.devshell`, `exec.system.sh`…), in order.
fn actions(dir: &Path) -> Vec<String> {
    read_events(dir)
        .unwrap()
        .into_iter()
        .filter_map(|e| match EventData::parse_exact(e.kind, &e.data).unwrap() {
            EventData::ToolCall(c) => c.action,
            _ => None,
        })
        .collect()
}

/// Whether each decision of `action` allowed it, in order.
fn decided(dir: &Path, action: &str) -> Vec<bool> {
    read_events(dir)
        .unwrap()
        .into_iter()
        .filter_map(|e| match EventData::parse_exact(e.kind, &e.data).unwrap() {
            EventData::Decision(d) if d.action.as_deref() == Some(action) => Some(d.allowed),
            _ => None,
        })
        .collect()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
        {
            found.push(pid);
        }
    }
    found
}

fn wait_for(marker: &str) {
    let start = Instant::now();
    while processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{marker} never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn gone_soon(marker: &str) {
    let start = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the build outlived its end: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const ALLOW: &str = r#"
[[rule]]
action = "nix.build"
decision = "allow"

[[rule]]
action = "exec.nix.store.*"
decision = "allow"
"#;

/// A command from the dev shell runs and sees the shell's environment; a store path outside the
/// closure is not there; the dev shell's act was decided and logged before any call ran.
fn a_dev_shell_is_the_calls_environment_and_nothing_else_of_the_store_is_seen() {
    let env = Env::new("");
    let other = env.build_directly("other");
    let script = format!(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "shelltool; echo G=$GREETING; ls {other} >/dev/null 2>&1 && echo OTHER-SEEN || echo OTHER-HIDDEN; ls /nix/store | wc -l" }}

[[turn]]
text = "done"
"#,
        other = other.display()
    );
    let mut session = env.session(&script);
    let dir = session.log().dir().to_path_buf();
    assert_eq!(rt().block_on(session.submit("go")).unwrap(), TaskEnd::Done);
    let results = results(&dir);
    let (_, is_error, output) = &results[0];
    assert!(!is_error, "{output}");
    assert!(
        output.contains("shelltool ran hello-from-the-shell"),
        "{output}"
    );
    assert!(output.contains("G=hello-from-the-shell"), "{output}");
    assert!(output.contains("OTHER-HIDDEN"), "{output}");
    let acts = actions(&dir);
    assert_eq!(
        acts.first().map(String::as_str),
        Some("nix.devshell"),
        "{acts:?}"
    );
    assert_eq!(decided(&dir, "nix.devshell"), vec![true]);
}

/// A program found in the dev shell's closure is `exec.devshell.<program>` (allowed by the
/// shipped defaults) and runs with the shell's environment; another store path is
/// `exec.nix.store.<program>` (asked: with nobody to ask, refused). Through the session's confined
/// call, as `chock exec` makes it (run_command's act is its shell's).
fn closure_programs_are_devshell_and_other_store_paths_are_nix_store() {
    use chock_session::{CallOptions, CallOutcome, Calls, NoApprover, Session, SessionOptions};
    let env = Env::new("");
    let other = env.build_directly("other");
    let session = Session::open(
        &env.project,
        SessionOptions {
            sessions_root: Some(env.root.join("sessions")),
            calls: Calls::InTurn,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let rt = rt();
    let run = |argv: &[&str]| {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_string()).collect();
        rt.block_on(session.confined_call_async(&argv, &CallOptions::default(), &NoApprover))
            .unwrap()
    };
    let shell = run(&["shelltool"]);
    assert_eq!(shell.action, "exec.devshell.shelltool");
    let CallOutcome::Ran { stdout, .. } = &shell.outcome else {
        panic!("{:?}", shell.outcome);
    };
    assert!(
        String::from_utf8_lossy(stdout).contains("shelltool ran hello-from-the-shell"),
        "{}",
        String::from_utf8_lossy(stdout)
    );
    let outside = run(&[&format!("{}/bin/other", other.display())]);
    assert_eq!(outside.action, "exec.nix.store.other");
    assert!(
        matches!(outside.outcome, CallOutcome::Refused { .. }),
        "{:?}",
        outside.outcome
    );
    session.close(false).unwrap();
}

/// An allowed request builds the program and the next call runs it; the one before did not have it.
fn an_allowed_request_gives_the_next_call_the_program() {
    let env = Env::new(ALLOW);
    let script = format!(
        r#"
tools = ["provision_program"]

[[turn]]
[[turn.call]]
tool = "run_command"
input = {{ command = "asked || echo ASKED-MISSING" }}
[[turn.call]]
tool = "provision_program"
input = {{ installable = "path:{tools}#asked" }}
[[turn.call]]
tool = "run_command"
input = {{ command = "asked" }}

[[turn]]
text = "done"
"#,
        tools = env.tools.display()
    );
    let events: Arc<Mutex<Vec<AgentEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    let sink = move |event: &AgentEvent| seen.lock().unwrap().push(event.clone());
    let mut session = env.session_with(&script, Arc::new(sink));
    let dir = session.log().dir().to_path_buf();
    assert_eq!(rt().block_on(session.submit("go")).unwrap(), TaskEnd::Done);
    // nix's progress reached clients while it built, as the call's output item.
    let progress: String = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ItemDelta { item, text } if item.ends_with(".output") => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(progress.contains("building"), "{progress:?}");
    let results = results(&dir);
    assert!(results[0].2.contains("ASKED-MISSING"), "{results:?}");
    assert_eq!(results[1].0, "provision_program");
    assert!(!results[1].1, "{results:?}");
    assert!(results[2].2.contains("asked ran"), "{results:?}");
    assert_eq!(decided(&dir, "nix.build"), vec![true]);
}

/// A request nobody allows (the table asks, nobody answers) builds nothing, and is logged.
fn a_refused_request_builds_nothing() {
    let env = Env::new("");
    let script = format!(
        r#"
tools = ["provision_program"]

[[turn]]
[[turn.call]]
tool = "provision_program"
input = {{ installable = "path:{tools}#asked" }}

[[turn]]
text = "done"
"#,
        tools = env.tools.display()
    );
    let mut session = env.session(&script);
    let dir = session.log().dir().to_path_buf();
    assert_eq!(rt().block_on(session.submit("go")).unwrap(), TaskEnd::Done);
    let results = results(&dir);
    assert!(results[0].1, "refused: {results:?}");
    assert!(!dir.join("nix/provisioned-1").exists(), "nothing was built");
    assert_eq!(
        decided(&dir, "nix.build"),
        vec![false],
        "the refusal of nix.build is logged"
    );
}

/// A table that denies `nix.build` does not offer the tool at all (the scripted model is told
/// which tools the session offers, and says so when its recording calls another).
fn a_denied_request_is_not_offered() {
    let env = Env::new("[[rule]]\naction = \"nix.build\"\ndecision = \"deny\"\n");
    let script = format!(
        r#"
tools = ["provision_program"]

[[turn]]
[[turn.call]]
tool = "provision_program"
input = {{ installable = "path:{tools}#asked" }}

[[turn]]
text = "done"
"#,
        tools = env.tools.display()
    );
    let mut session = env.session(&script);
    let dir = session.log().dir().to_path_buf();
    let err = rt().block_on(session.submit("go")).unwrap_err();
    assert!(
        err.to_string()
            .contains("which this session does not offer"),
        "{err}"
    );
    assert!(!dir.join("nix/provisioned-1").exists());
}

/// An interrupt during a build that would never end kills nix and every process of the build.
fn an_interrupt_kills_a_slow_build() {
    let env = Env::new(ALLOW);
    let script = format!(
        r#"
tools = ["provision_program"]

[[turn]]
[[turn.call]]
tool = "provision_program"
input = {{ installable = "path:{tools}#slow" }}

[[turn]]
text = "after"
"#,
        tools = env.tools.display()
    );
    let mut session = env.session(&script);
    let interrupter = session.interrupter();
    let watcher = std::thread::spawn(move || {
        wait_for("sleep 987651");
        interrupter.interrupt();
        Instant::now()
    });
    let end = rt().block_on(session.submit("go")).unwrap();
    let interrupted_at = watcher.join().unwrap();
    assert_eq!(end, TaskEnd::Interrupted);
    assert!(interrupted_at.elapsed() < Duration::from_secs(10));
    gone_soon("sleep 987651");
}

/// An interrupt while the dev shell builds (at the first call) kills nix and its whole build; the
/// call ends saying so, and the dev shell's end is logged.
fn an_interrupt_kills_a_slow_dev_shell_build() {
    let env = Env::with_shell_tool("", &slow("987653"));
    let mut session = env.session(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo never" }

[[turn]]
text = "after"
"#,
    );
    let dir = session.log().dir().to_path_buf();
    let interrupter = session.interrupter();
    let watcher = std::thread::spawn(move || {
        wait_for("sleep 987653");
        interrupter.interrupt();
    });
    let end = rt().block_on(session.submit("go")).unwrap();
    watcher.join().unwrap();
    assert_eq!(end, TaskEnd::Interrupted);
    gone_soon("sleep 987653");
    let results = results(&dir);
    assert!(results[0].1, "{results:?}");
    assert!(!results[0].2.contains("never"), "{results:?}");
    let failed = read_events(&dir).unwrap().into_iter().any(|e| {
        e.call_id.as_deref() == Some("nix-devshell")
            && matches!(
                EventData::parse_exact(e.kind, &e.data).unwrap(),
                EventData::CommandResult(chock_protocol::log::CommandResult::Failed { message, .. })
                    if message.contains("interrupted")
            )
    });
    assert!(failed, "the dev shell's interrupted end is logged");
}

/// A build past its deadline fails the request, saying so, and leaves no process behind.
fn a_build_past_its_deadline_fails_the_request() {
    let env = Env::new(ALLOW);
    let script = format!(
        r#"
tools = ["provision_program"]

[[turn]]
[[turn.call]]
tool = "provision_program"
input = {{ installable = "path:{tools}#slower", timeout_secs = 3 }}

[[turn]]
text = "done"
"#,
        tools = env.tools.display()
    );
    let mut session = env.session(&script);
    let dir = session.log().dir().to_path_buf();
    let start = Instant::now();
    assert_eq!(rt().block_on(session.submit("go")).unwrap(), TaskEnd::Done);
    assert!(start.elapsed() < Duration::from_secs(60));
    let results = results(&dir);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].2.contains("did not finish within 3 s"),
        "{results:?}"
    );
    gone_soon("sleep 987652");
}

fn main() {
    if chock_session::find_nix().is_none() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "nix is missing: .ci/run installs nix-bin"
        );
        eprintln!("skipped: no `nix` on PATH (apt-get install nix-bin)");
        return;
    }
    let store = tempfile::tempdir().unwrap();
    // A store of the test's own (where an unprivileged user can build too: nix runs each build in
    // namespaces of its own), its builders seeing the host's /bin and /usr, and no binary cache.
    let config = format!(
        "store = {}\nsandbox-paths = /bin /usr /lib /lib64?\nsubstituters =\n",
        store.path().display()
    );
    // SAFETY: set before any other thread of this process exists (no harness: this is main).
    unsafe { std::env::set_var("NIX_CONFIG", config) };
    let scenarios: &[(&str, fn())] = &[
        (
            "a_dev_shell_is_the_calls_environment_and_nothing_else_of_the_store_is_seen",
            a_dev_shell_is_the_calls_environment_and_nothing_else_of_the_store_is_seen,
        ),
        (
            "closure_programs_are_devshell_and_other_store_paths_are_nix_store",
            closure_programs_are_devshell_and_other_store_paths_are_nix_store,
        ),
        (
            "an_allowed_request_gives_the_next_call_the_program",
            an_allowed_request_gives_the_next_call_the_program,
        ),
        (
            "a_refused_request_builds_nothing",
            a_refused_request_builds_nothing,
        ),
        (
            "a_denied_request_is_not_offered",
            a_denied_request_is_not_offered,
        ),
        (
            "an_interrupt_kills_a_slow_build",
            an_interrupt_kills_a_slow_build,
        ),
        (
            "an_interrupt_kills_a_slow_dev_shell_build",
            an_interrupt_kills_a_slow_dev_shell_build,
        ),
        (
            "a_build_past_its_deadline_fails_the_request",
            a_build_past_its_deadline_fails_the_request,
        ),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for (name, scenario) in scenarios {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        eprintln!("test {name} ...");
        scenario();
        eprintln!("test {name} ... ok");
    }
}
