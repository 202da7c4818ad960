//! The agent core: the session, the loop, the tools and the approvals, as a library that emits events.
#![forbid(unsafe_code)]
