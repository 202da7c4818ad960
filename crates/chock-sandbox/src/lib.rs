//! The confined tool call: namespaces, mounts, Landlock, seccomp, limits, applied in-process after fork.
