//! A session's streamable HTTP server with a token `chock mcp login` stored: every request of the
//! session's client (initialize, the listing, a call) carries the token to the server's origin,
//! and to no other (the authorization server, reached for the refresh, never sees it); a token
//! about to expire is refreshed first through the broker's door and the fresh grant is stored;
//! no token appears in any line of the session's log. Without a stored grant the server's 401 is
//! an error that names its challenge's scope and says to sign in.
//!
//! One test in this binary: it points the data directory (where the grant is kept) at a temp
//! directory before anything else runs.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chock_mcp::CallOutcome;
use chock_oauth::store::{self, Grant};
use chock_oauth::{Secret, Token};
use chock_policy::mcp::RawServer;
use serde_json::{Value, json};
use support::{World, user_server};

const OLD_ACCESS: &str = "AT-OLD-5e1f0c";
const OLD_REFRESH: &str = "RT-OLD-8d2b7a";
const FRESH_ACCESS: &str = "AT-FRESH-41c9e3";
const FRESH_REFRESH: &str = "RT-FRESH-a07d55";

#[derive(Default)]
struct Seen {
    /// The resource's requests: (method, Authorization).
    resource: Vec<(String, Option<String>)>,
    /// The authorization server's requests: (path, Authorization).
    auth: Vec<(String, Option<String>)>,
    /// The token endpoint's forms.
    forms: Vec<HashMap<String, String>>,
    resource_base: String,
    issuer: String,
}

type Shared = Arc<Mutex<Seen>>;

use support::{authorization_of as auth_of, serve_app as serve};

async fn prm(State(s): State<Shared>) -> Response {
    let s = s.lock().unwrap();
    axum::Json(json!({
        "resource": format!("{}/mcp", s.resource_base),
        "authorization_servers": [s.issuer],
    }))
    .into_response()
}

async fn as_metadata(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let mut s = s.lock().unwrap();
    s.auth.push(("metadata".into(), auth_of(&headers)));
    let i = s.issuer.clone();
    axum::Json(json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/authorize"),
        "token_endpoint": format!("{i}/token"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
    .into_response()
}

async fn token(
    State(s): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let mut s = s.lock().unwrap();
    s.auth.push(("token".into(), auth_of(&headers)));
    s.forms.push(f.clone());
    if f.get("grant_type").map(String::as_str) != Some("refresh_token")
        || f.get("refresh_token").map(String::as_str) != Some(OLD_REFRESH)
    {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    }
    axum::Json(json!({
        "access_token": FRESH_ACCESS, "token_type": "Bearer", "expires_in": 3600,
        "refresh_token": FRESH_REFRESH,
    }))
    .into_response()
}

/// A minimal streamable HTTP MCP server (JSON answers) that takes the fresh token only.
async fn mcp(State(s): State<Shared>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let auth = auth_of(&headers);
    let base = {
        let mut s = s.lock().unwrap();
        s.resource.push(("POST".into(), auth.clone()));
        s.resource_base.clone()
    };
    if auth.as_deref() != Some(format!("Bearer {FRESH_ACCESS}").as_str()) {
        let challenge = format!(
            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", scope="tools""#
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    let message: Value = serde_json::from_slice(&body).unwrap();
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "guarded", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "Says who you are.",
            "inputSchema": {"type": "object", "properties": {}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "you are signed in"}]}),
        _ => json!({}),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn mcp_other(
    State(s): State<Shared>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> StatusCode {
    s.lock()
        .unwrap()
        .resource
        .push((method.to_string(), auth_of(&headers)));
    StatusCode::METHOD_NOT_ALLOWED
}

fn server(url: &str) -> chock_mcp::Configured {
    user_server(
        "guarded",
        &RawServer {
            url: Some(url.to_string()),
            startup_timeout_secs: Some(20),
            ..RawServer::default()
        },
    )
}

fn port_of(origin: &str) -> &str {
    origin.rsplit(':').next().unwrap()
}

#[test]
fn a_stored_token_goes_to_its_server_only_is_refreshed_and_is_never_logged() {
    let data = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary sets the variable before it starts any thread of its
    // own or reads the environment elsewhere.
    unsafe { std::env::set_var("XDG_DATA_HOME", data.path()) };
    // SAFETY: as above. No keyring: the grant is kept in that directory only.
    unsafe { std::env::remove_var("DBUS_SESSION_BUS_ADDRESS") };

    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared: Shared = Arc::default();
    let (resource, auth) = rt.block_on(async {
        let auth = serve(
            Router::new()
                .route("/.well-known/oauth-authorization-server", get(as_metadata))
                .route("/token", post(token))
                .with_state(shared.clone()),
        )
        .await;
        let resource = serve(
            Router::new()
                .route("/.well-known/oauth-protected-resource/mcp", get(prm))
                .route("/mcp", post(mcp).get(mcp_other).delete(mcp_other))
                .with_state(shared.clone()),
        )
        .await;
        (resource, auth)
    });
    {
        let mut s = shared.lock().unwrap();
        s.resource_base = resource.clone();
        s.issuer = auth.clone();
    }
    let url = format!("{resource}/mcp");
    let rules = format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.guarded.tool.whoami\"\ndecision = \"allow\"\n",
        port_of(&resource),
        port_of(&auth),
    );

    // Without a stored grant: the 401 fails the start, naming the challenge's scope and the way in.
    let unsigned = World::new(&rules);
    let pipeline = unsigned.pipeline(None);
    let hub = unsigned.start(&[server(&url)], &pipeline, false, None);
    assert!(hub.servers().is_empty());
    let failures = format!("{:?}", hub.failures());
    assert!(
        failures.contains("401")
            && failures.contains("chock mcp login")
            && failures.contains("`tools`"),
        "{failures}"
    );
    drop(hub);

    // A grant whose token expires within the minute.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let resource_uri = chock_oauth::metadata::canonical_resource(&url::Url::parse(&url).unwrap());
    let grant = Grant {
        server: url.clone(),
        resource: resource_uri.clone(),
        issuer: auth.clone(),
        client_id: "public-client".into(),
        client_secret: None,
        auth_method: "none".into(),
        revocation_endpoint: None,
        token: Token {
            access_token: Secret::new(OLD_ACCESS),
            token_type: "Bearer".into(),
            expires_at: Some(now + 10),
            refresh_token: Some(Secret::new(OLD_REFRESH)),
            scope: Some("tools".into()),
            resource: resource_uri.clone(),
        },
        dpop_key: None,
    };
    store::save_in(&data.path().join("chock/credentials"), &grant).unwrap();

    let world = World::new(&rules);
    let pipeline = world.pipeline(None);
    let hub = world.start(&[server(&url)], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let tool = offered
        .iter()
        .find(|t| t.def().name == "whoami")
        .expect("whoami offered");
    let out = rt.block_on(tool.call("c1", &json!({}), &pipeline)).unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error && text.contains("you are signed in"), "{text}");
    drop(offered);
    drop(hub);

    let seen = shared.lock().unwrap();
    // One refresh, at the token endpoint, naming the client and the resource; the authorization
    // server saw no Authorization header at all.
    assert_eq!(seen.forms.len(), 1, "one refresh");
    assert_eq!(seen.forms[0]["resource"], resource_uri);
    assert_eq!(seen.forms[0]["client_id"], "public-client");
    assert!(
        seen.auth.iter().all(|(_, a)| a.is_none()),
        "the authorization server saw no Authorization header: {:?}",
        seen.auth
    );
    // Every request of the second session carried the fresh token (the first session's carried
    // none); the old one was never sent.
    let with_token: Vec<_> = seen.resource.iter().filter(|(_, a)| a.is_some()).collect();
    assert!(
        with_token.len() >= 3,
        "initialize, the listing, the call: {:?}",
        seen.resource
    );
    assert!(
        with_token
            .iter()
            .all(|(_, a)| a.as_deref() == Some(format!("Bearer {FRESH_ACCESS}").as_str())),
        "{:?}",
        seen.resource
    );
    drop(seen);

    // The fresh grant is stored.
    let kept = store::load(&url, &resource_uri)
        .unwrap()
        .expect("the grant");
    assert_eq!(kept.token.access_token.expose(), FRESH_ACCESS);
    assert_eq!(
        kept.token.refresh_token.as_ref().map(Secret::expose),
        Some(FRESH_REFRESH)
    );

    // No token, old or fresh, in any line of either session's log; the log does hold the
    // decision of the refresh's destination (so the search reads what was written).
    let mut logged = String::new();
    for dir in [unsigned.session.log().dir(), world.session.log().dir()] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                logged.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    assert!(
        logged.contains(&format!("net.connect.1.0.0.127.{}", port_of(&auth))),
        "the refresh's destination is logged"
    );
    for secret in [OLD_ACCESS, OLD_REFRESH, FRESH_ACCESS, FRESH_REFRESH] {
        assert!(!logged.contains(secret), "the session log holds a token");
    }
}
