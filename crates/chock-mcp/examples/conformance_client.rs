//! The client under test of the official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! client mode): Chock's own MCP client, reached the way a session reaches an HTTP server (the
//! broker's door, the pipeline deciding `net.connect`, every tool call an act), pointed at the
//! suite's test server and made to do what the scenario asks.
//!
//! The suite runs `conformance_client <server-url>` once per scenario, naming the scenario in
//! `MCP_CONFORMANCE_SCENARIO` and giving scenario data (the tool calls to make) as JSON in
//! `MCP_CONFORMANCE_CONTEXT`. It ends with the line `conformance_client: done` on standard error
//! when it did all that; `.ci/run` drives it and checks for that line; docs/mcp.md says how to run
//! it by hand.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::Arc;

use chock_decide::{Answer, AnswerFuture, Answerer, Question, Role};
use chock_mcp::{CallOutcome, McpTool};
use chock_policy::mcp::RawServer;
use serde_json::{Value, json};
use support::{World, user_server};

/// Answers every question as a person at the keyboard would in the suite: allows the acts the
/// table asks about, and accepts an elicitation with an empty object (the schema's defaults fill
/// it in).
#[derive(Debug)]
struct Accepting;

impl Answerer for Accepting {
    fn name(&self) -> String {
        "the conformance adapter".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        let answer = if q.action.is_none() {
            Answer::Reply { text: "{}".into() }
        } else {
            Answer::AllowOnce {
                reasons: String::new(),
            }
        };
        Box::pin(async move { Some(answer) })
    }
}

/// The tool calls the scenario asks for: the context's `toolCalls`, else what each scenario's
/// reference client does (the first tool with `a` and `b` by default).
fn calls_for(scenario: &str, context: &Value, tools: &[McpTool]) -> Vec<(String, Value)> {
    if let Some(calls) = context.get("toolCalls").and_then(Value::as_array) {
        return calls
            .iter()
            .filter_map(|c| {
                Some((
                    c.get("name")?.as_str()?.to_string(),
                    c.get("arguments").cloned().unwrap_or_else(|| json!({})),
                ))
            })
            .collect();
    }
    let named = |name: &str| tools.iter().any(|t| t.def().name == name);
    match scenario {
        "json-schema-ref-no-deref" | "request-metadata" => Vec::new(),
        "json-schema-2020-12-preservation" => tools
            .iter()
            .find(|t| t.def().name == "json_schema_2020_12_tool")
            .map(|focal| {
                vec![(
                    "json_schema_echo".to_string(),
                    json!({"schema": focal.def().input_schema}),
                )]
            })
            .unwrap_or_default(),
        "sep-2322-client-request-state" => [
            "test_mrtr_echo_state",
            "test_mrtr_unrelated",
            "test_mrtr_no_state",
            "test_mrtr_no_result_type",
        ]
        .iter()
        .filter(|n| named(n))
        .map(|n| (n.to_string(), json!({})))
        .collect(),
        s if s.starts_with("elicitation") => tools
            .iter()
            .filter(|t| t.def().name.contains("elicitation"))
            .map(|t| (t.def().name.clone(), json!({})))
            .collect(),
        _ => tools
            .first()
            .map(|t| vec![(t.def().name.clone(), json!({"a": 2, "b": 3}))])
            .unwrap_or_default(),
    }
}

/// The sign-in's transport: each request through the broker's door of a session whose table
/// allows exactly its destination (the suite's authorization server and the loopback receiver
/// listen on ports learnt only from discovery, and loopback is reached only by a rule naming the
/// host and port, no wildcard). The decision of each is logged in that session's log.
struct Exact;

impl chock_oauth::Transport for Exact {
    async fn send(
        &self,
        request: chock_oauth::HttpRequest,
    ) -> Result<chock_oauth::HttpResponse, String> {
        let host = request.url.host_str().ok_or("no host")?.to_string();
        let port = request.url.port_or_known_default().ok_or("no port")?;
        let connect = chock_policy::Action::net_connect(&host, port).map_err(|e| e.to_string())?;
        let world = World::new(&format!(
            "[[rule]]\naction = \"{connect}\"\ndecision = \"allow\"\n"
        ));
        let pipeline = world.pipeline(None);
        let broker = chock_broker::Broker::new(
            Arc::new(pipeline.gate("mcp-conformance-login")),
            pipeline.log().clone(),
            chock_broker::BrokerConfig::default(),
        )
        .map_err(|e| e.to_string())?
        .for_call("mcp-conformance-login");
        chock_mcp::oauth::DoorTransport::new(broker)
            .send(request)
            .await
    }
}

/// The suite's "browser": a GET of the authorization URL (its authorization server approves at
/// once and redirects), then a GET of where it redirected (the loopback receiver), each through
/// [`Exact`].
struct Fetching;

impl chock_oauth::Browser for Fetching {
    fn visit<'a>(&'a self, url: &'a url::Url, _host: &'a str) -> chock_oauth::Visit<'a> {
        use chock_oauth::Transport;
        let get = |url: url::Url| chock_oauth::HttpRequest {
            method: http::Method::GET,
            url,
            headers: Vec::new(),
            body: Vec::new(),
        };
        Box::pin(async move {
            let approved = Exact.send(get(url.clone())).await?;
            let to = approved.header("location").ok_or(format!(
                "the authorization endpoint answered {} with no redirect",
                approved.status
            ))?;
            let to = url::Url::parse(to).map_err(|e| e.to_string())?;
            Exact.send(get(to)).await.map(|_| ())
        })
    }
}

/// The client ID metadata document URL the suite expects of a client (`auth/basic-cimd`): what
/// a person would set as `client_metadata_url` of the server in their configuration.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The client the scenario's context describes (a pre-registered ID, a secret, a signing key),
/// else Chock's client ID metadata document where the server takes one, else registration.
fn client_config(context: &Value) -> Result<chock_oauth::ClientConfig, String> {
    let text = |field: &str| {
        context
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let private_key = match text("private_key_pem") {
        Some(pem) => {
            let alg = text("signing_algorithm").unwrap_or_else(|| "ES256".into());
            let alg = chock_oauth::Algorithm::from_name(&alg).ok_or(format!(
                "signing algorithm `{alg}` is not one Chock signs with"
            ))?;
            Some(
                chock_oauth::AssertionKey::from_pem(&pem, alg, "the context's private_key_pem")
                    .map_err(|e| e.to_string())?,
            )
        }
        None => None,
    };
    Ok(chock_oauth::ClientConfig {
        client_id: text("client_id"),
        client_secret: text("client_secret").map(chock_oauth::Secret::new),
        metadata_document: Some(CLIENT_METADATA_URL.into()),
        client_name: "Chock conformance".into(),
        private_key,
    })
}

/// Signs in to the server at `url` when it asks for authorization, as `chock mcp login` does but
/// with no person: the "browser" is [`Fetching`], and a `client-credentials` scenario takes the
/// client credentials grant with the context's client. The grant is stored where a session's
/// client finds it. Every request goes through a broker's door ([`Exact`]).
fn sign_in(url: &str, scenario: &str, context: &Value) -> Result<(), String> {
    use chock_oauth::client::register;
    use chock_oauth::store::{self, Grant};
    use chock_oauth::{Challenge, ClientChoice, HttpRequest, Transport, discover};

    let transport = Exact;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let probe = HttpRequest {
            method: http::Method::POST,
            url: chock_oauth::metadata::check_url(url).map_err(|e| e.to_string())?,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                (
                    "accept".into(),
                    "application/json, text/event-stream".into(),
                ),
            ],
            body: br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#.to_vec(),
        };
        let answer = transport.send(probe).await?;
        if answer.status != 401 {
            return Ok(());
        }
        let challenge = Challenge::from_headers(answer.headers_named("www-authenticate"));
        let found = discover(&transport, url, challenge.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        let config = client_config(context)?;
        let text = |field: &str| {
            context
                .get(field)
                .and_then(Value::as_str)
                .map(chock_oauth::Secret::new)
                .ok_or(format!("the scenario's context has no `{field}`"))
        };
        let (client, token) = if scenario.contains("wif-") {
            // Workload identity: the platform's JWT for this authorization server, by the
            // JWT-bearer grant; a refusal is not retried.
            let client = register(&transport, &found.auth_server, &config, &[], &[])
                .await
                .map_err(|e| e.to_string())?;
            let token = found
                .jwt_bearer(
                    &transport,
                    &client,
                    &text("valid_jwt")?,
                    found.scope.as_deref(),
                )
                .await
                .map_err(|e| e.to_string())?;
            (client, token)
        } else if scenario.contains("enterprise-managed") || scenario.contains("cross-app-access") {
            // Enterprise-managed: the person's ID token exchanged at their identity provider
            // for an ID-JAG naming this authorization server and resource, then the JWT-bearer
            // grant with it as the configured client.
            let endpoint = text("idp_token_endpoint")?;
            let endpoint =
                chock_oauth::metadata::check_url(endpoint.expose()).map_err(|e| e.to_string())?;
            let id_jag = chock_oauth::grants::exchange_id_token_for_id_jag(
                &transport,
                &endpoint,
                text("idp_client_id")?.expose(),
                &text("idp_id_token")?,
                &found,
            )
            .await
            .map_err(|e| e.to_string())?;
            let client = register(&transport, &found.auth_server, &config, &[], &[])
                .await
                .map_err(|e| e.to_string())?;
            let token = found
                .jwt_bearer(&transport, &client, &id_jag, found.scope.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            (client, token)
        } else if scenario.contains("client-credentials") {
            let client = register(
                &transport,
                &found.auth_server,
                &config,
                &[],
                &["client_credentials"],
            )
            .await
            .map_err(|e| e.to_string())?;
            let token = found
                .client_credentials(&transport, &client, found.scope.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            (client, token)
        } else {
            chock_oauth::sign_in_with_code(
                &transport,
                &found,
                ClientChoice::Register(&config),
                found.scope.as_deref(),
                &Fetching,
                std::time::Duration::from_secs(20),
            )
            .await
            .map_err(|e| e.to_string())?
        };
        let grant = Grant {
            server: url.to_string(),
            resource: found.resource.clone(),
            issuer: found.auth_server.issuer.to_string(),
            client_id: client.client_id.clone(),
            client_secret: client.client_secret.clone(),
            auth_method: client.auth_method.name().to_string(),
            revocation_endpoint: None,
            token,
            dpop_key: client.dpop.clone(),
        };
        store::save(&grant).map_err(|e| e.to_string())?;
        eprintln!("signed in at {}", found.auth_server.issuer);
        Ok(())
    })
}

fn run(url: &str) -> Result<(), String> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.host().ok_or(format!("{url}: no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let connect = chock_policy::Action::net_connect(host, port).map_err(|e| e.to_string())?;
    let rules = format!(
        "[[rule]]\naction = \"{connect}\"\ndecision = \"allow\"\n\
         [[rule]]\naction = \"mcp.conformance.*\"\ndecision = \"allow\"\n"
    );
    let world = World::new(&rules);
    let pipeline = world.session.pipeline(
        chock_decide::ApprovalBroker::new().with(Arc::new(Accepting) as Arc<dyn Answerer>),
    );
    let server = user_server(
        "conformance",
        &RawServer {
            url: Some(url.to_string()),
            startup_timeout_secs: Some(20),
            call_timeout_secs: Some(20),
            ..RawServer::default()
        },
    );
    if scenario.starts_with("auth/") {
        sign_in(url, &scenario, &context)?;
    }
    // A session that meets a 403 `insufficient_scope` or a refused token signs in again the
    // same way (the "browser" and each request's own door).
    let mut hub = world.start_with(
        &[server],
        &pipeline,
        false,
        None,
        Some(Arc::new(Fetching)),
        Some(Arc::new(Exact)),
    );
    if let Some((_, e)) = hub.failures().first() {
        return Err(e.to_string());
    }
    let tools = hub.offered(&pipeline);
    eprintln!(
        "tools: {:?}",
        tools
            .iter()
            .map(|t| t.def().name.clone())
            .collect::<Vec<_>>()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // The transport opens its standalone event stream (a GET) by itself after `initialized`. The
    // `sse-retry` server answers a pending tool call on whichever GET comes next and times the
    // last GET from its close of the call's stream: a standalone stream that a loaded machine
    // opens only after the call is taken for the reconnection (about 0 ms, "too early"). The
    // adapter gives it time to open first, as a client that does not call at once would.
    if scenario == "sse-retry" {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    for (i, (name, arguments)) in calls_for(&scenario, &context, &tools)
        .into_iter()
        .enumerate()
    {
        let Some(tool) = tools.iter().find(|t| t.def().name == name) else {
            return Err(format!("the server offers no tool `{name}`"));
        };
        let outcome = runtime
            .block_on(tool.call(&format!("c{i}"), &arguments, &pipeline))
            .map_err(|e| e.to_string())?;
        match outcome {
            CallOutcome::Answered { text, is_error } => {
                eprintln!("{name}: {}{text}", if is_error { "error: " } else { "" });
            }
            CallOutcome::Refused { reason } => return Err(format!("{name} refused: {reason}")),
        }
    }
    world.stop(&mut hub, "the scenario is done");
    Ok(())
}

fn main() -> ExitCode {
    // Grants are kept in a directory of this run's own, never the person's credential store.
    let data = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("conformance_client: {e}");
            return ExitCode::FAILURE;
        }
    };
    // SAFETY: set first thing in main, before any thread exists.
    unsafe { std::env::set_var("XDG_DATA_HOME", data.path()) };
    // SAFETY: as above. No keyring either: the grants stay in that directory.
    unsafe { std::env::remove_var("DBUS_SESSION_BUS_ADDRESS") };
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance_client <server-url>");
        return ExitCode::from(2);
    };
    match run(&url) {
        Ok(()) => {
            // The suite counts checks, not the client's exit: `.ci/run` looks for this line to know
            // the adapter did everything the scenario asked.
            eprintln!("conformance_client: done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("conformance_client: {e}");
            ExitCode::FAILURE
        }
    }
}
