//! The policy table: action names, chock.toml and the org bundle, resolution, the ratchet.
#![forbid(unsafe_code)]
