//! What the host and the call's processes share: the plan, the mount operations as data, the
//! records of the setup report channel, the limits of a session message, and the errors and
//! outcome a call reports. A leaf: nothing here uses `crate::host` or `crate::child`
//! (`crate::layering` checks it), so either side, and a future guest-side driver, reads the same
//! definitions.

pub(crate) mod error;
pub(crate) mod host_channel;
pub(crate) mod mount_ops;
pub(crate) mod outcome;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod step;

/// The largest message the host sends a session init for one call (its command and descriptors'
/// roles); the init's receive buffer is sized from it.
pub(crate) const MAX_MESSAGE: usize = 128 * 1024;
