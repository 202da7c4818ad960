//! `chock doctor`: every layer probed for real; exit 0 only when every required layer is on.

mod run_support;

use run_support::World;

fn doctor(args: &[&str]) -> std::process::Output {
    let mut argv = vec!["doctor"];
    argv.extend_from_slice(args);
    World::new().chock(&argv)
}

#[test]
fn json_lists_every_layer_and_the_status_matches() {
    let out = doctor(&["--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let layers = doc["layers"].as_array().unwrap();
    let names: Vec<&str> = layers
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    insta::assert_snapshot!(names.join("\n"), @r"
    user namespace
    mount namespace
    pid namespace
    ipc namespace
    uts namespace
    network namespace
    cgroup namespace
    overlayfs in a user namespace
    capabilities dropped
    no_new_privs
    landlock
    seccomp
    whole call
    cgroup limits
    socket index
    kvm
    nix
    microvm guest
    ");
    let required_on = layers
        .iter()
        .all(|l| l["on"] == true || l["required"] == false);
    assert_eq!(doc["ok"], required_on);
    assert_eq!(out.status.code(), Some(if required_on { 0 } else { 1 }));
    for optional in [
        "cgroup limits",
        "socket index",
        "kvm",
        "nix",
        "microvm guest",
    ] {
        let row = layers.iter().find(|l| l["layer"] == optional).unwrap();
        assert_eq!(row["required"], false, "{optional} is not required");
    }
}

#[test]
fn on_this_machine_every_required_layer_is_on_and_kvm_is_described() {
    let out = doctor(&[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("every required layer is on"));
    let landlock = table.lines().find(|l| l.contains("landlock")).unwrap();
    assert!(landlock.contains("ABI "), "{landlock}");
    let kvm = table.lines().find(|l| l.contains("kvm")).unwrap();
    assert!(
        kvm.contains("modules:") && kvm.contains("cpu flags:"),
        "{kvm}"
    );
    // The guest's row says which accelerator a guest would run with, and why.
    let guest = table.lines().find(|l| l.contains("microvm guest")).unwrap();
    assert!(
        guest.contains("under tcg (") || guest.contains("under kvm ("),
        "{guest}"
    );
}
