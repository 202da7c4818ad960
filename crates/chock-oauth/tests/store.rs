//! A grant kept in the 0600 file store, keyed by server URL and resource, never printed.

use std::os::unix::fs::PermissionsExt;

use chock_oauth::store::{Grant, entry_name, forget_in, load_from, save_in};
use chock_oauth::{Secret, Token};

fn grant(server: &str) -> Grant {
    Grant {
        server: server.into(),
        resource: server.into(),
        issuer: "https://auth.example".into(),
        client_id: "dyn".into(),
        client_secret: None,
        auth_method: "none".into(),
        revocation_endpoint: None,
        token: Token {
            access_token: Secret::new("at-very-secret"),
            token_type: "Bearer".into(),
            expires_at: Some(1),
            refresh_token: Some(Secret::new("rt-very-secret")),
            scope: Some("read".into()),
            resource: server.into(),
        },
        dpop_key: None,
    }
}

#[test]
fn a_grant_is_kept_0600_per_server_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    let a = grant("https://a.example/mcp");
    save_in(&creds, &a).unwrap();
    let path = creds.join(entry_name(&a.server, &a.resource));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        load_from(&creds, &a.server, &a.resource).unwrap(),
        Some(a.clone())
    );
    // Another server (or the same URL with another resource) finds nothing.
    assert_eq!(
        load_from(&creds, "https://b.example/mcp", "https://b.example/mcp").unwrap(),
        None
    );
    assert_eq!(
        load_from(&creds, &a.server, "https://a.example/other").unwrap(),
        None
    );
    assert!(a.token.expires_within(0));
    let shown = format!("{a:?}");
    assert!(!shown.contains("very-secret"), "{shown}");
    assert!(forget_in(&creds, &a.server, &a.resource).unwrap());
    assert_eq!(load_from(&creds, &a.server, &a.resource).unwrap(), None);
    assert!(!forget_in(&creds, &a.server, &a.resource).unwrap());
}
