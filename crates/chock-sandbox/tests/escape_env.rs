//! Escape suite, environment: a secret in the host process's environment never reaches a call.
//! One test in this binary only, because it changes the process environment.

mod escape_support;

use escape_support::{Backing, Fixture, SECRET, run};

const NAME: &str = "CHOCK_ESCAPE_API_KEY";

/// Attack: read the host's environment (an API key set in the process that spawns the call).
/// Layers: the scrub (`Plan::builder(..).build()` keeps only the allowlist) and the driver (the
/// command gets exactly the plan's environment, never the spawning process's).
#[test]
fn the_host_environment_does_not_reach_the_call() {
    // SAFETY: this binary holds this one test, and nothing else reads or writes the environment
    // while it runs (the harness thread only waits for it).
    unsafe { std::env::set_var(NAME, SECRET) };
    let fx = Fixture::new(Backing::Overlay);

    // The plan the way callers build it: scrubbed from this process's environment.
    let argv = vec![fx.hostile(), "env".to_string()];
    let scrubbed =
        chock_sandbox::Plan::builder(argv.clone(), fx.mount(), fx.project.clone()).build();
    assert!(
        scrubbed
            .env
            .iter()
            .all(|(k, v)| k != NAME && !v.contains(SECRET)),
        "the scrub kept the secret"
    );
    let r = run(&scrubbed);
    let out = r.assert_reported();
    assert!(
        !out.contains(SECRET) && !out.contains(NAME),
        "the secret reached the call:\n{out}"
    );

    // The driver alone: the plan says PATH and HOME only; the process has the secret.
    let plan = fx.plan(argv);
    let r = run(&plan);
    let out = r.assert_reported();
    assert!(
        !out.contains(SECRET),
        "the driver passed the host environment:\n{out}"
    );
    let mut names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = plan.env.iter().map(|(k, _)| k.as_str()).collect();
    expected.sort_unstable();
    assert_eq!(
        names, expected,
        "the call's environment is not exactly the plan's"
    );
}
