//! The policy table: action names, chock.toml and the org bundle, resolution, the ratchet.
//!
//! Every act Chock may perform has an action name ([`Action`]); the table maps names to a
//! [`Decision`]. Three files feed it — the shipped defaults, the organisation's bundle and the
//! project's `chock.toml` — plus the session's ratchet, which only narrows. The crate is pure: it reads
//! files and environment variables when asked to load, and never touches the kernel. See docs/policy.md.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod action;
pub mod catalogue;
mod decision;
mod error;
mod file;
pub mod git;
mod host_paths;
mod limits;
pub mod mcp;
pub mod mcp_oauth;
mod pattern;
mod plugins;
mod policy;
mod ratchet;
mod sandbox;
mod sources;
mod table;
pub mod toolchains;
mod user_config;

pub use action::{Action, ActionError, ExecClass, reverse_host};
pub use decision::Decision;
pub use error::{ErrorKind, PolicyError};
pub use host_paths::{
    Access, DeclaredPath, HostPaths, binaries_dir, binaries_dirs, check_nesting, sees_a_write_path,
    under_write_path,
};
pub use limits::{BudgetConfig, LimitsConfig, SubagentsConfig};
pub use pattern::{Pattern, Specificity};
pub use plugins::{
    DEFAULT_PLUGIN_FUEL, DEFAULT_PLUGIN_MEMORY_MB, DEFAULT_PLUGIN_OUTPUT_KB,
    DEFAULT_PLUGIN_TIMEOUT, PluginConfig,
};
pub use policy::{
    DecidedBy, Policy, SHIPPED_DEFAULTS, SHIPPED_DEFAULTS_NAME, Verdict, shipped_defaults,
};
pub use ratchet::{Ratchet, RatchetError};
pub use sandbox::{Isolation, SandboxConfig, check_passed_env};
pub use sources::{
    DEFAULT_ORG_BUNDLE, ORG_POLICY_ENV, PROJECT_FILE, Presence, Source, Sources,
    chock_dirs_from_env, org_bundle_path, project_file_path, read_source,
};
pub use table::{Rule, RuleTable};
pub use user_config::{USER_CONFIG_FILE, user_config_path};
