//! The example and hostile plugins, built for wasm32-wasip2 and run by real wasmtime: the pin,
//! the import check, and every per-call limit.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chock_plugin::testing::{Built, build_plugins};
use chock_plugin::{CallEnd, Doors, LoadedPlugin, Page, PluginEngine, PluginError};
use chock_policy::{Policy, Source, Sources};

fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_plugins(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugins")))
        .as_ref()
}

/// A project holding `wasm` as `plugin.wasm`, and the chock.toml pinning it (with `extra` added).
fn project(wasm: &Path, sha256: &str, extra: &str) -> (tempfile::TempDir, Policy) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, dir.path().join("plugin.wasm")).unwrap();
    let text = format!(
        "{extra}\n[plugins.probe]\npath = \"plugin.wasm\"\nsha256 = \"{sha256}\"\ntimeout_secs = 5\nmemory_mb = 32\nfuel = 500000000\noutput_kb = 64\n"
    );
    std::fs::write(dir.path().join("chock.toml"), &text).unwrap();
    let policy = Policy::from_sources(Sources {
        project: Some(Source {
            path: dir.path().join("chock.toml"),
            text,
        }),
        org: None,
        project_dir: Some(dir.path().to_path_buf()),
        home: None,
        chock_dirs: Vec::new(),
        user: None,
    })
    .unwrap();
    (dir, policy)
}

fn digest(path: &Path) -> String {
    chock_plugin::sha256_hex(&std::fs::read(path).unwrap())
}

fn load(
    wasm: &Path,
    extra: &str,
) -> Result<(tempfile::TempDir, Policy, LoadedPlugin), PluginError> {
    let (dir, policy) = project(wasm, &digest(wasm), extra);
    let engine = PluginEngine::shared().unwrap();
    let plugin = LoadedPlugin::load(&engine, dir.path(), &policy.plugins()[0], &policy)?;
    Ok((dir, policy, plugin))
}

/// Doors that refuse everything and count what was asked.
struct Refusing;

impl Doors for Refusing {
    fn read_file(&mut self, path: &str, _: Instant) -> Result<Vec<u8>, String> {
        Err(format!("refused read of {path}"))
    }
    fn write_file(&mut self, path: &str, _: &[u8], _: Instant) -> Result<(), String> {
        Err(format!("refused write of {path}"))
    }
    fn fetch(&mut self, url: &str, _: Instant) -> Result<Page, String> {
        Err(format!("refused fetch of {url}"))
    }
}

#[test]
fn the_example_lists_its_tools_and_imports_only_what_it_uses() {
    let Some(built) = built() else { return };
    let (_dir, _policy, plugin) = load(&built.example, "").unwrap();
    let names: Vec<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["count", "save", "tally"]);
    assert_eq!(plugin.tools()[0].action.as_str(), "plugin.probe.tool.count");
    let imports: Vec<&str> = plugin.imports().iter().map(|i| i.name()).collect();
    assert!(
        imports.contains(&"chock:plugin/workspace-read@0.1.0"),
        "{imports:?}"
    );
    assert!(
        !imports.iter().any(|i| i.starts_with("chock:plugin/fetch")),
        "{imports:?}"
    );
    assert!(
        !imports.iter().any(|i| i.starts_with("wasi:filesystem")),
        "{imports:?}"
    );
}

#[test]
fn changed_bytes_are_a_new_plugin_refused_until_the_pin_is_updated() {
    let Some(built) = built() else { return };
    let (dir, policy) = project(&built.example, &digest(&built.example), "");
    // One byte appended (a custom section's worth of change would do the same).
    let mut bytes = std::fs::read(dir.path().join("plugin.wasm")).unwrap();
    bytes.push(0);
    std::fs::write(dir.path().join("plugin.wasm"), &bytes).unwrap();
    let engine = PluginEngine::shared().unwrap();
    let err = LoadedPlugin::load(&engine, dir.path(), &policy.plugins()[0], &policy).unwrap_err();
    assert!(matches!(err, PluginError::Pin { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("plugins.probe.sha256 does not match"),
        "{text}"
    );
    assert!(text.contains("plugin.wasm"), "{text}");
    assert!(
        text.contains("chock.toml:"),
        "names the file and line: {text}"
    );
}

#[test]
fn a_denied_capability_import_is_not_linked_and_the_plugin_does_not_start() {
    let Some(built) = built() else { return };
    let rule = "[[rule]]\naction = \"plugin.probe.network\"\ndecision = \"deny\"\n";
    let err = load(&built.hostile, rule).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PluginError::Denied { .. }), "{text}");
    assert!(
        text.contains("imports chock:plugin/fetch@0.1.0"),
        "names the import: {text}"
    );
    assert!(
        text.contains("plugin.probe.network"),
        "names the act: {text}"
    );
    assert!(
        text.contains("chock.toml:2 (rule `plugin.probe.network`)"),
        "names the rule: {text}"
    );
    // fs.write denied: the hostile imports workspace-write; the example imports it too.
    let rule = "[[rule]]\naction = \"fs.write\"\ndecision = \"deny\"\n";
    let text = load(&built.example, rule).unwrap_err().to_string();
    assert!(
        text.contains("imports chock:plugin/workspace-write@0.1.0, decided as fs.write"),
        "{text}"
    );
}

#[test]
fn a_ratchet_narrowed_after_load_refuses_the_next_call_before_instantiation() {
    let Some(built) = built() else { return };
    let (_dir, mut policy, plugin) = load(&built.example, "").unwrap();
    policy
        .restrict("fs.read", chock_policy::Decision::Deny)
        .unwrap();
    let report = plugin.call(&policy, "count", r#"{"path":"a"}"#, Box::new(Refusing));
    match &report.end {
        CallEnd::Refused(reason) => {
            assert!(reason.contains("workspace-read"), "{reason}");
            assert!(reason.contains("ratchet"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_endless_loop_is_stopped_by_the_fuel_budget() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.hostile, "").unwrap();
    let report = plugin.call(&policy, "spin", "{}", Box::new(Refusing));
    assert_eq!(report.end, CallEnd::OutOfFuel, "{report:?}");
    assert_eq!(report.fuel_used, report.fuel_limit);
}

/// The hostile plugin with fuel enough for hours and a one-second timeout.
fn one_second(wasm: &Path) -> (tempfile::TempDir, Policy, LoadedPlugin) {
    let (dir, _) = project(wasm, &digest(wasm), "");
    let text = format!(
        "[plugins.probe]\npath = \"plugin.wasm\"\nsha256 = \"{}\"\ntimeout_secs = 1\nfuel = 4000000000000000000\n",
        digest(wasm)
    );
    let policy = Policy::from_sources(Sources {
        project: Some(Source {
            path: dir.path().join("chock.toml"),
            text,
        }),
        org: None,
        project_dir: Some(dir.path().to_path_buf()),
        home: None,
        chock_dirs: Vec::new(),
        user: None,
    })
    .unwrap();
    let engine = PluginEngine::shared().unwrap();
    let plugin = LoadedPlugin::load(&engine, dir.path(), &policy.plugins()[0], &policy).unwrap();
    (dir, policy, plugin)
}

/// Calls `tool` of the hostile plugin under a one-second timeout: it must end timed out, after
/// the second and well before its own end.
fn times_out(tool: &str) {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = one_second(&built.hostile);
    let started = Instant::now();
    let report = plugin.call(&policy, tool, "{}", Box::new(Refusing));
    assert_eq!(report.end, CallEnd::TimedOut, "{report:?}");
    let took = started.elapsed();
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(5)).contains(&took),
        "{took:?}"
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_wall_clock_timeout() {
    times_out("spin");
}

#[test]
fn a_sleep_on_a_wasi_clock_is_cut_at_the_wall_clock_timeout() {
    // The wait happens in the host (a pollable's `block`), where no epoch tick reaches it.
    times_out("nap");
}

#[test]
fn random_bytes_past_the_memory_cap_are_refused_before_the_host_allocates_them() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.hostile, "").unwrap();
    let report = plugin.call(&policy, "drain", "{}", Box::new(Refusing));
    match &report.end {
        CallEnd::MemoryCap(why) => assert!(why.contains("random bytes"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// Doors that read one file's bytes for any path and refuse the rest.
struct Reading(&'static [u8]);

impl Doors for Reading {
    fn read_file(&mut self, _: &str, _: Instant) -> Result<Vec<u8>, String> {
        Ok(self.0.to_vec())
    }
    fn write_file(&mut self, path: &str, _: &[u8], _: Instant) -> Result<(), String> {
        Err(format!("refused write of {path}"))
    }
    fn fetch(&mut self, url: &str, _: Instant) -> Result<Page, String> {
        Err(format!("refused fetch of {url}"))
    }
}

#[test]
fn ordinary_rust_with_a_hashmap_and_a_clock_runs() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.example, "").unwrap();
    let imports: Vec<&str> = plugin.imports().iter().map(|i| i.name()).collect();
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:random/")),
        "std's HashMap seeds its hasher from wasi:random: {imports:?}"
    );
    assert!(
        imports
            .iter()
            .any(|i| i.starts_with("wasi:clocks/monotonic-clock")),
        "{imports:?}"
    );
    let text = b"the cat and the hat and the bat";
    let report = plugin.call(&policy, "tally", r#"{"path":"a"}"#, Box::new(Reading(text)));
    assert_eq!(
        report.end,
        CallEnd::Returned("a: \"the\" x3 (5 distinct)".into()),
        "{report:?}"
    );
}

#[test]
fn memory_exhaustion_is_stopped_by_the_cap() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.hostile, "").unwrap();
    let report = plugin.call(&policy, "hog", "{}", Box::new(Refusing));
    assert!(matches!(report.end, CallEnd::MemoryCap(_)), "{report:?}");
    assert_eq!(report.memory_limit, 32 << 20);
    assert!(report.memory_peak <= report.memory_limit, "{report:?}");
    assert!(report.memory_peak > 16 << 20, "it did allocate: {report:?}");
}

#[test]
fn output_over_the_cap_is_refused_whole() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.hostile, "").unwrap();
    let report = plugin.call(&policy, "flood", "{}", Box::new(Refusing));
    assert_eq!(
        report.end,
        CallEnd::OutputTooLarge { bytes: 4 << 20 },
        "{:?}",
        report.end
    );
    assert_eq!(report.output_limit, 64 << 10);
}

#[test]
fn every_call_gets_a_fresh_store() {
    let Some(built) = built() else { return };
    let (_dir, policy, plugin) = load(&built.hostile, "").unwrap();
    // A trap leaves nothing behind: the next call starts clean.
    let first = plugin.call(&policy, "spin", "{}", Box::new(Refusing));
    assert_eq!(first.end, CallEnd::OutOfFuel);
    let second = plugin.call(&policy, "escape", r#"{"path":"x"}"#, Box::new(Refusing));
    assert_eq!(
        second.end,
        CallEnd::ToolError("refused read of x".into()),
        "{second:?}"
    );
    assert!(second.fuel_used < second.fuel_limit / 10, "{second:?}");
}
