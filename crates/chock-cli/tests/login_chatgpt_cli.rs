//! `chock login --provider chatgpt`: a ChatGPT account signed in against a loopback issuer of the
//! test's own that follows the endpoints Codex's sign-in uses (the real one cannot be reached
//! from here), in a browser (a `$BROWSER` script that follows the redirect) and by device code;
//! then a session whose requests carry the account's token and account id, refreshed when it
//! lapses, and never written to the log.

mod run_support;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chock_test_support::model::{Request, serve_each};
use run_support::*;
use sha2::{Digest, Sha256};

const ACCOUNT: &str = "acct-7f3a";
const EMAIL: &str = "person@example.com";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An unsigned JWT carrying `claims` (the client reads, never checks, the claims of tokens it
/// got straight from the token endpoint).
fn jwt(claims: &serde_json::Value) -> String {
    format!("e30.{}.c2ln", URL_SAFE_NO_PAD.encode(claims.to_string()))
}

fn access_token(tag: &str, exp: u64) -> String {
    jwt(
        &serde_json::json!({"exp": exp, "tag": tag, "https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT}}),
    )
}

/// What the issuer saw and how it answers.
#[derive(Default)]
struct Issued {
    /// `code_challenge` of the authorization request, by code handed out.
    challenges: BTreeMap<String, (String, String)>,
    /// Every token request's grant type, in order.
    grants: Vec<String>,
    /// Device-token polls so far.
    polls: u32,
    /// The first access token's lifetime (negative: already lapsed).
    first_lifetime: i64,
}

fn after(lifetime: i64) -> u64 {
    now().saturating_add_signed(lifetime)
}

fn respond(mut stream: TcpStream, status: &str, headers: &[(&str, &str)], body: &str) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

fn target(request: &Request) -> (String, String, BTreeMap<String, String>) {
    let line = request.head.lines().next().unwrap_or_default().to_string();
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = url_pairs(query);
    (method, path.to_string(), query)
}

fn url_pairs(text: &str) -> BTreeMap<String, String> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The test's issuer: `/oauth/authorize` redirects straight back with a code, `/oauth/token`
/// checks PKCE and answers tokens (and refreshes), the device endpoints answer "not yet" once.
fn issuer(first_lifetime: i64) -> (u16, Arc<Mutex<Issued>>) {
    let issued = Arc::new(Mutex::new(Issued {
        first_lifetime,
        ..Issued::default()
    }));
    let state = Arc::clone(&issued);
    let port = serve_each(move |stream, _reader: BufReader<TcpStream>, request| {
        let (method, path, query) = target(&request);
        let mut issued = state.lock().unwrap();
        match (method.as_str(), path.as_str()) {
            ("GET", "/oauth/authorize") => {
                assert_eq!(query["client_id"], "app_EMoamEEZ73f0CkXaXp7hrann");
                assert_eq!(query["code_challenge_method"], "S256");
                let code = format!("code-{}", issued.challenges.len() + 1);
                issued.challenges.insert(
                    code.clone(),
                    (
                        query["code_challenge"].clone(),
                        query["redirect_uri"].clone(),
                    ),
                );
                let location = format!(
                    "{}?code={code}&state={}",
                    query["redirect_uri"], query["state"]
                );
                respond(stream, "302 Found", &[("location", &location)], "");
            }
            ("POST", "/oauth/token") => {
                let body = String::from_utf8_lossy(&request.body).to_string();
                if let Ok(json) = serde_json::from_str::<serde_json::Value>(&body) {
                    // A refresh.
                    issued
                        .grants
                        .push(json["grant_type"].as_str().unwrap_or("").into());
                    assert_eq!(json["refresh_token"], "refresh-1");
                    let answer = serde_json::json!({
                        "access_token": access_token("refreshed", now() + 3600),
                        "refresh_token": "refresh-2",
                    });
                    return respond(
                        stream,
                        "200 OK",
                        &[("content-type", "application/json")],
                        &answer.to_string(),
                    );
                }
                let form = url_pairs(&body);
                issued.grants.push(form["grant_type"].clone());
                let Some((challenge, redirect)) = issued.challenges.get(&form["code"]).cloned()
                else {
                    return respond(
                        stream,
                        "400 Bad Request",
                        &[],
                        r#"{"error":"invalid_grant"}"#,
                    );
                };
                if s256(&form["code_verifier"]) != challenge || form["redirect_uri"] != redirect {
                    return respond(
                        stream,
                        "400 Bad Request",
                        &[],
                        r#"{"error":"invalid_grant","error_description":"pkce"}"#,
                    );
                }
                let exp = after(issued.first_lifetime);
                let answer = serde_json::json!({
                    "id_token": jwt(&serde_json::json!({"email": EMAIL, "https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT}})),
                    "access_token": access_token("first", exp),
                    "refresh_token": "refresh-1",
                });
                respond(
                    stream,
                    "200 OK",
                    &[("content-type", "application/json")],
                    &answer.to_string(),
                );
            }
            ("POST", "/api/accounts/deviceauth/usercode") => {
                respond(
                    stream,
                    "200 OK",
                    &[],
                    r#"{"device_auth_id":"dev-1","user_code":"WXYZ-1234","interval":"1"}"#,
                );
            }
            ("POST", "/api/accounts/deviceauth/token") => {
                issued.polls += 1;
                if issued.polls == 1 {
                    return respond(stream, "403 Forbidden", &[], "{}");
                }
                let verifier = "device-verifier-0123456789-0123456789-0123456789";
                let code = "code-device";
                let port = request
                    .head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("host: ")
                            .map(str::to_string)
                    })
                    .unwrap();
                issued.challenges.insert(
                    code.into(),
                    (
                        s256(verifier),
                        format!("http://{}/deviceauth/callback", port.trim()),
                    ),
                );
                let answer = serde_json::json!({
                    "authorization_code": code, "code_verifier": verifier, "code_challenge": s256(verifier),
                });
                respond(stream, "200 OK", &[], &answer.to_string());
            }
            _ => respond(stream, "404 Not Found", &[], "{}"),
        }
    });
    (port, issued)
}

/// A model speaking the Responses wire format: one text reply per request; every request kept.
fn responses_model() -> (u16, Arc<Mutex<Vec<Request>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let port = serve_each(move |mut stream, _reader, request| {
        kept.lock().unwrap().push(request);
        let events = [
            r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}}"#,
            r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Signed in and answering."}"#,
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Signed in and answering.","annotations":[]}]}}"#,
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":12,"output_tokens":4,"total_tokens":16}}}"#,
        ];
        let mut body = String::new();
        for e in events {
            let kind: serde_json::Value = serde_json::from_str(e).unwrap();
            body.push_str(&format!(
                "event: {}\ndata: {e}\n\n",
                kind["type"].as_str().unwrap()
            ));
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body.as_bytes());
    });
    (port, seen)
}

/// The world's config.toml naming the issuer and the model, and a `$BROWSER` that follows the
/// authorization URL's redirect back to chock's listener (as a person's browser would).
fn signed_world(issuer_port: u16, model_port: u16) -> (World, std::path::PathBuf) {
    let w = World::new();
    w.config_toml(&format!(
        "[providers.chatgpt]\nkind = \"chatgpt\"\nissuer = \"http://127.0.0.1:{issuer_port}\"\nbase_url = \"http://127.0.0.1:{model_port}/backend-api/codex\"\n"
    ));
    let browser = w.outside(
        "browser.sh",
        "#!/bin/sh\nexec curl -s -L --max-redirs 1 -o /dev/null \"$1\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    (w, browser)
}

fn stored(w: &World) -> serde_json::Value {
    let file = w.data.join("chock/credentials/signin-chatgpt");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn a_browser_sign_in_is_kept_and_a_session_sends_its_token_and_account() {
    let (issuer_port, issued) = issuer(3600);
    let (model_port, seen) = responses_model();
    let (w, browser) = signed_world(issuer_port, model_port);
    let browser = browser.display().to_string();
    let out = w.chock_with_env(
        &["login", "--provider", "chatgpt", "--callback-port", "0"],
        &[("BROWSER", &browser)],
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("signed in as {EMAIL} (account {ACCOUNT})")),
        "{said}"
    );
    let kept = stored(&w);
    let token = kept["access_token"].as_str().unwrap().to_string();
    assert!(!said.contains(&token), "the token is never printed");
    assert_eq!(issued.lock().unwrap().grants, ["authorization_code"]);

    let run = w.chock(&["run", "--provider", "chatgpt", "say something"]);
    let printed = format!("{}{}", text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{printed}");
    assert!(printed.contains("Signed in and answering."), "{printed}");
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let head = requests[0].head.to_ascii_lowercase();
    assert!(
        head.starts_with("post /backend-api/codex/responses "),
        "no /v1 is added: {head}"
    );
    assert!(
        head.contains(&format!(
            "authorization: bearer {}",
            token.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(
        head.contains(&format!("chatgpt-account-id: {ACCOUNT}")),
        "{head}"
    );
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(
        !log.contains(&token) && !log.contains("refresh-1"),
        "no token in the log"
    );
    // Nothing was refreshed: the token had an hour left.
    assert_eq!(issued.lock().unwrap().grants, ["authorization_code"]);
}

#[test]
fn a_lapsed_token_is_refreshed_before_the_request_and_kept() {
    let (issuer_port, issued) = issuer(-60);
    let (model_port, seen) = responses_model();
    let (w, browser) = signed_world(issuer_port, model_port);
    let browser = browser.display().to_string();
    let out = w.chock_with_env(
        &["login", "--provider", "chatgpt", "--callback-port", "0"],
        &[("BROWSER", &browser)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lapsed = stored(&w)["access_token"].as_str().unwrap().to_string();

    let run = w.chock(&["run", "--provider", "chatgpt", "say something"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(
        issued.lock().unwrap().grants,
        ["authorization_code", "refresh_token"]
    );
    let kept = stored(&w);
    let fresh = kept["access_token"].as_str().unwrap().to_string();
    assert_ne!(fresh, lapsed);
    assert_eq!(
        kept["refresh_token"], "refresh-2",
        "the rotated refresh token is kept"
    );
    let head = seen.lock().unwrap()[0].head.clone();
    assert!(
        head.contains(&format!("Bearer {fresh}")),
        "the refreshed token is sent: {head}"
    );
    assert!(!head.contains(&lapsed));
    let log = std::fs::read_to_string(w.session().join("log.jsonl")).unwrap();
    assert!(!log.contains(&fresh) && !log.contains("refresh-2"));
}

#[test]
fn a_device_code_sign_in_polls_until_the_code_is_entered() {
    let (issuer_port, issued) = issuer(3600);
    let (w, _) = signed_world(issuer_port, 9);
    let out = w.chock(&["login", "--provider", "chatgpt", "--device-code"]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("WXYZ-1234") && said.contains("/codex/device"),
        "{said}"
    );
    assert_eq!(
        issued.lock().unwrap().polls,
        2,
        "asked again after the first 'not yet'"
    );
    assert_eq!(stored(&w)["account_id"], ACCOUNT);
}

#[test]
fn a_session_with_nobody_signed_in_says_how_to_sign_in() {
    let (w, _) = signed_world(9, 9);
    let run = w.chock(&["run", "--provider", "chatgpt", "say something"]);
    assert_eq!(run.status.code(), Some(2), "bad input");
    assert!(
        text(&run.stderr).contains("not signed in: run `chock login --provider chatgpt`"),
        "{}",
        text(&run.stderr)
    );
    w.config_toml("[providers.work]\nkind = \"openai\"\nissuer = \"https://auth.openai.com\"\n");
    let bad = w.chock(&["run", "--provider", "work", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("providers.work.issuer"),
        "{}",
        text(&bad.stderr)
    );
}
