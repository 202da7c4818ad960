//! Tables count against `memory_mb` with the linear memory, a store makes only a few instances,
//! tables and memories, and listing the tools (at every session start) runs under the same memory
//! cap, fuel and timeout as a call: each tried by a hostile component made in the test (`hog`).

mod hog;

use chock_plugin::PluginError;
use hog::{SMALL, Start, hog_module, hostile, load, with_hog};

#[test]
fn the_unchanged_hostile_plugin_lists_its_tools_under_the_small_cap() {
    let Some(hostile) = hostile() else { return };
    let plugin = load(&hostile, SMALL).unwrap();
    let roomy = load(&hostile, "memory_mb = 64").unwrap();
    assert!(!roomy.tools().is_empty());
    assert_eq!(plugin.tools().len(), roomy.tools().len());
}

#[test]
fn table_elements_count_against_the_memory_cap() {
    let Some(hostile) = hostile() else { return };
    // Four tables of 100,000 elements: within every count, but 6.4 MB at 16 bytes an element
    // (3.2 MB even at a pointer's 8) against a 2 MB cap.
    let wasm = with_hog(&hostile, &hog_module(4, 100_000, Start::Fill), 1);
    let err = load(&wasm, SMALL).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PluginError::Tools { .. }), "{text}");
    assert!(
        text.starts_with("plugin probe: listing its tools failed"),
        "{text}"
    );
    assert!(text.contains("tables"), "{text}");
    assert!(text.contains("its cap is 2097152 (memory_mb)"), "{text}");
}

#[test]
fn a_store_makes_only_a_few_instances_and_tables() {
    let Some(hostile) = hostile() else { return };
    // Thirty instances of a module with one one-element table: tiny, but too many instances.
    let wasm = with_hog(&hostile, &hog_module(1, 1, Start::Fill), 30);
    let text = load(&wasm, SMALL).unwrap_err().to_string();
    assert!(
        text.starts_with("plugin probe: listing its tools failed"),
        "{text}"
    );
    assert!(text.contains("at most 8 core instances"), "{text}");
    assert!(text.contains("instance count"), "{text}");
    // One instance with forty one-element tables: too many tables.
    let wasm = with_hog(&hostile, &hog_module(40, 1, Start::Fill), 1);
    let text = load(&wasm, SMALL).unwrap_err().to_string();
    assert!(text.contains("16 tables"), "{text}");
    assert!(text.contains("table count"), "{text}");
}

#[test]
fn listing_the_tools_runs_under_the_fuel_and_the_timeout() {
    let Some(hostile) = hostile() else { return };
    let wasm = with_hog(&hostile, &hog_module(1, 1, Start::Spin), 1);
    let text = load(&wasm, "fuel = 1000000\ntimeout_secs = 30")
        .unwrap_err()
        .to_string();
    assert_eq!(
        text, "plugin probe: listing its tools failed: it ran out of fuel",
        "{text}"
    );
    let started = std::time::Instant::now();
    let text = load(&wasm, "fuel = 4000000000000000000\ntimeout_secs = 1")
        .unwrap_err()
        .to_string();
    assert_eq!(
        text, "plugin probe: listing its tools failed: it ran past its timeout",
        "{text}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
