//! The host's network broker: per-host decisions, checked and pinned DNS, fetch_url, the egress proxy.
#![forbid(unsafe_code)]
