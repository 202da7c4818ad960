//! What the host copies out of a plugin counts against its `memory_mb`, not only what the plugin
//! holds. The canonical ABI lets every entry of a list point at the same bytes: the alias plugin
//! (`plugins/alias`) holds one MiB and lists 64 tools sharing it as their description, so lifting
//! its list would copy 64 MiB into the host under `memory_mb = 4`. Alone in its binary, so no
//! other test's allocations blur the measure.

mod hog;

use hog::{built, load};

/// A field of /proc/self/status, in kB.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_tool_list_over_shared_bytes_is_not_copied_past_the_memory_cap() {
    let Some(built) = built() else { return };
    let wasm = std::fs::read(&built.alias).unwrap();
    // Compiled, and the list lifted once, before the measure: under a cap it fits in.
    let roomy = load(&wasm, "memory_mb = 128\ntimeout_secs = 10");
    let roomy = roomy.expect("under a 128 MiB cap the list is copied whole");
    assert_eq!(roomy.tools().len(), 64);
    assert_eq!(roomy.tools()[0].description.len(), 1 << 20);
    drop(roomy);
    // The peak resident set from here on: writing 5 to clear_refs resets VmHWM to VmRSS.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kb("VmHWM:");
    let result = load(&wasm, "memory_mb = 4\ntimeout_secs = 10");
    let peak = status_kb("VmHWM:");
    let grew_mb = peak.saturating_sub(before) / 1024;
    let err = result
        .map(|plugin| plugin.tools().len())
        .expect_err("64 MiB of descriptions must not be copied under memory_mb = 4");
    // wasmtime says it in its own words (its error type is private): too much data copied.
    assert!(
        matches!(err, chock_plugin::PluginError::Tools { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("plugin probe: listing its tools failed"),
        "{err}"
    );
    assert!(grew_mb < 32, "the host's peak memory grew by {grew_mb} MB");
}
