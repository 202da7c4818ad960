//! The host's own memory under a hostile component: tables it declares and fills at
//! instantiation are held by the host, outside the plugin's linear memory. With `memory_mb = 2`
//! they must not make the host hold hundreds of MB. Alone in its binary, so no other test's
//! allocations blur the measure.

mod hog;

use hog::{SMALL, Start, hog_module, hostile, load, with_hog};

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
fn a_component_filling_huge_tables_does_not_grow_the_host() {
    let Some(hostile) = hostile() else { return };
    // Six instances of a module with a hundred tables of 100,000 elements, each filled by its
    // start function: 480 MB of host memory at a pointer an element, were it allowed.
    let wasm = with_hog(&hostile, &hog_module(100, 100_000, Start::Fill), 6);
    // Compiled before the measure (the compile cache keeps it): what is measured is the store.
    let warm = load(&wasm, "memory_mb = 1024\nfuel = 1000");
    drop(warm);
    // The peak resident set from here on: writing 5 to clear_refs resets VmHWM to VmRSS.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kb("VmHWM:");
    let result = load(&wasm, SMALL);
    let peak = status_kb("VmHWM:");
    let grew_mb = peak.saturating_sub(before) / 1024;
    assert!(
        grew_mb < 100,
        "the host's peak memory grew by {grew_mb} MB listing the tools (tools listed: {:?})",
        result.as_ref().map(|plugin| plugin.tools().len())
    );
    let err = result.expect_err("the hostile component must not list its tools");
    assert!(
        err.to_string()
            .starts_with("plugin probe: listing its tools failed"),
        "{err}"
    );
}
