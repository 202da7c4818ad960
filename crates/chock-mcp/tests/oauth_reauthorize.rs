//! A session signs in again mid-session, through its own door: a server that wants more scope
//! (403 `insufficient_scope`) gets a new authorization for the union of the scope held and the
//! scope asked, as the same client; a server whose protected-resource metadata moved to another
//! authorization server (401 for the old token) gets a client registered anew there, the old
//! client never shown to it; a server that keeps asking stops after the limit; a session with
//! nobody to send reports the 403. No authorization server ever sees a bearer token, and no token
//! is in the session's log.
//!
//! One test in this binary: it points the data directory (where the grant is kept) at a temp
//! directory before anything else runs.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chock_mcp::CallOutcome;
use chock_oauth::store::{self, Grant};
use chock_oauth::{Secret, Token};
use chock_policy::mcp::RawServer;
use serde_json::{Value, json};
use support::{World, user_server};

#[derive(Default)]
struct Seen {
    resource_base: String,
    /// Which authorization server (0 or 1) the resource's metadata names now.
    current: usize,
    issuers: [String; 2],
    /// The scope the call needs.
    call_needs: String,
    /// access token -> (scope, authorization server).
    tokens: HashMap<String, (String, usize)>,
    counter: u32,
    /// Every authorization request: (server, query).
    authorizations: Vec<(usize, HashMap<String, String>)>,
    /// Every registration: server.
    registrations: Vec<usize>,
    /// Every request any authorization server saw: (server, Authorization header, form).
    at_servers: Vec<(usize, Option<String>, HashMap<String, String>)>,
    /// code -> (scope, server, client).
    codes: HashMap<String, (String, usize, String)>,
}

type Shared = Arc<Mutex<Seen>>;

use support::{authorization_of as auth_of, serve_app as serve};

async fn prm(State(s): State<Shared>) -> Response {
    let s = s.lock().unwrap();
    axum::Json(json!({
        "resource": format!("{}/mcp", s.resource_base),
        "authorization_servers": [s.issuers[s.current]],
    }))
    .into_response()
}

async fn as_metadata(State(s): State<Shared>, Path(n): Path<usize>) -> Response {
    let s = s.lock().unwrap();
    let i = &s.issuers[n];
    axum::Json(json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/authorize"),
        "token_endpoint": format!("{i}/token"),
        "registration_endpoint": format!("{i}/register"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
    }))
    .into_response()
}

async fn register(State(s): State<Shared>, Path(n): Path<usize>, headers: HeaderMap) -> Response {
    let mut s = s.lock().unwrap();
    s.registrations.push(n);
    s.at_servers.push((n, auth_of(&headers), HashMap::new()));
    (
        StatusCode::CREATED,
        axum::Json(json!({"client_id": format!("client-as{n}")})),
    )
        .into_response()
}

/// Grants what is asked, but never `admin`.
async fn authorize(
    State(s): State<Shared>,
    Path(n): Path<usize>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut s = s.lock().unwrap();
    s.authorizations.push((n, q.clone()));
    s.counter += 1;
    let code = format!("code-{}", s.counter);
    let scope: Vec<&str> = q
        .get("scope")
        .map(String::as_str)
        .unwrap_or_default()
        .split(' ')
        .filter(|s| *s != "admin")
        .collect();
    s.codes
        .insert(code.clone(), (scope.join(" "), n, q["client_id"].clone()));
    let mut to = url::Url::parse(&q["redirect_uri"]).unwrap();
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &q["state"])
        .append_pair("iss", &s.issuers[n]);
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

async fn token(
    State(s): State<Shared>,
    Path(n): Path<usize>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let mut s = s.lock().unwrap();
    s.at_servers.push((n, auth_of(&headers), f.clone()));
    let Some((scope, server, client)) = s.codes.remove(&f["code"]) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    };
    assert_eq!((server, client.as_str()), (n, f["client_id"].as_str()));
    s.counter += 1;
    let at = format!("AT-{n}-{}-9f3c", s.counter);
    s.tokens.insert(at.clone(), (scope.clone(), n));
    axum::Json(
        json!({"access_token": at, "token_type": "Bearer", "expires_in": 3600, "scope": scope}),
    )
    .into_response()
}

/// A minimal MCP server: every request needs a token of the current authorization server with
/// `read`; a call needs `call_needs` too.
async fn mcp(State(s): State<Shared>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap();
    let method = message["method"].as_str().unwrap_or_default().to_string();
    let s = s.lock().unwrap();
    let prm = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        s.resource_base
    );
    let held = auth_of(&headers)
        .and_then(|a| a.strip_prefix("Bearer ").map(str::to_string))
        .and_then(|t| s.tokens.get(&t).cloned())
        .filter(|(_, server)| *server == s.current);
    let Some((scope, _)) = held else {
        let challenge = format!(r#"Bearer resource_metadata="{prm}", scope="read""#);
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    };
    let has = |need: &str| scope.split(' ').any(|s| s == need);
    if !has("read") || (method == "tools/call" && !has(&s.call_needs)) {
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{prm}""#,
            s.call_needs
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "guarded", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "write_it",
            "description": "Writes.",
            "inputSchema": {"type": "object", "properties": {}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "written"}]}),
        _ => json!({}),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

/// The person's browser: a GET of the authorization URL, then of where it redirected (plain
/// TCP, as a browser is outside Chock).
struct Person;

impl chock_oauth::Browser for Person {
    fn visit<'a>(&'a self, url: &'a url::Url, _host: &'a str) -> chock_oauth::Visit<'a> {
        Box::pin(async move {
            let got = plain_get(url.clone()).await?;
            let to = got.header("location").ok_or("no redirect")?.to_string();
            plain_get(url::Url::parse(&to).unwrap()).await.map(drop)
        })
    }
}

/// The person at a client, answering a free question: goes to the address on its last line in
/// their browser ([`Person`]), then replies `accept`.
#[derive(Debug, Default)]
struct SignsIn {
    asked: Mutex<Vec<String>>,
}

impl chock_decide::Answerer for SignsIn {
    fn name(&self) -> String {
        "the person".into()
    }
    fn role(&self) -> chock_decide::Role {
        chock_decide::Role::Human
    }
    fn answer<'a>(&'a self, q: &'a chock_decide::Question) -> chock_decide::AnswerFuture<'a> {
        self.asked.lock().unwrap().push(q.text.clone());
        let address = q.text.lines().last().unwrap_or_default().to_string();
        Box::pin(async move {
            let url = url::Url::parse(&address).ok()?;
            chock_oauth::Browser::visit(&Person, &url, "").await.ok()?;
            Some(chock_decide::Answer::Reply {
                text: "accept".into(),
            })
        })
    }
}

async fn plain_get(url: url::Url) -> Result<chock_oauth::HttpResponse, String> {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect((
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap(),
    ))
    .await
    .map_err(|e| e.to_string())?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::get(&url[url::Position::BeforePath..])
        .header("host", url.authority())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok(chock_oauth::HttpResponse {
        status,
        headers,
        body: body.to_vec(),
    })
}

fn server(url: &str) -> chock_mcp::Configured {
    user_server(
        "guarded",
        &RawServer {
            url: Some(url.to_string()),
            startup_timeout_secs: Some(20),
            call_timeout_secs: Some(30),
            ..RawServer::default()
        },
    )
}

fn port_of(origin: &str) -> &str {
    origin.rsplit(':').next().unwrap()
}

fn call(world: &World, hub: &chock_mcp::McpHub, rt: &tokio::runtime::Runtime) -> String {
    let pipeline = world.pipeline(None);
    let offered = hub.offered(&pipeline);
    let tool = offered
        .iter()
        .find(|t| t.def().name == "write_it")
        .expect("write_it offered");
    match rt.block_on(tool.call("c", &json!({}), &pipeline)) {
        Ok(CallOutcome::Answered { text, is_error }) => {
            format!("{}{text}", if is_error { "error: " } else { "" })
        }
        Ok(CallOutcome::Refused { reason }) => format!("refused: {reason}"),
        Err(e) => format!("failed: {e}"),
    }
}

#[test]
fn a_session_signs_in_again_for_more_scope_and_at_a_moved_authorization_server() {
    let data = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary sets the variable before it starts any thread of its
    // own or reads the environment elsewhere.
    unsafe { std::env::set_var("XDG_DATA_HOME", data.path()) };
    // SAFETY: as above. No keyring: the grant is kept in that directory only.
    unsafe { std::env::remove_var("DBUS_SESSION_BUS_ADDRESS") };

    let rt = tokio::runtime::Runtime::new().unwrap();
    let shared: Shared = Arc::default();
    let (resource, servers) = rt.block_on(async {
        let mut servers = Vec::new();
        for _ in 0..2 {
            let app = Router::new()
                .route(
                    "/.well-known/oauth-authorization-server/{n}",
                    get(as_metadata),
                )
                .route("/{n}/register", post(register))
                .route("/{n}/authorize", get(authorize))
                .route("/{n}/token", post(token))
                .with_state(shared.clone());
            servers.push(serve(app).await);
        }
        let resource = serve(
            Router::new()
                .route("/.well-known/oauth-protected-resource/mcp", get(prm))
                .route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
                .with_state(shared.clone()),
        )
        .await;
        (resource, servers)
    });
    let url = format!("{resource}/mcp");
    let resource_uri = chock_oauth::metadata::canonical_resource(&url::Url::parse(&url).unwrap());
    {
        let mut s = shared.lock().unwrap();
        s.resource_base = resource.clone();
        s.issuers = [format!("{}/0", servers[0]), format!("{}/1", servers[1])];
        s.call_needs = "write".into();
        s.tokens.insert("AT-first-7c1d".into(), ("read".into(), 0));
    }
    let grant = Grant {
        server: url.clone(),
        resource: resource_uri.clone(),
        issuer: format!("{}/0", servers[0]),
        client_id: "client-as0".into(),
        client_secret: None,
        auth_method: "none".into(),
        revocation_endpoint: None,
        token: Token {
            access_token: Secret::new("AT-first-7c1d"),
            token_type: "Bearer".into(),
            expires_at: None,
            refresh_token: None,
            scope: Some("read".into()),
            resource: resource_uri.clone(),
        },
        dpop_key: None,
    };
    store::save_in(&data.path().join("chock/credentials"), &grant).unwrap();
    let rules = format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.guarded.tool.write_it\"\ndecision = \"allow\"\n",
        port_of(&resource),
        port_of(&servers[0]),
        port_of(&servers[1]),
    );

    // Nobody to send: the 403 is reported, naming the scope and `chock mcp login`.
    let alone = World::new(&rules);
    let hub = alone.start(&[server(&url)], &alone.pipeline(None), false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let said = call(&alone, &hub, &rt);
    assert!(
        said.contains("403") && said.contains("`write`") && said.contains("chock mcp login"),
        "{said}"
    );
    drop(hub);
    assert!(shared.lock().unwrap().authorizations.is_empty());

    // Step-up: the same client asks for the union, and the call goes through.
    let world = World::new(&rules);
    let pipeline = world.pipeline(None);
    let hub = world.start_with(
        &[server(&url)],
        &pipeline,
        false,
        None,
        Some(Arc::new(Person)),
        None,
    );
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    assert_eq!(call(&world, &hub, &rt), "written");
    {
        let s = shared.lock().unwrap();
        assert_eq!(s.authorizations.len(), 1);
        let (n, q) = &s.authorizations[0];
        assert_eq!((*n, q["scope"].as_str()), (0, "read write"));
        assert_eq!(q["client_id"], "client-as0");
        assert!(
            s.registrations.is_empty(),
            "the same client, not registered again"
        );
    }
    let kept = store::load(&url, &resource_uri).unwrap().unwrap();
    assert_eq!(kept.token.scope.as_deref(), Some("read write"));

    // The resource moved to the other authorization server: discovery again, a client
    // registered there, the old client never shown to it.
    shared.lock().unwrap().current = 1;
    assert_eq!(call(&world, &hub, &rt), "written");
    {
        let s = shared.lock().unwrap();
        assert_eq!(s.registrations, [1]);
        let (n, q) = s.authorizations.last().unwrap();
        assert_eq!((*n, q["client_id"].as_str()), (1, "client-as1"));
        assert!(
            s.at_servers
                .iter()
                .filter(|(n, _, _)| *n == 1)
                .all(|(_, _, f)| f.get("client_id").is_none_or(|c| c == "client-as1")),
            "the first server's client went to the second"
        );
    }
    let kept = store::load(&url, &resource_uri).unwrap().unwrap();
    assert_eq!(kept.issuer, format!("{}/1", servers[1]));
    assert_eq!(kept.client_id, "client-as1");

    // A scope never granted: two more tries, then the call fails.
    let before = shared.lock().unwrap().authorizations.len();
    shared.lock().unwrap().call_needs = "admin".into();
    let said = call(&world, &hub, &rt);
    assert!(said.contains("2 times"), "{said}");
    assert_eq!(shared.lock().unwrap().authorizations.len(), before + 2);
    drop(hub);

    // A configured (pre-registered) client is not shown to an authorization server the resource
    // moved to: the call fails saying so, and that server sees no request for it.
    shared.lock().unwrap().call_needs = "write".into();
    shared.lock().unwrap().current = 0;
    let (before_auth, before_seen) = {
        let s = shared.lock().unwrap();
        (s.authorizations.len(), s.at_servers.len())
    };
    let configured = user_server(
        "guarded",
        &RawServer {
            url: Some(url.clone()),
            startup_timeout_secs: Some(20),
            call_timeout_secs: Some(30),
            client_id: Some("pre-registered".into()),
            ..RawServer::default()
        },
    );
    let fixed = World::new(&rules);
    let fixed_pipeline = fixed.pipeline(None);
    let hub = fixed.start_with(
        &[configured],
        &fixed_pipeline,
        false,
        None,
        Some(Arc::new(Person)),
        None,
    );
    let failures = format!("{:?}", hub.failures());
    assert!(
        failures.contains("client_not_registered_here"),
        "{failures}"
    );
    {
        let s = shared.lock().unwrap();
        assert_eq!(s.authorizations.len(), before_auth);
        assert_eq!(s.at_servers.len(), before_seen);
    }
    drop(hub);

    // A session's own way: the person is asked, through the pipeline every client answers, to
    // sign in at the authorization server; nobody answering fails the call before any
    // authorization request, and a person who signs in and replies `accept` lets it through.
    shared.lock().unwrap().call_needs = "deploy".into();
    let asked = World::new(&rules);
    let nobody = asked.pipeline(None);
    let before = shared.lock().unwrap().authorizations.len();
    let hub = asked.start_with(
        &[server(&url)],
        &nobody,
        false,
        None,
        Some(Arc::new(chock_mcp::QuestionBrowser::new(nobody.clone()))),
        None,
    );
    // (The kept grant is the other server's now: the start itself needs the sign-in.)
    let failures = format!("{:?}", hub.failures());
    assert!(failures.contains("nobody answered"), "{failures}");
    assert_eq!(
        shared.lock().unwrap().authorizations.len(),
        before,
        "nobody was sent to the authorization server"
    );
    drop(hub);
    let person = Arc::new(SignsIn::default());
    let answered = asked.session.pipeline(
        chock_decide::ApprovalBroker::new()
            .with(Arc::clone(&person) as Arc<dyn chock_decide::Answerer>),
    );
    let hub = asked.start_with(
        &[server(&url)],
        &answered,
        false,
        None,
        Some(Arc::new(chock_mcp::QuestionBrowser::new(answered.clone()))),
        None,
    );
    assert_eq!(call(&asked, &hub, &rt), "written");
    // Two sign-ins, each a question: at the start (the kept grant is the other server's), and
    // the step-up for `deploy`.
    let questions = person.asked.lock().unwrap().clone();
    assert_eq!(questions.len(), 2, "{questions:?}");
    for q in &questions {
        assert!(q.contains("sign in again at 127.0.0.1"), "{q}");
    }
    assert!(
        questions[1].contains("scope=read+write+deploy"),
        "{}",
        questions[1]
    );
    assert!(shared.lock().unwrap().authorizations.len() > before);
    drop(hub);

    let s = shared.lock().unwrap();
    assert!(
        s.at_servers.iter().all(|(_, a, _)| a.is_none()),
        "an authorization server saw an Authorization header"
    );
    let tokens: Vec<String> = s.tokens.keys().cloned().collect();
    drop(s);
    let mut logged = String::new();
    for dir in [
        alone.session.log().dir(),
        world.session.log().dir(),
        asked.session.log().dir(),
    ] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                logged.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    // The authorization servers were decided as destinations of the session's door.
    assert!(logged.contains(&format!("net.connect.1.0.0.127.{}", port_of(&servers[1]))));
    for t in tokens {
        assert!(!logged.contains(&t), "the session log holds a token");
    }
}
