//! A loopback authorization server and protected resource of the tests' own, and a transport
//! that records every request it makes (to show where a token went).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use chock_oauth::{HttpRequest, HttpResponse, Transport};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::json;
use sha2::Digest as _;

/// What a request carried, as a server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub url: String,
    pub authorization: Option<String>,
}

/// A transport over plain TCP (the host's is the broker door); follows no redirect.
#[derive(Clone, Default)]
pub struct TestTransport {
    pub sent: Arc<Mutex<Vec<Seen>>>,
}

impl Transport for TestTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, String> {
        let auth = request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.clone());
        self.sent.lock().unwrap().push(Seen {
            url: request.url.to_string(),
            authorization: auth,
        });
        let host = request.url.host_str().ok_or("no host")?.to_string();
        let port = request.url.port_or_known_default().ok_or("no port")?;
        let stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let path = &request.url[url::Position::BeforePath..];
        let mut builder = hyper::Request::builder()
            .method(request.method)
            .uri(path)
            .header("host", format!("{host}:{port}"));
        for (n, v) in &request.headers {
            builder = builder.header(n, v);
        }
        let response = sender
            .send_request(
                builder
                    .body(Full::new(bytes::Bytes::from(request.body)))
                    .unwrap(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(HttpResponse {
            status,
            headers,
            body: body.to_bytes().to_vec(),
        })
    }
}

/// The shared state of the test's servers.
#[derive(Default)]
pub struct World {
    pub resource_base: String,
    pub issuer: String,
    /// code -> (client_id, redirect_uri, challenge, resource, scope)
    pub codes: HashMap<String, (String, String, String, String, String)>,
    /// access token -> (scope, resource)
    pub tokens: HashMap<String, (String, String)>,
    /// refresh token -> (scope, resource)
    pub refresh: HashMap<String, (String, String)>,
    pub counter: u32,
    /// The scope the resource requires beyond `read`.
    pub require: Option<String>,
    /// Serve a metadata document without `token_endpoint`.
    pub bad_metadata: bool,
    /// Every request the resource saw: (path, authorization).
    pub resource_seen: Vec<(String, Option<String>)>,
    /// Every token request's form.
    pub token_forms: Vec<HashMap<String, String>>,
    pub token_auth: Vec<Option<String>>,
    /// Every revocation request's form.
    pub revoked: Vec<HashMap<String, String>>,
    /// The metadata says `authorization_response_iss_parameter_supported`.
    pub iss_supported: bool,
    /// What the redirect carries as `iss`: `correct`, `wrong`, `slash` (the issuer with a
    /// trailing slash), or nothing (`None`).
    pub iss_in_redirect: Option<&'static str>,
    /// The metadata says `client_id_metadata_document_supported`.
    pub cimd: bool,
    /// The authorization server's `scopes_supported`.
    pub as_scopes: Vec<String>,
    /// Every registration request's body.
    pub registrations: Vec<serde_json::Value>,
    /// Every authorization request's query.
    pub authorizations: Vec<HashMap<String, String>>,
    /// The public key (uncompressed P-256 point) of the `private_key_jwt` client `jwt-client`.
    pub jwt_public_key: Option<Vec<u8>>,
    /// Every token exchange form the identity provider (`/idp/token`) saw.
    pub exchanges: Vec<HashMap<String, String>>,
    /// DPoP: the metadata lists ES256, and a code exchange needs a proof carrying the nonce
    /// `n-42` (the first is answered `use_dpop_nonce`).
    pub dpop: bool,
    /// Every DPoP proof's claims the token endpoint saw (each verified against its header's key).
    pub dpop_proofs: Vec<serde_json::Value>,
}

/// The claims of a DPoP proof, once its signature verifies with the key in its header.
fn dpop_claims(proof: &str) -> Result<serde_json::Value, String> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = proof.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err("not a JWS".into());
    };
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    if header["typ"] != "dpop+jwt" {
        return Err("typ".into());
    }
    let mut point = vec![4u8];
    for c in ["x", "y"] {
        let part = header["jwk"][c].as_str().ok_or("jwk")?;
        point.extend(URL_SAFE_NO_PAD.decode(part).map_err(|e| e.to_string())?);
    }
    let signed = &proof[..proof.rfind('.').unwrap()];
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            signed.as_bytes(),
            &URL_SAFE_NO_PAD
                .decode(signature)
                .map_err(|e| e.to_string())?,
        )
        .map_err(|_| "the proof's signature does not verify".to_string())?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
}

/// An enterprise identity provider's token exchange: the ID token `id-token-of-alice` becomes
/// the ID-JAG `jag-for-alice`.
async fn idp_token(State(w): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    w.lock().unwrap().exchanges.push(f.clone());
    if f.get("subject_token").map(String::as_str) != Some("id-token-of-alice") {
        return oauth_error("invalid_grant");
    }
    axum::Json(json!({
        "access_token": "jag-for-alice",
        "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "token_type": "N_A",
    }))
    .into_response()
}

/// A browser that GETs the authorization URL and then where the server redirected (the
/// loopback receiver), as a person's browser would.
pub struct GetBrowser;

impl chock_oauth::Browser for GetBrowser {
    fn visit<'a>(&'a self, url: &'a url::Url, _host: &'a str) -> chock_oauth::Visit<'a> {
        Box::pin(async move {
            let get = |url: url::Url| HttpRequest {
                method: http::Method::GET,
                url,
                headers: Vec::new(),
                body: Vec::new(),
            };
            let t = TestTransport::default();
            let at = t.send(get(url.clone())).await?;
            let to = at.header("location").ok_or("no redirect")?;
            t.send(get(url::Url::parse(to).map_err(|e| e.to_string())?))
                .await
                .map(|_| ())
        })
    }
}

pub type Shared = Arc<Mutex<World>>;

pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Starts the resource (an MCP endpoint at `/mcp`) and the authorization server (issuer
/// `<origin>/tenant`), each on its own loopback port, plus a third origin the resource redirects
/// to. Returns the shared state and the third origin.
pub async fn start() -> (Shared, String) {
    let world: Shared = Arc::default();
    let other = serve(
        Router::new()
            .fallback(get(other_origin).post(other_origin))
            .with_state(world.clone()),
    )
    .await;
    let auth = serve(
        Router::new()
            .route(
                "/.well-known/oauth-authorization-server/tenant",
                get(as_metadata),
            )
            .route("/tenant/register", post(register))
            .route("/tenant/authorize", get(authorize))
            .route("/tenant/token", post(token))
            .route("/tenant/revoke", post(revoke))
            .route("/idp/token", post(idp_token))
            .with_state(world.clone()),
    )
    .await;
    let moved_to = format!("{other}/mcp");
    let resource = serve(
        Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/mcp", post(mcp))
            .route(
                "/moved",
                post(move || async move {
                    (
                        StatusCode::TEMPORARY_REDIRECT,
                        [(header::LOCATION, moved_to)],
                    )
                }),
            )
            .with_state(world.clone()),
    )
    .await;
    {
        let mut w = world.lock().unwrap();
        w.resource_base = resource;
        w.issuer = format!("{auth}/tenant");
    }
    (world, other)
}

async fn other_origin(State(w): State<Shared>, headers: HeaderMap) -> StatusCode {
    let auth = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    w.lock().unwrap().resource_seen.push(("other".into(), auth));
    StatusCode::OK
}

async fn prm(State(w): State<Shared>) -> Response {
    let w = w.lock().unwrap();
    axum::Json(json!({
        "resource": format!("{}/mcp", w.resource_base),
        "authorization_servers": [w.issuer],
        "scopes_supported": ["read"],
    }))
    .into_response()
}

async fn as_metadata(State(w): State<Shared>) -> Response {
    let w = w.lock().unwrap();
    let i = &w.issuer;
    let mut doc = json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/authorize"),
        "token_endpoint": format!("{i}/token"),
        "registration_endpoint": format!("{i}/register"),
        "revocation_endpoint": format!("{i}/revoke"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
    });
    if w.bad_metadata {
        doc.as_object_mut().unwrap().remove("token_endpoint");
    }
    if w.iss_supported {
        doc["authorization_response_iss_parameter_supported"] = json!(true);
    }
    if w.cimd {
        doc["client_id_metadata_document_supported"] = json!(true);
    }
    if !w.as_scopes.is_empty() {
        doc["scopes_supported"] = json!(w.as_scopes);
    }
    if w.dpop {
        doc["dpop_signing_alg_values_supported"] = json!(["ES256"]);
    }
    if w.jwt_public_key.is_some() {
        doc["token_endpoint_auth_methods_supported"] = json!(["private_key_jwt"]);
        doc["token_endpoint_auth_signing_alg_values_supported"] = json!(["ES256"]);
    }
    axum::Json(doc).into_response()
}

async fn revoke(State(w): State<Shared>, Form(f): Form<HashMap<String, String>>) -> StatusCode {
    let mut w = w.lock().unwrap();
    if let Some(t) = f.get("token") {
        w.tokens.remove(t);
        w.refresh.remove(t);
    }
    w.revoked.push(f);
    StatusCode::OK
}

async fn register(
    State(w): State<Shared>,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> Response {
    w.lock().unwrap().registrations.push(body.clone());
    assert_eq!(body["token_endpoint_auth_method"], "none");
    assert!(
        body["redirect_uris"][0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    (
        StatusCode::CREATED,
        axum::Json(json!({"client_id": "dyn-client"})),
    )
        .into_response()
}

async fn authorize(State(w): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["code_challenge_method"], "S256");
    let mut w = w.lock().unwrap();
    w.authorizations.push(q.clone());
    w.counter += 1;
    let code = format!("code-{}", w.counter);
    let scope = q.get("scope").cloned().unwrap_or_default();
    w.codes.insert(
        code.clone(),
        (
            q["client_id"].clone(),
            q["redirect_uri"].clone(),
            q["code_challenge"].clone(),
            q["resource"].clone(),
            scope,
        ),
    );
    let mut to = url::Url::parse(&q["redirect_uri"]).unwrap();
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &q["state"]);
    let iss = match w.iss_in_redirect {
        Some("correct") => Some(w.issuer.clone()),
        Some("wrong") => Some("https://evil.example".to_string()),
        Some("slash") => Some(format!("{}/", w.issuer)),
        _ => None,
    };
    if let Some(iss) = iss {
        to.query_pairs_mut().append_pair("iss", &iss);
    }
    let to = to.to_string();
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

#[allow(clippy::needless_pass_by_value)]
fn issue(w: &mut World, scope: String, resource: String) -> Response {
    w.counter += 1;
    let at = format!("at-{}", w.counter);
    let rt = format!("rt-{}", w.counter);
    w.tokens
        .insert(at.clone(), (scope.clone(), resource.clone()));
    w.refresh.insert(rt.clone(), (scope.clone(), resource));
    axum::Json(json!({
        "access_token": at, "token_type": if w.dpop { "DPoP" } else { "Bearer" }, "expires_in": 3600,
        "refresh_token": rt, "scope": scope,
    }))
    .into_response()
}

fn oauth_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

async fn token(
    State(w): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let mut w = w.lock().unwrap();
    let basic = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    w.token_forms.push(f.clone());
    w.token_auth.push(basic.clone());
    let resource = f.get("resource").cloned().unwrap_or_default();
    if w.dpop {
        let Some(proof) = headers.get("dpop").and_then(|v| v.to_str().ok()) else {
            return oauth_error("invalid_dpop_proof");
        };
        let claims = match dpop_claims(proof) {
            Ok(c) => c,
            Err(why) => return oauth_error(&format!("invalid_dpop_proof: {why}")),
        };
        w.dpop_proofs.push(claims.clone());
        if claims["htm"] != "POST" || claims["htu"] != json!(format!("{}/token", w.issuer)) {
            return oauth_error("invalid_dpop_proof");
        }
        if claims["nonce"] != "n-42" {
            return (
                StatusCode::BAD_REQUEST,
                [("dpop-nonce", "n-42")],
                axum::Json(json!({"error": "use_dpop_nonce"})),
            )
                .into_response();
        }
    }
    match f["grant_type"].as_str() {
        "authorization_code" => {
            let Some((client, redirect, challenge, res, scope)) = w.codes.remove(&f["code"]) else {
                return oauth_error("invalid_grant");
            };
            let digest = sha2::Sha256::digest(f["code_verifier"].as_bytes());
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if client != f["client_id"]
                || redirect != f["redirect_uri"]
                || computed != challenge
                || res != resource
            {
                return oauth_error("invalid_grant");
            }
            issue(&mut w, scope, resource)
        }
        "refresh_token" => match w.refresh.remove(&f["refresh_token"]) {
            Some((scope, res)) if res == resource => issue(&mut w, scope, resource),
            _ => oauth_error("invalid_grant"),
        },
        "urn:ietf:params:oauth:grant-type:jwt-bearer" => {
            match f.get("assertion").map(String::as_str) {
                Some("jag-for-alice" | "workload-token") => {}
                _ => return oauth_error("invalid_grant"),
            }
            let scope = f.get("scope").cloned().unwrap_or_default();
            issue(&mut w, scope, resource)
        }
        "client_credentials" if f.contains_key("client_assertion") => {
            if let Err(why) = check_assertion(&w, &f) {
                return oauth_error(&format!("invalid_client: {why}"));
            }
            let scope = f.get("scope").cloned().unwrap_or_default();
            issue(&mut w, scope, resource)
        }
        "client_credentials" => {
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("svc:s3cret")
            );
            let by_post = f.get("client_id").map(String::as_str) == Some("svc")
                && f.get("client_secret").map(String::as_str) == Some("s3cret");
            if basic.as_deref() != Some(expected.as_str()) && !by_post {
                return oauth_error("invalid_client");
            }
            let scope = f.get("scope").cloned().unwrap_or_default();
            issue(&mut w, scope, resource)
        }
        _ => oauth_error("unsupported_grant_type"),
    }
}

async fn mcp(State(w): State<Shared>, headers: HeaderMap) -> Response {
    let mut w = w.lock().unwrap();
    let auth = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    w.resource_seen.push(("mcp".into(), auth.clone()));
    let prm = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        w.resource_base
    );
    let held = auth
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .and_then(|t| w.tokens.get(t).cloned());
    let Some((scope, resource)) = held else {
        let challenge = format!(r#"Bearer resource_metadata="{prm}", scope="read""#);
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    };
    assert_eq!(resource, format!("{}/mcp", w.resource_base));
    if let Some(need) = &w.require
        && !scope.split(' ').any(|s| s == need)
    {
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="read {need}", resource_metadata="{prm}""#
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    StatusCode::OK.into_response()
}

/// Checks a `private_key_jwt` assertion as an authorization server does (RFC 7523 §3): its type,
/// its ES256 signature by the client's key, `iss` and `sub` the client, `aud` the issuer, not
/// expired.
fn check_assertion(w: &World, f: &HashMap<String, String>) -> Result<(), String> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    if f.get("client_assertion_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    {
        return Err("client_assertion_type".into());
    }
    if f.contains_key("client_secret") {
        return Err("a secret was sent too".into());
    }
    let jwt = &f["client_assertion"];
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err("not a JWS".into());
    };
    let key = w.jwt_public_key.as_ref().ok_or("no key")?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|e| e.to_string())?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, key)
        .verify(format!("{header}.{claims}").as_bytes(), &signature)
        .map_err(|_| "the signature does not verify".to_string())?;
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if claims["iss"] != "jwt-client" || claims["sub"] != "jwt-client" {
        return Err("iss/sub".into());
    }
    if claims["aud"] != json!(w.issuer) {
        return Err(format!("aud {}", claims["aud"]));
    }
    if claims["exp"].as_u64().unwrap_or(0) <= now {
        return Err("expired".into());
    }
    Ok(())
}
