//! The OAuth client against a loopback authorization server and protected resource of the
//! test's own: discovery, the PKCE code flow through the loopback redirect receiver, refresh,
//! client credentials, step-up, where a token may go, and a bad metadata document.

mod support;

use std::time::Duration;

use chock_oauth::client::{ClientConfig, register};
use chock_oauth::loopback::LoopbackReceiver;
use chock_oauth::{
    Challenge, HttpRequest, OAuthError, Secret, StepUp, Token, Transport, discover, send_with_token,
};
use support::{TestTransport, start};
use url::Url;

fn post(url: &str) -> HttpRequest {
    HttpRequest {
        method: http::Method::POST,
        url: Url::parse(url).unwrap(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: b"{}".to_vec(),
    }
}

fn get(url: &str) -> HttpRequest {
    HttpRequest {
        method: http::Method::GET,
        url: Url::parse(url).unwrap(),
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// The 401 the resource answers without a token, as a challenge.
async fn first_challenge(t: &TestTransport, mcp: &str) -> Challenge {
    let answer = t.send(post(mcp)).await.unwrap();
    assert_eq!(answer.status, 401);
    Challenge::from_headers(answer.headers_named("www-authenticate")).unwrap()
}

/// Signs in through the code flow, the "browser" being plain GETs that follow the authorization
/// server's redirect to the loopback receiver.
async fn sign_in(
    t: &TestTransport,
    mcp: &str,
    challenge: &Challenge,
    scope: Option<&str>,
) -> (chock_oauth::Discovery, chock_oauth::RegisteredClient, Token) {
    let found = discover(t, mcp, Some(challenge)).await.unwrap();
    let receiver = LoopbackReceiver::bind().await.unwrap();
    let redirect = receiver.redirect_uri().to_string();
    let config = ClientConfig {
        client_name: "Chock test".into(),
        ..ClientConfig::default()
    };
    let client = register(
        t,
        &found.auth_server,
        &config,
        std::slice::from_ref(&redirect),
        &["authorization_code", "refresh_token"],
    )
    .await
    .unwrap();
    assert_eq!(client.client_id, "dyn-client");
    let scope = scope.map(str::to_string).or(found.scope.clone());
    let request = found
        .authorization_request(&client, &redirect, scope.as_deref())
        .unwrap();
    let state = request.state.clone();
    let waiting = tokio::spawn(receiver.wait_owned(state, Duration::from_secs(10)));
    let browser = TestTransport::default();
    let at_server = browser.send(get(request.url.as_str())).await.unwrap();
    assert_eq!(at_server.status, 302);
    let back = at_server.header("location").unwrap().to_string();
    let page = browser.send(get(&back)).await.unwrap();
    assert_eq!(page.status, 200);
    let code = waiting.await.unwrap().unwrap();
    let token = found
        .exchange_code(t, &client, &request, &code)
        .await
        .unwrap();
    (found, client, token)
}

#[tokio::test]
async fn discovery_then_the_pkce_code_flow_then_refresh() {
    let (world, _) = start().await;
    let base = world.lock().unwrap().resource_base.clone();
    let mcp = format!("{base}/mcp");
    let t = TestTransport::default();
    let challenge = first_challenge(&t, &mcp).await;
    let (found, client, token) = sign_in(&t, &mcp, &challenge, None).await;
    assert_eq!(found.resource, mcp);
    assert_eq!(found.scope.as_deref(), Some("read"));
    assert_eq!(token.resource, mcp);
    assert_eq!(token.scope.as_deref(), Some("read"));
    // The resource parameter went with the code exchange.
    let forms = world.lock().unwrap().token_forms.clone();
    assert_eq!(forms[0]["resource"], mcp);
    assert_eq!(forms[0]["client_id"], "dyn-client");
    let ok = send_with_token(&t, &token, post(&mcp)).await.unwrap();
    assert_eq!(ok.status, 200);

    let fresh = found.refresh(&t, &client, &token).await.unwrap();
    assert_ne!(fresh.access_token, token.access_token);
    assert_eq!(fresh.resource, mcp);
    let forms = world.lock().unwrap().token_forms.clone();
    assert_eq!(forms[1]["grant_type"], "refresh_token");
    assert_eq!(forms[1]["resource"], mcp);
    assert_eq!(
        send_with_token(&t, &fresh, post(&mcp))
            .await
            .unwrap()
            .status,
        200
    );
    // The old refresh token was spent: refreshing with it again is the server's invalid_grant.
    match found.refresh(&t, &client, &token).await {
        Err(OAuthError::Refused { error, .. }) => assert_eq!(error, "invalid_grant"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_state_is_refused() {
    let receiver = LoopbackReceiver::bind().await.unwrap();
    let back = format!("{}?code=stolen&state=forged", receiver.redirect_uri());
    let waiting =
        tokio::spawn(receiver.wait_owned("the-real-state".into(), Duration::from_secs(10)));
    let browser = TestTransport::default();
    assert_eq!(browser.send(get(&back)).await.unwrap().status, 400);
    assert!(matches!(
        waiting.await.unwrap(),
        Err(OAuthError::StateMismatch)
    ));
}

#[tokio::test]
async fn client_credentials_with_basic_and_post() {
    let (world, _) = start().await;
    let base = world.lock().unwrap().resource_base.clone();
    let mcp = format!("{base}/mcp");
    let t = TestTransport::default();
    let found = discover(&t, &mcp, None).await.unwrap();
    let config = ClientConfig {
        client_id: Some("svc".into()),
        client_secret: Some(Secret::new("s3cret")),
        ..ClientConfig::default()
    };
    let mut client = register(
        &t,
        &found.auth_server,
        &config,
        &[],
        &["client_credentials"],
    )
    .await
    .unwrap();
    assert_eq!(
        client.auth_method,
        chock_oauth::AuthMethod::ClientSecretBasic
    );
    let token = found
        .client_credentials(&t, &client, Some("read"))
        .await
        .unwrap();
    assert_eq!(
        send_with_token(&t, &token, post(&mcp))
            .await
            .unwrap()
            .status,
        200
    );
    client.auth_method = chock_oauth::AuthMethod::ClientSecretPost;
    found
        .client_credentials(&t, &client, Some("read"))
        .await
        .unwrap();
    let w = world.lock().unwrap();
    assert!(w.token_auth[0].as_deref().unwrap().starts_with("Basic "));
    assert!(!w.token_forms[0].contains_key("client_secret"));
    assert_eq!(w.token_auth[1], None);
    assert_eq!(w.token_forms[1]["client_secret"], "s3cret");
    assert_eq!(w.token_forms[1]["resource"], mcp);
}

#[tokio::test]
async fn insufficient_scope_steps_up_within_a_limit() {
    let (world, _) = start().await;
    let base = world.lock().unwrap().resource_base.clone();
    world.lock().unwrap().require = Some("admin".into());
    let mcp = format!("{base}/mcp");
    let t = TestTransport::default();
    let challenge = first_challenge(&t, &mcp).await;
    let (_, _, token) = sign_in(&t, &mcp, &challenge, None).await;
    let denied = send_with_token(&t, &token, post(&mcp)).await.unwrap();
    assert_eq!(denied.status, 403);
    let more = Challenge::from_headers(denied.headers_named("www-authenticate")).unwrap();
    assert!(more.insufficient_scope());
    let mut step = StepUp::new(1);
    let wider = step.next_scope(token.scope.as_deref(), &more).unwrap();
    assert_eq!(wider, "read admin");
    let (_, _, stronger) = sign_in(&t, &mcp, &more, Some(&wider)).await;
    assert_eq!(
        send_with_token(&t, &stronger, post(&mcp))
            .await
            .unwrap()
            .status,
        200
    );
    // A server that keeps asking is given up on.
    assert!(matches!(
        step.next_scope(stronger.scope.as_deref(), &more),
        Err(OAuthError::StepUpLimit(1))
    ));
}

#[tokio::test]
async fn a_token_goes_to_its_origin_only_and_never_on_a_redirect() {
    let (world, other) = start().await;
    let base = world.lock().unwrap().resource_base.clone();
    let mcp = format!("{base}/mcp");
    let t = TestTransport::default();
    let challenge = first_challenge(&t, &mcp).await;
    let (_, _, token) = sign_in(&t, &mcp, &challenge, None).await;
    // Another origin: refused before any request is made.
    let before = t.sent.lock().unwrap().len();
    match send_with_token(&t, &token, post(&format!("{other}/mcp"))).await {
        Err(OAuthError::NotForThisOrigin { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(t.sent.lock().unwrap().len(), before);
    // The resource redirects to the other origin: not followed.
    match send_with_token(&t, &token, post(&format!("{base}/moved"))).await {
        Err(OAuthError::Redirected { location, .. }) => assert!(location.starts_with(&other)),
        other => panic!("{other:?}"),
    }
    let w = world.lock().unwrap();
    assert!(
        w.resource_seen.iter().all(|(at, _)| at != "other"),
        "{:?}",
        w.resource_seen
    );
    let secret = token.access_token.expose();
    for seen in t.sent.lock().unwrap().iter() {
        if seen
            .authorization
            .as_deref()
            .is_some_and(|a| a.contains(secret))
        {
            assert!(seen.url.starts_with(&base), "token sent to {}", seen.url);
        }
    }
}

#[tokio::test]
async fn bad_metadata_names_the_document_and_field() {
    let (world, _) = start().await;
    let (base, issuer) = {
        let mut w = world.lock().unwrap();
        w.bad_metadata = true;
        (w.resource_base.clone(), w.issuer.clone())
    };
    let t = TestTransport::default();
    let err = discover(&t, &format!("{base}/mcp"), None)
        .await
        .unwrap_err();
    let text = err.to_string();
    match err {
        OAuthError::BadDocument {
            document, field, ..
        } => {
            assert!(
                document.ends_with("/.well-known/oauth-authorization-server/tenant"),
                "{document}"
            );
            assert!(document.starts_with(issuer.trim_end_matches("/tenant")));
            assert_eq!(field, "token_endpoint");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        text.contains("token_endpoint") && text.contains("is missing"),
        "{text}"
    );
}

#[tokio::test]
async fn without_resource_metadata_the_2025_03_26_defaults_apply() {
    let bare = support::serve(axum::Router::new()).await;
    let t = TestTransport::default();
    let found = discover(&t, &format!("{bare}/mcp"), None).await.unwrap();
    assert!(found.resource_metadata.is_none());
    assert_eq!(
        found.auth_server.authorization_endpoint.as_str(),
        format!("{bare}/authorize")
    );
    assert_eq!(
        found.auth_server.token_endpoint.as_str(),
        format!("{bare}/token")
    );
    assert_eq!(found.resource, format!("{bare}/mcp"));
    let asked: Vec<String> = t
        .sent
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.url.clone())
        .collect();
    assert_eq!(
        asked,
        [
            format!("{bare}/.well-known/oauth-protected-resource/mcp"),
            format!("{bare}/.well-known/oauth-protected-resource"),
            format!("{bare}/.well-known/oauth-authorization-server"),
            format!("{bare}/.well-known/openid-configuration"),
        ]
    );
}

#[tokio::test]
async fn a_revoked_refresh_token_no_longer_refreshes() {
    let (world, _) = start().await;
    let base = world.lock().unwrap().resource_base.clone();
    let mcp = format!("{base}/mcp");
    let t = TestTransport::default();
    let challenge = first_challenge(&t, &mcp).await;
    let (found, client, token) = sign_in(&t, &mcp, &challenge, None).await;
    let endpoint = found.auth_server.revocation_endpoint.clone().unwrap();
    let refresh = token.refresh_token.clone().unwrap();
    chock_oauth::client::revoke(&t, &endpoint, &client, &refresh, "refresh_token")
        .await
        .unwrap();
    {
        let w = world.lock().unwrap();
        assert_eq!(w.revoked[0]["token_type_hint"], "refresh_token");
        assert_eq!(w.revoked[0]["client_id"], "dyn-client");
    }
    match found.refresh(&t, &client, &token).await {
        Err(OAuthError::Refused { error, .. }) => assert_eq!(error, "invalid_grant"),
        other => panic!("{other:?}"),
    }
}
