//! What a call's tree is made of beyond the base: what backs the project directory, where a call's
//! own overlay keeps its writes, host programs shown over files and directories of the tree, and
//! the nix store paths shown.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What backs the project directory inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkspaceMount {
    /// A host directory (the session's copy of the project) bound read-write.
    Bind {
        /// The host directory bound (the session's copy of the project).
        source: PathBuf,
    },
    /// An overlay mounted inside the call's user namespace (kernel >= 5.11): `lower` read-only
    /// (the real project), writes land in `upper`.
    Overlay {
        /// The lower directory, read-only (the real project).
        lower: PathBuf,
        /// The upper directory, where writes land.
        upper: PathBuf,
        /// overlayfs' work directory (on the same filesystem as `upper`).
        work: PathBuf,
    },
    /// The real project itself, read-only, and nothing writable at `project_path`: what a
    /// long-lived service the person configured (an MCP server) runs from, so that it runs what
    /// the person trusted and never what the agent wrote in its workspace. Shown through a
    /// read-only overlay of its own (`read_overlay.rs`), so a host socket in the project answers
    /// nothing. No declared write path may lie inside it.
    ReadOnly {
        /// The real project, shown read-only.
        source: PathBuf,
    },
}

/// Where a call's own overlay instance (one it mounts itself, not the session's shared one)
/// keeps the upper layer, which holds everything the call writes to the workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnOverlay {
    /// The workspace's upper and work directories on the host, synced like any other files: the
    /// work is reviewed (and applied) after the call.
    #[default]
    Durable,
    /// The same directories, mounted `volatile`: a workspace thrown away unreviewed whose later
    /// calls still read what this one wrote, so nothing needs to reach the disk. The mount leaves
    /// `work/incompat/volatile`, which the next mount of the same layers removes first.
    Volatile,
    /// A tmpfs of the call's own, made in its mount namespace and gone with it: the one call of a
    /// session whose workspace is thrown away (`chock exec` without `--keep`), whose writes are
    /// read by nobody after it. Nothing of the workspace is created or removed on a disk. Its
    /// size is the kernel's tmpfs default, half of the machine's memory; the pages count against
    /// the call's memory limit. The upper and work paths of [`WorkspaceMount::Overlay`] are not
    /// used and need not exist.
    InMemory,
}

/// A host program shown in place of a file of the call's tree
/// ([`Plan::shims`](super::Plan::shims)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shim {
    /// The program on the host.
    pub source: PathBuf,
    /// The file of the tree it hides (absolute, inside the sandbox).
    pub target: PathBuf,
}

/// A directory of the call's tree shown with a host directory's files over some of its own
/// ([`Plan::shim_dirs`](super::Plan::shim_dirs)): the call sees `layer`'s entries in place of the
/// target's entries of the same names, and every other entry of the target as it was, read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimDir {
    /// The host directory holding, under each name to hide, the program shown in its place
    /// (absolute, written by the host only).
    pub layer: PathBuf,
    /// The directory of the tree it lies over (absolute, inside the sandbox).
    pub target: PathBuf,
}

/// One nix store path a call sees, and where it lies on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorePath {
    /// Where it lies on the host (already checked by the policy's host path checker).
    pub source: PathBuf,
    /// Its store path, where the call sees it: directly under `/nix/store`.
    pub target: PathBuf,
}

/// The directory every store path a call sees lies directly under.
pub const STORE_DIR: &str = "/nix/store";
