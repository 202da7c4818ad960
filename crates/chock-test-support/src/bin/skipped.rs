//! Reports the tests the last run skipped outside CI, and why, then forgets them: the end of the
//! README's test command.

use std::collections::BTreeMap;

fn main() {
    let Some(dir) = std::env::current_exe().ok().and_then(|exe| {
        // target/<profile>/skipped → target/chock-skipped
        Some(
            exe.parent()?
                .parent()?
                .join(chock_test_support::SKIPPED_DIR),
        )
    }) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("no test was skipped");
        return;
    };
    let mut why: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if let Some((test, reason)) = text.trim_end().split_once('\t') {
            why.entry(reason.to_string())
                .or_default()
                .push(test.to_string());
        }
        let _ = std::fs::remove_file(entry.path());
    }
    let count: usize = why.values().map(Vec::len).sum();
    if count == 0 {
        println!("no test was skipped");
        return;
    }
    println!("{count} test(s) were skipped (CI runs them all):");
    for (reason, tests) in &why {
        println!("  {reason}: {}", tests.join(", "));
    }
}
