//! A session's streamable HTTP server with a DPoP-bound token stored (RFC 9449): every request
//! presents it with the `DPoP` scheme (never `Bearer`) and a fresh proof signed by the grant's
//! key, naming the method, the endpoint and the token's hash; when the server answers
//! `use_dpop_nonce`, the request is sent again once with the server's nonce in its proof.
//!
//! One test in this binary: it points the data directory (where the grant is kept) at a temp
//! directory before anything else runs.

mod support;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chock_mcp::CallOutcome;
use chock_oauth::dpop::DpopKey;
use chock_oauth::store::{self, Grant};
use chock_oauth::{Secret, Token};
use chock_policy::mcp::RawServer;
use serde_json::{Value, json};
use sha2::Digest as _;
use support::{World, user_server};

const ACCESS: &str = "AT-DPOP-3b7e91";
const NONCE: &str = "rs-nonce-1";

#[derive(Default)]
struct Seen {
    endpoint: String,
    /// Every request: (scheme, the proof's claims, or why it was refused).
    requests: Vec<(String, Result<Value, String>)>,
    nonce_challenges: u32,
}

type Shared = Arc<Mutex<Seen>>;

/// The claims of `proof` once its signature verifies with the key in its header.
fn claims(proof: &str) -> Result<Value, String> {
    let parts: Vec<&str> = proof.split('.').collect();
    let [h, c, s] = parts[..] else {
        return Err("not a JWS".into());
    };
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).unwrap()).unwrap();
    let mut point = vec![4u8];
    for k in ["x", "y"] {
        let part = header["jwk"][k].as_str().ok_or("jwk")?;
        point.extend(URL_SAFE_NO_PAD.decode(part).unwrap());
    }
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            format!("{h}.{c}").as_bytes(),
            &URL_SAFE_NO_PAD.decode(s).unwrap(),
        )
        .map_err(|_| "bad signature".to_string())?;
    Ok(serde_json::from_slice(&URL_SAFE_NO_PAD.decode(c).unwrap()).unwrap())
}

async fn mcp(State(s): State<Shared>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (scheme, token) = auth.split_once(' ').unwrap_or(("", ""));
    let proof = headers
        .get("dpop")
        .and_then(|v| v.to_str().ok())
        .ok_or("no proof".to_string())
        .and_then(claims);
    let ath = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(ACCESS.as_bytes()));
    {
        let mut s = s.lock().unwrap();
        s.requests.push((scheme.to_string(), proof.clone()));
        let ok = scheme == "DPoP"
            && token == ACCESS
            && proof
                .as_ref()
                .is_ok_and(|c| c["ath"] == ath && c["htm"] == "POST" && c["htu"] == s.endpoint);
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, r#"DPoP error="invalid_token""#)],
            )
                .into_response();
        }
        if proof.as_ref().unwrap()["nonce"] != NONCE {
            s.nonce_challenges += 1;
            return (
                StatusCode::UNAUTHORIZED,
                [
                    (header::WWW_AUTHENTICATE, r#"DPoP error="use_dpop_nonce""#),
                    (header::HeaderName::from_static("dpop-nonce"), NONCE),
                ],
            )
                .into_response();
        }
    }
    let message: Value = serde_json::from_slice(&body).unwrap();
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bound", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "Says who you are.",
            "inputSchema": {"type": "object", "properties": {}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "you hold the key"}]}),
        _ => json!({}),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

#[test]
fn a_dpop_bound_token_goes_with_a_fresh_proof_and_the_servers_nonce() {
    let data = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary sets the variable before it starts any thread of its
    // own or reads the environment elsewhere.
    unsafe { std::env::set_var("XDG_DATA_HOME", data.path()) };
    // SAFETY: as above. No keyring: the grant is kept in that directory only.
    unsafe { std::env::remove_var("DBUS_SESSION_BUS_ADDRESS") };

    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared: Shared = Arc::default();
    let resource = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
            .with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    });
    let url = format!("{resource}/mcp");
    shared.lock().unwrap().endpoint = url.clone();
    let resource_uri = chock_oauth::metadata::canonical_resource(&url::Url::parse(&url).unwrap());
    let grant = Grant {
        server: url.clone(),
        resource: resource_uri.clone(),
        issuer: "http://127.0.0.1:9/".into(),
        client_id: "bound-client".into(),
        client_secret: None,
        auth_method: "none".into(),
        revocation_endpoint: None,
        token: Token {
            access_token: Secret::new(ACCESS),
            token_type: "DPoP".into(),
            expires_at: None,
            refresh_token: None,
            scope: None,
            resource: resource_uri.clone(),
        },
        dpop_key: Some(DpopKey::generate().unwrap()),
    };
    store::save_in(&data.path().join("chock/credentials"), &grant).unwrap();
    let port = resource.rsplit(':').next().unwrap();
    let world = World::new(&format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.bound.tool.whoami\"\ndecision = \"allow\"\n"
    ));
    let pipeline = world.pipeline(None);
    let server = user_server(
        "bound",
        &RawServer {
            url: Some(url.clone()),
            startup_timeout_secs: Some(20),
            ..RawServer::default()
        },
    );
    let hub = world.start(&[server], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let offered = hub.offered(&pipeline);
    let tool = offered.iter().find(|t| t.def().name == "whoami").unwrap();
    let out = rt.block_on(tool.call("c1", &json!({}), &pipeline)).unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error && text.contains("you hold the key"), "{text}");
    drop(offered);
    drop(hub);

    let s = shared.lock().unwrap();
    assert_eq!(
        s.nonce_challenges, 1,
        "one nonce challenge, then the nonce kept"
    );
    assert!(s.requests.len() >= 4, "{:?}", s.requests);
    let mut jtis = Vec::new();
    for (scheme, proof) in &s.requests {
        assert_eq!(scheme, "DPoP", "never Bearer");
        let proof = proof.as_ref().expect("every proof verifies");
        jtis.push(proof["jti"].as_str().unwrap().to_string());
    }
    let mut unique = jtis.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), jtis.len(), "a fresh proof for every request");
}
