//! An apply never writes set-uid/set-gid bits into the real project: a project file that has them
//! loses them when the workspace's content is written over it, and the apply's record and event
//! say so. (Inside the sandbox the seccomp filter already refuses set-id modes; this is the
//! boundary at the real project itself.)

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use chock_workspace::{Selection, plan_undo};
use common::{Env, in_overlay};

fn mode(env: &Env, path: &str) -> u32 {
    fs::metadata(env.project.join(path))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn apply_strips_set_id_bits_and_records_it() {
    let env = Env::git(&[("tool", "#!/bin/sh\necho old\n"), ("plain.txt", "a\n")]);
    fs::set_permissions(env.project.join("tool"), fs::Permissions::from_mode(0o6755)).unwrap();
    assert_eq!(
        mode(&env, "tool"),
        0o6755,
        "the fixture needs a set-id file"
    );
    let ws = env.workspace("sid");
    in_overlay(
        &ws,
        "printf '#!/bin/sh\\necho new\\n' > tool && echo b > plain.txt",
    );
    let plan = ws.plan_apply(&Selection::default()).unwrap();
    let event = plan.event();
    assert_eq!(event.setid_stripped, vec!["tool".to_string()], "{event:?}");
    let (record, _) = plan.commit().unwrap();
    assert_eq!(record.setid_stripped, vec!["tool".to_string()]);
    assert_eq!(env.read("tool"), "#!/bin/sh\necho new\n");
    assert_eq!(
        mode(&env, "tool"),
        0o755,
        "the set-id bits were written into the project"
    );
    assert_eq!(mode(&env, "plain.txt") & 0o6000, 0);
    // Undo writes the old content back, also without the bits.
    let (undo, _) = plan_undo(&env.sessions, &record.apply_id)
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(env.read("tool"), "#!/bin/sh\necho old\n");
    assert_eq!(mode(&env, "tool") & 0o6000, 0);
    assert!(
        undo.setid_stripped.is_empty(),
        "nothing set-id left to strip"
    );
}
