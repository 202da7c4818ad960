//! `chock mcp login NAME` and `chock mcp logout NAME`: the OAuth authorization of a streamable
//! HTTP server (docs/mcp.md, "Authorization").
//!
//! The host makes every request (the server's challenge, the metadata documents, registration,
//! the token endpoint) through the broker's door, in a scratch session whose log records each
//! `net.connect` decision. The authorization server's host is such a destination: the table
//! decides whether the server may send the person there, and the URL shown names it. The person
//! authorizes in their browser; the redirect comes back to a one-shot listener on 127.0.0.1. The
//! grant is kept in the OS keyring, else a 0600 file, and is never printed.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chock_broker::{Broker, BrokerConfig};
use chock_decide::ApprovalBroker;
use chock_mcp::oauth::DoorTransport;
use chock_oauth::client::{ClientConfig, revoke};
use chock_oauth::loopback::open_browser;
use chock_oauth::metadata::canonical_resource;
use chock_oauth::store::{self, Grant};
use chock_oauth::{Challenge, ClientChoice, HttpRequest, Transport, discover, sign_in_with_code};
use chock_policy::mcp::{ServerDef, Transport as McpTransport};

use crate::exit::{BAD_INPUT, Exit, FAILURE};
use crate::say::{say, say_err};

/// How long the person has to finish in the browser.
const WAIT: Duration = Duration::from_secs(300);

/// The URL of the configured streamable HTTP server `name`.
fn server_url(name: &str, project: &Path) -> anyhow::Result<String> {
    server_def(name, project).map(|(url, _)| url)
}

/// The URL and definition of the configured streamable HTTP server `name`.
fn server_def(name: &str, project: &Path) -> anyhow::Result<(String, ServerDef)> {
    let (servers, _, _) = super::mcp::load(project)?;
    let server = super::mcp::find(&servers, name)?;
    match &server.def.transport {
        McpTransport::Http { url } => Ok((url.clone(), server.def.clone())),
        McpTransport::Sse { .. } => Err(Exit::new(
            BAD_INPUT,
            format!("`{name}` is a legacy HTTP+SSE server; `chock mcp login` signs in to streamable HTTP servers (`url = …`) only"),
        )
        .into()),
        McpTransport::Stdio { .. } => Err(Exit::new(
            BAD_INPUT,
            format!("`{name}` is a stdio server; authorization is for streamable HTTP servers (`url = …`)"),
        )
        .into()),
    }
}

/// Runs `work` with a transport through the broker's door, in a scratch session whose log
/// records every destination's decision (call id `mcp-<name>-<what>`). At a terminal the person
/// answers what the table puts to a question (the authorization server's `net.connect`, its host
/// in the question); without one, a question is a refusal.
fn with_door<R>(
    project: &Path,
    call_id: &str,
    work: impl AsyncFnOnce(&DoorTransport) -> R,
) -> anyhow::Result<R> {
    let session = super::mcp::scratch(project)?;
    let mut asker = ApprovalBroker::new();
    if std::io::stderr().is_terminal()
        && let Some(terminal) = chock_terminal::TerminalAnswerer::stdin_if_terminal()
    {
        asker = asker.with(Arc::new(terminal));
    }
    let pipeline = session.pipeline(asker);
    let broker = Broker::new(
        Arc::new(pipeline.gate(call_id)),
        pipeline.log().clone(),
        BrokerConfig::default(),
    )
    .map_err(|e| Exit::new(FAILURE, e.to_string()))?
    .for_call(call_id);
    let transport = DoorTransport::new(broker);
    let result = super::block_on(work(&transport))?;
    let _ = session.close(false);
    Ok(result)
}

/// `chock mcp login NAME`.
pub fn login(name: &str, project: &Path, client_id: Option<String>) -> anyhow::Result<ExitCode> {
    let (url, def) = server_def(name, project)?;
    // The table's client (`client_id`, `client_secret_env`, `client_metadata_url`); `--client-id`
    // names a pre-registered public client over it.
    let mut config = chock_mcp::oauth::client_config(&def).map_err(|e| Exit::new(BAD_INPUT, e))?;
    if let Some(id) = client_id {
        config.client_id = Some(id);
        config.client_secret = None;
    }
    let call_id = format!("mcp-{name}-login");
    let result = with_door(project, &call_id, async |t| {
        sign_in(t, name, &url, &config).await
    })?;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(Exit::new(FAILURE, format!("{name}: {e}")).into()),
    }
}

async fn sign_in(
    transport: &DoorTransport,
    name: &str,
    url: &str,
    config: &ClientConfig,
) -> Result<(), chock_oauth::OAuthError> {
    // The server's own challenge first: it may name its metadata document and the scope.
    let probe = HttpRequest {
        method: http::Method::POST,
        url: chock_oauth::metadata::check_url(url)?,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
        ],
        body: br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#.to_vec(),
    };
    let challenge = match transport.send(probe).await {
        Ok(answer) if answer.status == 401 => {
            Challenge::from_headers(answer.headers_named("www-authenticate"))
        }
        _ => None,
    };
    let found = discover(transport, url, challenge.as_ref()).await?;
    say!(
        "{name}: authorization server {} (issuer {}), for the resource {}",
        found.auth_server_host(),
        found.auth_server.issuer,
        found.resource
    );
    let (client, token) = sign_in_with_code(
        transport,
        &found,
        ClientChoice::Register(config),
        found.scope.as_deref(),
        &Terminal { door: transport },
        WAIT,
    )
    .await?;
    let grant = Grant {
        server: url.to_string(),
        resource: found.resource.clone(),
        issuer: found.auth_server.issuer.to_string(),
        client_id: client.client_id.clone(),
        client_secret: client.client_secret.clone(),
        auth_method: client.auth_method.name().to_string(),
        revocation_endpoint: found
            .auth_server
            .revocation_endpoint
            .as_ref()
            .map(|u| u.to_string()),
        token,
        dpop_key: client.dpop.clone(),
    };
    let kept = store::save(&grant)?;
    say!("{name}: authorized; the token is kept in {kept}");
    Ok(())
}

/// The person's browser: once the door has decided (and logged) `net.connect` to the
/// authorization endpoint's host, the URL printed (naming that host) and opened with `$BROWSER`,
/// else `xdg-open`.
struct Terminal<'a> {
    door: &'a DoorTransport,
}

impl chock_oauth::Browser for Terminal<'_> {
    fn visit<'a>(&'a self, url: &'a url::Url, host: &'a str) -> chock_oauth::Visit<'a> {
        Box::pin(async move {
            self.door.admit(url).await?;
            say!("Open this URL to authorize Chock (it leads to {host}):");
            say!("  {url}");
            if open_browser(url.as_str()) {
                say!("(a browser was started; waiting up to {}s)", WAIT.as_secs());
            }
            Ok(())
        })
    }
}

/// `chock mcp logout NAME`: revokes the grant at the authorization server when it has a
/// revocation endpoint (the refresh token, then the access token; through the broker's door like
/// every request), and forgets it either way. Its resource is the server's canonical URI, or the
/// origin a root-level metadata document named.
pub fn logout(name: &str, project: &Path) -> anyhow::Result<ExitCode> {
    let url = server_url(name, project)?;
    let parsed =
        chock_oauth::metadata::check_url(&url).map_err(|e| Exit::new(BAD_INPUT, e.to_string()))?;
    let mut origin = parsed.clone();
    origin.set_path("/");
    let resources = [canonical_resource(&parsed), canonical_resource(&origin)];
    let failed = |e: chock_oauth::OAuthError| Exit::new(FAILURE, format!("{name}: {e}"));
    for resource in &resources {
        let Some(grant) = store::load(&url, resource).map_err(failed)? else {
            continue;
        };
        let Some(endpoint) = grant.revocation_endpoint.as_deref() else {
            continue;
        };
        let endpoint = chock_oauth::metadata::check_url(endpoint).map_err(failed)?;
        let call_id = format!("mcp-{name}-logout");
        let revoked = with_door(project, &call_id, async |t| {
            let client = grant.client();
            if let Some(refresh) = &grant.token.refresh_token {
                revoke(t, &endpoint, &client, refresh, "refresh_token").await?;
            }
            revoke(
                t,
                &endpoint,
                &client,
                &grant.token.access_token,
                "access_token",
            )
            .await
        })?;
        match revoked {
            Ok(()) => say!(
                "{name}: the token is revoked at {}",
                endpoint.host_str().unwrap_or_default()
            ),
            Err(e) => {
                say_err!("{name}: could not revoke the token ({e}); it is forgotten here anyway")
            }
        }
    }
    let mut removed = false;
    for resource in &resources {
        removed |= store::forget(&url, resource).map_err(failed)?;
    }
    if removed {
        say!("{name}: signed out; the stored token is removed");
    } else {
        say_err!("{name}: no stored token file (any keyring entry was cleared)");
    }
    Ok(ExitCode::SUCCESS)
}
