//! One module per command; each owns its clap arguments and its `run`.

pub mod acp;
pub mod apply;
pub mod attach;
pub mod detach;
pub mod diff;
pub mod doctor;
pub mod exec;
pub(crate) mod exec_egress;
pub(crate) mod exec_terminal;
pub mod init;
pub mod login;
pub mod login_chatgpt;
pub mod mcp;
pub(crate) mod mcp_login;
pub mod memory;
pub mod migrate;
pub mod plugin;
pub mod policy;
pub(crate) mod policy_show;
pub mod protocol;
pub mod run;
pub mod serve;
pub mod sessions;
pub mod tui;
pub mod vm;
pub mod workspace;
