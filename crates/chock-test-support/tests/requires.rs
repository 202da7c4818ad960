//! `requires`: a missing requirement fails the test in CI, and outside CI skips it, says so past
//! the harness's capture, and is counted by the `skipped` report. The probe below is run as a
//! child of this same test binary, with and without `CI=true`.

use std::process::Command;

/// The probe: a test whose requirement is missing. Run only by the test below.
#[test]
#[ignore = "run by requires_fails_in_ci_and_is_counted_outside_it"]
fn probe_a_test_missing_its_tool() {
    if !chock_test_support::installed("/nonexistent/chock-probe-tool") {
        return;
    }
    unreachable!("the probe's tool cannot exist");
}

fn probe(ci: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "probe_a_test_missing_its_tool"])
        .env("CI", ci)
        .output()
        .unwrap()
}

#[test]
fn requires_fails_in_ci_and_is_counted_outside_it() {
    let in_ci = probe("true");
    assert!(!in_ci.status.success(), "{in_ci:?}");
    let said = String::from_utf8_lossy(&in_ci.stdout).into_owned()
        + &String::from_utf8_lossy(&in_ci.stderr);
    assert!(
        said.contains("/nonexistent/chock-probe-tool is not installed")
            && said.contains("required in CI"),
        "{said}"
    );

    let outside = probe("false");
    assert!(outside.status.success(), "{outside:?}");
    let stderr = String::from_utf8_lossy(&outside.stderr);
    assert!(
        stderr.contains("skipped probe_a_test_missing_its_tool: /nonexistent/chock-probe-tool"),
        "{stderr}"
    );
    let dir = chock_test_support::skipped_dir().unwrap();
    let recorded = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .starts_with("probe_a_test_missing_its_tool\t")
        })
        .unwrap_or_else(|| panic!("nothing recorded in {}", dir.display()));
    // The probe's skip is this test's doing, not the run's: it is not reported.
    std::fs::remove_file(recorded.path()).unwrap();
}
