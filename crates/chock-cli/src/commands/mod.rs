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

/// Runs a command's async work to its end on a multi-threaded runtime made for it: the binary's
/// edge, where a runtime may be made and blocked on (the workspace's clippy.toml forbids it in
/// the libraries). What is still running on it when `work` ends (a question nobody answered) is
/// not waited for.
#[allow(
    clippy::disallowed_methods,
    reason = "the command's own runtime, made and driven at the binary's edge"
)]
pub(crate) fn block_on<F: std::future::Future>(work: F) -> anyhow::Result<F::Output> {
    use anyhow::Context as _;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let out = runtime.block_on(work);
    runtime.shutdown_background();
    Ok(out)
}
