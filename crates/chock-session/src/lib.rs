//! One session on the host: its policy, log and workspace, and the confined call that ties decision,
//! log and sandbox together. `chock exec` and the agent's run_command both go through here, so the two
//! cannot drift apart.
#![forbid(unsafe_code)]
