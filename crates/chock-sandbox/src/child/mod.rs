//! What runs after fork: the call's setup process, its init, the command process, the session
//! init and the overlay helper, and the layers they apply (mount calls, namespaces, capabilities,
//! Landlock, seccomp, rlimits). Code here is allocation-free or documented where it is not
//! (`prepared.rs`), and it never uses `crate::host` (`crate::layering` checks it): a driver that
//! runs a call somewhere else than the Chock process (a microVM guest) builds from `child` and
//! `wire` alone.

pub(crate) mod caps;
pub(crate) mod command;
pub(crate) mod fresh;
pub(crate) mod init;
pub(crate) mod landlock_rules;
#[cfg(test)]
mod lifetime_tests;
pub(crate) mod limits;
pub(crate) mod mount_calls;
pub(crate) mod namespaces;
pub(crate) mod overlay_helper;
pub(crate) mod prepared;
pub mod seccomp_rules;
pub(crate) mod sys;
pub(crate) mod waiting;
pub(crate) mod zygote;
