//! The MCP 2025-11-25 and 2026 client rules against the tests' loopback authorization server:
//! the authorization response's `iss` (RFC 9207), client ID metadata documents, what dynamic
//! registration says, `offline_access` only where listed, `private_key_jwt`, and the 2025-03-26
//! metadata at the server's own origin.

mod support;

use std::time::Duration;

use chock_oauth::client::{ClientConfig, register};
use chock_oauth::{
    Algorithm, AssertionKey, Challenge, ClientChoice, HttpRequest, OAuthError, Transport, discover,
    sign_in_with_code,
};
use support::{GetBrowser, Shared, TestTransport, start};
use url::Url;

async fn found(world: &Shared, t: &TestTransport) -> chock_oauth::Discovery {
    let base = world.lock().unwrap().resource_base.clone();
    let mcp = format!("{base}/mcp");
    let answer = t
        .send(HttpRequest {
            method: http::Method::POST,
            url: Url::parse(&mcp).unwrap(),
            headers: Vec::new(),
            body: b"{}".to_vec(),
        })
        .await
        .unwrap();
    let challenge = Challenge::from_headers(answer.headers_named("www-authenticate"));
    discover(t, &mcp, challenge.as_ref()).await.unwrap()
}

fn config() -> ClientConfig {
    ClientConfig {
        client_name: "Chock test".into(),
        ..ClientConfig::default()
    }
}

async fn code_flow(
    world: &Shared,
    config: &ClientConfig,
) -> Result<chock_oauth::RegisteredClient, OAuthError> {
    let t = TestTransport::default();
    let found = found(world, &t).await;
    let scope = found.scope.clone();
    sign_in_with_code(
        &t,
        &found,
        ClientChoice::Register(config),
        scope.as_deref(),
        &GetBrowser,
        Duration::from_secs(10),
    )
    .await
    .map(|(client, _)| client)
}

#[tokio::test]
async fn the_responses_iss_is_compared_exactly_and_required_when_promised() {
    // (advertised, what the redirect carries, taken)
    let cases = [
        (true, Some("correct"), true),
        (false, None, true),
        (false, Some("correct"), true),
        (true, None, false),
        (true, Some("wrong"), false),
        (false, Some("wrong"), false),
        (true, Some("slash"), false),
    ];
    for (advertised, iss, taken) in cases {
        let (world, _) = start().await;
        {
            let mut w = world.lock().unwrap();
            w.iss_supported = advertised;
            w.iss_in_redirect = iss;
        }
        let result = code_flow(&world, &config()).await;
        let exchanged = world.lock().unwrap().token_forms.len();
        let case = format!("advertised {advertised}, iss {iss:?}: {result:?}");
        if taken {
            assert!(result.is_ok(), "{case}");
            assert_eq!(exchanged, 1, "{case}");
        } else {
            assert!(
                matches!(result, Err(OAuthError::IssuerMismatch { .. })),
                "{case}"
            );
            // The code of a refused response never reaches the token endpoint.
            assert_eq!(exchanged, 0, "{case}");
        }
    }
}

#[tokio::test]
async fn a_client_id_metadata_document_is_the_client_id_where_the_server_takes_one() {
    let doc = "https://chock.example/oauth/client.json";
    let with_doc = ClientConfig {
        metadata_document: Some(doc.into()),
        ..config()
    };
    let (world, _) = start().await;
    world.lock().unwrap().cimd = true;
    let client = code_flow(&world, &with_doc).await.unwrap();
    assert_eq!(client.client_id, doc);
    {
        let w = world.lock().unwrap();
        assert_eq!(w.authorizations[0]["client_id"], doc);
        assert_eq!(w.token_forms[0]["client_id"], doc);
        assert!(w.registrations.is_empty(), "no dynamic registration");
    }

    // A server that does not say it takes them: dynamic registration, as a native application.
    let (world, _) = start().await;
    let client = code_flow(&world, &with_doc).await.unwrap();
    assert_eq!(client.client_id, "dyn-client");
    let w = world.lock().unwrap();
    assert_eq!(w.registrations.len(), 1);
    assert_eq!(w.registrations[0]["application_type"], "native");
}

#[tokio::test]
async fn offline_access_is_asked_only_where_the_server_lists_it() {
    let (world, _) = start().await;
    world.lock().unwrap().as_scopes = vec!["read".into(), "offline_access".into()];
    code_flow(&world, &config()).await.unwrap();
    let asked = world.lock().unwrap().authorizations[0]["scope"].clone();
    assert_eq!(asked, "read offline_access");

    let (world, _) = start().await;
    world.lock().unwrap().as_scopes = vec!["read".into()];
    code_flow(&world, &config()).await.unwrap();
    let asked = world.lock().unwrap().authorizations[0]["scope"].clone();
    assert_eq!(asked, "read");
}

#[tokio::test]
async fn private_key_jwt_signs_an_assertion_for_this_server_and_sends_no_secret() {
    use base64::Engine as _;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der.as_ref())
    );
    let (world, _) = start().await;
    world.lock().unwrap().jwt_public_key = Some(pair.public_key().as_ref().to_vec());
    let t = TestTransport::default();
    let found = found(&world, &t).await;
    let config = ClientConfig {
        client_id: Some("jwt-client".into()),
        private_key: Some(AssertionKey::from_pem(&pem, Algorithm::Es256, "test key").unwrap()),
        ..config()
    };
    let client = register(
        &t,
        &found.auth_server,
        &config,
        &[],
        &["client_credentials"],
    )
    .await
    .unwrap();
    let token = found
        .client_credentials(&t, &client, Some("read"))
        .await
        .unwrap();
    assert_eq!(token.scope.as_deref(), Some("read"));
    {
        let w = world.lock().unwrap();
        assert!(w.token_auth[0].is_none(), "no Basic header");
        assert_eq!(w.token_forms[0]["client_id"], "jwt-client");
    }

    // Another key (the server holds this one's public half only): refused.
    let other = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(other.as_ref())
    );
    let config = ClientConfig {
        private_key: Some(AssertionKey::from_pem(&pem, Algorithm::Es256, "test key").unwrap()),
        ..config
    };
    let client = register(
        &t,
        &found.auth_server,
        &config,
        &[],
        &["client_credentials"],
    )
    .await
    .unwrap();
    let err = found
        .client_credentials(&t, &client, Some("read"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("signature does not verify"),
        "{err}"
    );
}

#[tokio::test]
async fn the_2025_03_26_metadata_at_the_servers_origin_may_name_an_issuer_of_that_origin() {
    use axum::routing::get;
    let origin = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let issuer_at = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (o, i) = (origin.clone(), issuer_at.clone());
    let app = axum::Router::new().route(
        "/.well-known/oauth-authorization-server",
        get(move || {
            let (o, i) = (o.lock().unwrap().clone(), i.lock().unwrap().clone());
            async move {
                axum::Json(serde_json::json!({
                    "issuer": i,
                    "authorization_endpoint": format!("{o}/oauth/authorize"),
                    "token_endpoint": format!("{o}/oauth/token"),
                    "registration_endpoint": format!("{o}/oauth/register"),
                    "code_challenge_methods_supported": ["S256"],
                }))
            }
        }),
    );
    let base = support::serve(app).await;
    *origin.lock().unwrap() = base.clone();
    *issuer_at.lock().unwrap() = format!("{base}/oauth");
    let t = TestTransport::default();
    let found = discover(&t, &format!("{base}/mcp"), None).await.unwrap();
    assert!(found.resource_metadata.is_none());
    assert_eq!(
        found.auth_server.token_endpoint.as_str(),
        format!("{base}/oauth/token")
    );
    // An issuer of another origin is still refused.
    *issuer_at.lock().unwrap() = "http://127.0.0.2:9/oauth".into();
    let err = discover(&t, &format!("{base}/mcp"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("field `issuer`"), "{err}");
}

#[tokio::test]
async fn an_id_token_becomes_an_id_jag_then_a_token_by_the_jwt_bearer_grant() {
    let (world, _) = start().await;
    let t = TestTransport::default();
    let found = found(&world, &t).await;
    let (issuer, base) = {
        let w = world.lock().unwrap();
        (w.issuer.clone(), w.resource_base.clone())
    };
    let idp = Url::parse(&issuer.replace("/tenant", "/idp/token")).unwrap();
    let jag = chock_oauth::grants::exchange_id_token_for_id_jag(
        &t,
        &idp,
        "idp-client",
        &chock_oauth::Secret::new("id-token-of-alice"),
        &found,
    )
    .await
    .unwrap();
    assert_eq!(jag.expose(), "jag-for-alice");
    let config = ClientConfig {
        client_id: Some("svc".into()),
        client_secret: Some(chock_oauth::Secret::new("s3cret")),
        ..config()
    };
    let client = register(&t, &found.auth_server, &config, &[], &[])
        .await
        .unwrap();
    let token = found
        .jwt_bearer(&t, &client, &jag, Some("read"))
        .await
        .unwrap();
    assert_eq!(token.resource, format!("{base}/mcp"));
    let w = world.lock().unwrap();
    let x = &w.exchanges[0];
    assert_eq!(
        x["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        x["subject_token_type"],
        "urn:ietf:params:oauth:token-type:id_token"
    );
    assert_eq!(
        x["requested_token_type"],
        "urn:ietf:params:oauth:token-type:id-jag"
    );
    assert_eq!(x["audience"], issuer);
    assert_eq!(x["resource"], format!("{base}/mcp"));
    assert_eq!(x["client_id"], "idp-client");
    let form = &w.token_forms[0];
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    assert_eq!(form["assertion"], "jag-for-alice");
    assert!(
        w.token_auth[0]
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic ")),
        "the confidential client authenticates"
    );
}

#[tokio::test]
async fn a_workload_token_is_sent_once_and_a_refusal_is_not_retried() {
    let (world, _) = start().await;
    let t = TestTransport::default();
    let found = found(&world, &t).await;
    let config = ClientConfig {
        client_id: Some("workload".into()),
        ..config()
    };
    let client = register(&t, &found.auth_server, &config, &[], &[])
        .await
        .unwrap();
    found
        .jwt_bearer(
            &t,
            &client,
            &chock_oauth::Secret::new("workload-token"),
            None,
        )
        .await
        .unwrap();
    let err = found
        .jwt_bearer(&t, &client, &chock_oauth::Secret::new("forged"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OAuthError::Refused { error, .. } if error == "invalid_grant"),
        "{err}"
    );
    let w = world.lock().unwrap();
    assert_eq!(w.token_forms.len(), 2, "one request each, no retry");
    assert_eq!(w.token_forms[0]["client_id"], "workload");
}

#[tokio::test]
async fn a_dpop_bound_token_is_asked_with_a_proof_that_takes_the_servers_nonce() {
    let (world, _) = start().await;
    world.lock().unwrap().dpop = true;
    let t = TestTransport::default();
    let found = found(&world, &t).await;
    let scope = found.scope.clone();
    let (client, token) = sign_in_with_code(
        &t,
        &found,
        ClientChoice::Register(&config()),
        scope.as_deref(),
        &GetBrowser,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(client.dpop.is_some(), "a key for this server's tokens");
    assert_eq!(token.token_type, "DPoP");
    let mcp = Url::parse(&token.resource).unwrap();
    assert!(token.authorization_for(&mcp).unwrap().starts_with("DPoP "));
    let w = world.lock().unwrap();
    // The first proof met `use_dpop_nonce`; the one retry carried the nonce; both were signed
    // by the key in their header, for this endpoint, with fresh jtis.
    assert_eq!(w.dpop_proofs.len(), 2);
    assert!(w.dpop_proofs[0].get("nonce").is_none());
    assert_eq!(w.dpop_proofs[1]["nonce"], "n-42");
    assert_ne!(w.dpop_proofs[0]["jti"], w.dpop_proofs[1]["jti"]);
}
