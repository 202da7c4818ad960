//! A stdio server's confined process: its sandbox's options, its start through the session's
//! service (the session's confiner, on the caller's runtime), rmcp's client over its pipes, and
//! its stderr drained on the same runtime for an error message.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chock_policy::mcp::ServerDef;
use chock_session::{Service, ServiceOptions, Session};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use tokio::io::AsyncReadExt;

use crate::McpError;
use crate::client::Handler;
use crate::server::StartContext;

/// Drains the server's stderr on the caller's runtime, keeping the last few kilobytes for an
/// error message. It ends when the server's last process is gone (the pipe's end-of-file).
fn drain_stderr(stderr: Option<std::fs::File>) -> Arc<Mutex<String>> {
    let tail = Arc::new(Mutex::new(String::new()));
    let Some(file) = stderr else {
        return tail;
    };
    let Ok(mut pipe) = tokio::net::unix::pipe::Receiver::from_file(file) else {
        return tail;
    };
    let tail_in = Arc::clone(&tail);
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = tail_in.lock() {
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > 4096 {
                    let cut = t.len() - 4096;
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        }
    });
    tail
}

/// The options of a stdio server's sandbox: its state directory in the session, its declared
/// paths, the environment names it is given.
fn service_options(
    session: &Session,
    def: &ServerDef,
    network: bool,
) -> Result<ServiceOptions, McpError> {
    let state = session.dir().join("mcp").join(&def.name);
    std::fs::create_dir_all(&state).map_err(|e| McpError::Start {
        server: def.name.clone(),
        message: format!("cannot make its state directory {}: {e}", state.display()),
    })?;
    let mut env = vec![
        ("XDG_STATE_HOME".to_string(), state.display().to_string()),
        ("XDG_DATA_HOME".to_string(), state.display().to_string()),
        ("CHOCK_MCP_STATE".to_string(), state.display().to_string()),
    ];
    for name in &def.env {
        if let Ok(value) = std::env::var(name) {
            env.push((name.clone(), value));
        }
    }
    let mut extra_write: Vec<PathBuf> = vec![state];
    for cache in &def.cache {
        crate::declared::make_cache(cache).map_err(|e| McpError::Start {
            server: def.name.clone(),
            message: format!("cannot make its cache {}: {e}", cache.display()),
        })?;
        extra_write.push(cache.clone());
    }
    Ok(ServiceOptions {
        call_id: format!("mcp-{}", def.name),
        extra_read: def.read.clone(),
        extra_write,
        env,
        network,
    })
}

/// A stdio server: its network act settled, the confined process started by the session's
/// service, rmcp's client over its pipes (within the startup timeout).
pub(crate) async fn launch(
    session: &Session,
    def: &ServerDef,
    cx: &StartContext,
    argv: &[String],
    handler: Handler,
) -> Result<(RunningService<RoleClient, Handler>, Service, bool), McpError> {
    let log = cx.pipeline.log().clone();
    let network_action = chock_policy::Action::mcp_network(&def.name)?;
    let network = cx
        .pipeline
        .settle(
            None,
            &network_action,
            &format!(
                "let MCP server `{}` reach the network through Chock's broker (each host is then decided by the net.connect rules)",
                def.name
            ),
        )
        .await?
        .allowed();
    let options = service_options(session, def, network)?;
    let failed = |error: String| crate::server::failed(&log, &def.name, error);
    let mut service = session
        .spawn_service(argv, &options, &cx.pipeline)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let stdin = service.stdin.take();
    let stdout = service.stdout.take();
    let tail = drain_stderr(service.stderr.take());
    let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
        return Err(failed("the sandbox gave no pipes".into()));
    };
    let reader = tokio::net::unix::pipe::Receiver::from_file(stdout)
        .map_err(|e| failed(format!("its stdout: {e}")))?;
    let writer = tokio::net::unix::pipe::Sender::from_file(stdin)
        .map_err(|e| failed(format!("its stdin: {e}")))?;
    let started = tokio::time::timeout(
        def.startup_timeout(),
        crate::negotiate::serve(handler, (reader, writer)),
    )
    .await;
    let stderr = || {
        tail.lock()
            .map(|t| t.trim().to_string())
            .unwrap_or_default()
    };
    match started {
        Ok(Ok(client)) => Ok((client, service, network)),
        Ok(Err(e)) => Err(failed(format!(
            "initialize failed: {e}; its stderr: {}",
            stderr()
        ))),
        Err(_) => Err(failed(format!(
            "did not answer initialize within {}s; its stderr: {}",
            def.startup_timeout_secs,
            stderr()
        ))),
    }
}
