//! The per-call channel between a call's processes and the host (docs/git.md, "The channel"):
//! what is said on it, one wire module for both ends.
//!
//! The sandbox makes a `SOCK_SEQPACKET` socket pair per call ([`chock_sandbox::Plan::host_channel`])
//! and leaves the call's end open in the command as descriptor [`chock_sandbox::HOST_CHANNEL_FD`],
//! named in `CHOCK_CHANNEL_FD`; every process of the call inherits it. The host serves its end for
//! the call's life ([`serve`], async, on the session's runtime) and drops it when the call ends.
//!
//! **One request, one answer.** Many processes of one call may ask at once (a `make -j` running
//! git twice), so a request never waits for its answer on the shared socket: the asker makes a
//! socket pair of its own and sends one end *with* the request (one datagram, the end attached as
//! `SCM_RIGHTS`); the host writes the one answer on that end, with any descriptors the answer
//! carries, and closes it. Each datagram is one frame: a 4-byte big-endian length, then that many
//! bytes of JSON ([`encode`], [`decode`]), at most [`MAX_FRAME`] bytes in all.
//!
//! **Adding a kind** (as `chock askpass` will): add a variant to [`Request`] and one to [`Answer`]
//! (each its own struct, `#[serde(tag = "kind")]` names it on the wire), answer it in the session's
//! handler (`channel/handler.rs`, one arm of its `match`), and ask it from the program inside the
//! call with [`Client::ask`]. A host that does not know a kind answers [`Answer::Refused`] (the
//! request does not parse), so an older host refuses a newer kind instead of misreading it. Add
//! fields with `#[serde(default)]` so both ends of one build stay readable to each other.

mod askpass;
mod client;
mod frame;
mod guest_view;
mod handler;
mod remote;
mod serve;
mod tunnel;

use serde::{Deserialize, Serialize};

pub use askpass::{
    AskpassAnswer, AskpassChannel, AskpassRequest, Credentials, main as askpass_main,
};
pub use client::Client;
pub use frame::{ChannelError, MAX_FRAME, decode, encode};
pub(crate) use guest_view::GuestView;
pub(crate) use handler::CallChannel;
pub use remote::ASKPASS_MODE;
pub use serve::{Handler, Reply, serve};
pub use tunnel::{
    CONNECT_FLAG, CONNECT_MODE, SshPushError, connect_main, known_hosts_for, ssh_command,
};

/// What a process inside a call asks the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// The git shim asks to run one git invocation ([`GitRequest`]).
    Git(GitRequest),
    /// `chock askpass` carries git's credential prompt to the person ([`AskpassRequest`]).
    Askpass(AskpassRequest),
}

/// One git invocation as the shim saw it: raw, unclassified. The host classifies it itself,
/// reading the workspace repository's configuration, so a replaced shim cannot lie about the act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitRequest {
    /// How the shim was started (`argv[0]`): `git`, a full path, or `git-<command>`.
    pub invoked_as: String,
    /// The arguments after `argv[0]`.
    pub args: Vec<String>,
    /// The shim's whole environment (git reads `GIT_*` from it).
    pub env: Vec<(String, String)>,
    /// The shim's working directory inside the call; the host checks it against the process's own.
    pub cwd: String,
}

/// What the host answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The decision on a [`Request::Git`]. When allowed, the answer carries one descriptor: the
    /// real git, opened `O_PATH` on the host, for the shim to execute (it is nowhere in the call's
    /// tree).
    Git(GitAnswer),
    /// The answer to a [`Request::Askpass`]: what a person typed, or a refusal.
    Askpass(AskpassAnswer),
    /// The host did not serve the request: it did not parse, was too large, or named a kind this
    /// host does not know. Nothing was decided.
    Refused {
        /// Why, in words.
        reason: String,
    },
}

/// The decision on one git invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GitAnswer {
    /// The act it was classified as (`git.commit`).
    pub action: String,
    /// Whether it may run.
    pub allowed: bool,
    /// The rule that decided it, in words (`chock.toml:3 (rule `git.commit`)`).
    pub rule: String,
    /// Who refused, in words, when it was refused (the rule, a person, `chock`).
    #[serde(default)]
    pub by: String,
    /// Why it was refused (or, for `git.unknown`, why it could not be classified).
    #[serde(default)]
    pub reason: String,
    /// The arguments the real git runs with instead of the invocation's (an approved push runs
    /// the host's plan: `push <url> <commit>:<ref>`).
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Variables set for the real git on top of the invocation's (the push's git directory, its
    /// askpass, its agent).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// For a call in a microVM guest, where no descriptor crosses the guest's port: the real
    /// git's path under the `/usr` the guest sees read-only from the host. The guest's init
    /// hands the shim a sealed copy of it as the descriptor a local call's answer carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Whether the real git starts from [`GitAnswer::env`] alone, none of the invocation's
    /// variables (an approved push or fetch: nothing of the agent's reaches the git that holds
    /// the credential).
    #[serde(default)]
    pub env_clear: bool,
    /// What runs after the real git succeeded, as a new git invocation of the shim's, with the
    /// invocation's own environment, asked like any other (an approved pull's `merge FETCH_HEAD`).
    #[serde(default)]
    pub then: Option<Vec<String>>,
}
