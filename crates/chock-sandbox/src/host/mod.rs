//! What runs in the Chock process: a plan made into prepared data and mount steps, the fork that
//! starts a call, the threads that watch it, the session sandbox and its init's control socket,
//! the shared overlay, the socket index, cgroups, and `chock doctor`'s probes.

pub(crate) mod base_set;
pub(crate) mod call_io;
pub(crate) mod cgroup;
pub(crate) mod credential_mask;
pub mod doctor;
pub(crate) mod fresh_steps;
pub(crate) mod gate;
pub(crate) mod hints;
pub(crate) mod local;
pub(crate) mod mounts;
pub(crate) mod own_overlay;
pub(crate) mod plumbing;
pub(crate) mod prepare;
pub(crate) mod read_overlay;
pub(crate) mod ready;
pub(crate) mod running;
pub(crate) mod seccomp_watch;
pub(crate) mod session_init;
pub(crate) mod session_sandbox;
pub(crate) mod shared_overlay;
pub(crate) mod socket_index;
pub(crate) mod socket_mask;
pub(crate) mod socket_tree;
pub(crate) mod spawn;
