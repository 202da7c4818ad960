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

    // The call's init (pid 1 inside) was forked from this process and never executed anything, so
    // its environment block is the one this process was started with (a user's API keys, for
    // `chock`; `set_var` above changes only the copy in memory, which /proc/1/mem would show). The
    // command must read neither.
    // Layer: the init is not dumpable, so /proc/1/environ and /proc/1/mem answer only to a
    // process with CAP_SYS_PTRACE (none inside); ptrace and process_vm_readv are killed.
    for path in ["/proc/1/environ", "/proc/1/mem"] {
        let r = run(&fx.hostile_plan(&["read", path]));
        assert!(
            !r.stdout.contains(SECRET),
            "the init's environment leaked through {path}: {r:?}"
        );
        r.assert_refused("EACCES", &format!("{path} of the non-dumpable init"));
    }
}
