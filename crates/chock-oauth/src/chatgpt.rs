//! Signing in with a ChatGPT account, as Codex does, with this crate's one OAuth client: the
//! authorization code flow with PKCE and a loopback callback, or the device-code flow for a machine
//! without a browser. The tokens are kept in the credential store (the OS keyring, else a 0600
//! file) and refreshed by the host before they lapse; the OpenAI provider sends the access token
//! and the account it names. Nothing here prints a token.
//!
//! The identity provider's endpoints are the ones Codex uses under its issuer (by default
//! `https://auth.openai.com`): `/oauth/authorize`, `/oauth/token`, and for the device code
//! `/api/accounts/deviceauth/usercode` and `/api/accounts/deviceauth/token`, whose answer is an
//! authorization code and the PKCE pair it was issued under.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use chock_config::credentials::{self, ApiKey, KeySource};

use crate::OAuthError;
use crate::metadata::{check_url, is_secure};
use crate::pkce::Pkce;
use crate::token::{Secret, now};
use crate::transport::{HttpRequest, Transport, excerpt, post_form, send};

/// The issuer a ChatGPT sign-in goes to when config.toml names no other.
pub const ISSUER: &str = "https://auth.openai.com";
/// The public client Codex is registered as; its redirect is fixed to [`CALLBACK_PORT`].
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The loopback port the client's redirect is registered at.
pub const CALLBACK_PORT: u16 = 1455;
/// The path the redirect comes back to.
pub const CALLBACK_PATH: &str = "/auth/callback";
/// What is asked for: an identity, and a refresh token.
const SCOPE: &str = "openid profile email offline_access";
/// The claim that carries the ChatGPT account of a token.
const AUTH_CLAIM: &str = "https://api.openai.com/auth";
/// How long before its expiry a token is refreshed.
const REFRESH_MARGIN: u64 = 300;

/// An issuer checked once: https, or http to a loopback host (a test's own server).
#[derive(Debug, Clone)]
pub struct Issuer {
    base: Url,
}

/// What a device-code sign-in shows the person: where to go and the code to type there.
#[derive(Debug, Clone)]
pub struct DeviceCode {
    /// The page where the code is entered.
    pub verification_url: String,
    /// The one-time code.
    pub user_code: String,
    device_auth_id: String,
    interval: Duration,
}

/// A signed-in ChatGPT account: what the credential store keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignIn {
    /// The issuer that signed it in (and refreshes it).
    pub issuer: String,
    /// The OpenID Connect identity token.
    pub id_token: Secret,
    /// The access token the provider sends.
    pub access_token: Secret,
    /// The refresh token.
    pub refresh_token: Secret,
    /// The ChatGPT account the tokens are for (the `chatgpt-account-id` header).
    pub account_id: Option<String>,
    /// The account's e-mail address, to say who is signed in.
    pub email: Option<String>,
    /// When the access token lapses, in seconds since the epoch (`None`: it did not say).
    pub expires_at: Option<u64>,
}

impl Issuer {
    /// Checks `text` as an issuer URL.
    pub fn new(text: &str) -> Result<Issuer, OAuthError> {
        let base = check_url(text)?;
        if !is_secure(&base) {
            return Err(OAuthError::BadUrl {
                url: text.to_string(),
                problem: "a sign-in goes over https (or http to a loopback address) only".into(),
            });
        }
        Ok(Issuer { base })
    }

    fn endpoint(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let joined = format!("{}{path}", self.base.path().trim_end_matches('/'));
        url.set_path(&joined);
        url.set_query(None);
        url
    }

    /// The issuer's URL as given.
    pub fn as_str(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// The URL the person's browser opens.
    pub fn authorize_url(&self, redirect_uri: &str, pkce: &Pkce, state: &str) -> Url {
        let mut url = self.endpoint("/oauth/authorize");
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", CLIENT_ID)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", SCOPE)
            .append_pair("code_challenge", pkce.challenge())
            .append_pair("code_challenge_method", "S256")
            .append_pair("id_token_add_organizations", "true")
            .append_pair("codex_cli_simplified_flow", "true")
            .append_pair("state", state);
        url
    }

    /// Trades the redirect's `code` for the account's tokens.
    pub async fn exchange<T: Transport>(
        &self,
        transport: &T,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
    ) -> Result<SignIn, OAuthError> {
        let endpoint = self.endpoint("/oauth/token");
        let request = post_form(
            &endpoint,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect_uri),
                ("client_id", CLIENT_ID),
                ("code_verifier", verifier),
            ],
        );
        let answer = answered(transport, request).await?;
        self.sign_in(&endpoint, &answer, None)
    }

    /// A fresh access token for `signed`, keeping what the answer does not replace.
    pub async fn refresh<T: Transport>(
        &self,
        transport: &T,
        signed: &SignIn,
    ) -> Result<SignIn, OAuthError> {
        let endpoint = self.endpoint("/oauth/token");
        let request = post_json(
            &endpoint,
            &json!({
                "client_id": CLIENT_ID,
                "grant_type": "refresh_token",
                "refresh_token": signed.refresh_token.expose(),
                "scope": "openid profile email",
            }),
        );
        let answer = answered(transport, request).await?;
        self.sign_in(&endpoint, &answer, Some(signed))
    }

    /// Asks for a device code the person enters at the issuer's device page.
    pub async fn device_code<T: Transport>(&self, transport: &T) -> Result<DeviceCode, OAuthError> {
        let endpoint = self.endpoint("/api/accounts/deviceauth/usercode");
        let request = post_json(&endpoint, &json!({ "client_id": CLIENT_ID }));
        let response = send(transport, request).await?;
        if response.status == 404 {
            return Err(OAuthError::Status {
                url: endpoint.to_string(),
                status: 404,
                body: "this issuer does not offer device-code sign-in; sign in in a browser".into(),
            });
        }
        if response.status != 200 {
            return Err(OAuthError::Status {
                url: endpoint.to_string(),
                status: response.status,
                body: excerpt(&response.body),
            });
        }
        let doc = endpoint.to_string();
        let value: Value = serde_json::from_slice(&response.body)
            .map_err(|e| OAuthError::bad(&doc, "(document)", e.to_string()))?;
        let text = |field: &str| {
            value[field]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| OAuthError::bad(&doc, field, "missing"))
        };
        let device_auth_id = text("device_auth_id")?;
        let user_code = text("user_code").or_else(|_| text("usercode"))?;
        // The interval comes as a number or as a string of one.
        let interval = match &value["interval"] {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .unwrap_or(5)
        .clamp(1, 60);
        Ok(DeviceCode {
            verification_url: self.endpoint("/codex/device").to_string(),
            user_code,
            device_auth_id,
            interval: Duration::from_secs(interval),
        })
    }

    /// Waits, asking every interval, until the person has entered `code` (at most `max_wait`),
    /// then trades the code the issuer hands back for the account's tokens.
    pub async fn finish_device_code<T: Transport>(
        &self,
        transport: &T,
        code: &DeviceCode,
        max_wait: Duration,
    ) -> Result<SignIn, OAuthError> {
        let endpoint = self.endpoint("/api/accounts/deviceauth/token");
        let doc = endpoint.to_string();
        let started = std::time::Instant::now();
        let value: Value = loop {
            let request = post_json(
                &endpoint,
                &json!({ "device_auth_id": code.device_auth_id, "user_code": code.user_code }),
            );
            let response = send(transport, request).await?;
            match response.status {
                200 => {
                    break serde_json::from_slice(&response.body)
                        .map_err(|e| OAuthError::bad(&doc, "(document)", e.to_string()))?;
                }
                // Not entered yet.
                403 | 404 => {
                    if started.elapsed() >= max_wait {
                        return Err(OAuthError::Timeout(max_wait.as_secs()));
                    }
                    tokio::time::sleep(code.interval).await;
                }
                status => {
                    return Err(OAuthError::Status {
                        url: doc,
                        status,
                        body: excerpt(&response.body),
                    });
                }
            }
        };
        let field = |name: &str| {
            value[name]
                .as_str()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| OAuthError::bad(&doc, name, "missing"))
        };
        let authorization_code = field("authorization_code")?;
        let verifier = field("code_verifier")?;
        let pkce = Pkce::from_verifier(verifier.to_string());
        if field("code_challenge")? != pkce.challenge() {
            return Err(OAuthError::bad(
                &doc,
                "code_challenge",
                "is not the S256 challenge of the code_verifier beside it",
            ));
        }
        let redirect = self.endpoint("/deviceauth/callback").to_string();
        self.exchange(transport, authorization_code, &redirect, pkce.verifier())
            .await
    }

    /// The account's tokens from a token endpoint's answer; a refresh keeps what it omits.
    fn sign_in(
        &self,
        endpoint: &Url,
        answer: &Value,
        before: Option<&SignIn>,
    ) -> Result<SignIn, OAuthError> {
        let doc = endpoint.to_string();
        let secret = |name: &str| -> Result<Secret, OAuthError> {
            match (answer[name].as_str().filter(|s| !s.is_empty()), before) {
                (Some(s), _) => Ok(Secret::new(s)),
                (None, Some(before)) => Ok(match name {
                    "id_token" => before.id_token.clone(),
                    "access_token" => before.access_token.clone(),
                    _ => before.refresh_token.clone(),
                }),
                (None, None) => Err(OAuthError::bad(&doc, name, "missing")),
            }
        };
        let id_token = secret("id_token")?;
        let access_token = secret("access_token")?;
        let refresh_token = secret("refresh_token")?;
        let identity = claims(id_token.expose()).unwrap_or_default();
        let access = claims(access_token.expose()).unwrap_or_default();
        let account = |c: &Value| {
            c[AUTH_CLAIM]["chatgpt_account_id"]
                .as_str()
                .map(str::to_string)
        };
        let expires_at = access["exp"]
            .as_u64()
            .or_else(|| answer["expires_in"].as_u64().map(|s| now() + s));
        Ok(SignIn {
            issuer: self.as_str().to_string(),
            account_id: account(&identity)
                .or_else(|| account(&access))
                .or_else(|| before.and_then(|b| b.account_id.clone())),
            email: identity["email"]
                .as_str()
                .map(str::to_string)
                .or_else(|| before.and_then(|b| b.email.clone())),
            id_token,
            access_token,
            refresh_token,
            expires_at,
        })
    }
}

impl SignIn {
    /// Whether the access token lapses within the refresh margin (five minutes) of `at`.
    pub fn needs_refresh(&self, at: u64) -> bool {
        self.expires_at
            .is_some_and(|e| e <= at.saturating_add(REFRESH_MARGIN))
    }

    /// [`SignIn::needs_refresh`] now.
    pub fn needs_refresh_now(&self) -> bool {
        self.needs_refresh(now())
    }
}

/// The credential name a provider's sign-in is kept under: `signin-` and the provider's name, so
/// it is never found as that provider's API key.
pub fn entry_name(provider: &str) -> String {
    format!("signin-{provider}")
}

fn encode(signed: &SignIn) -> Result<ApiKey, OAuthError> {
    let text = serde_json::to_string(signed).unwrap_or_default();
    ApiKey::new(&text).ok_or(OAuthError::Store(credentials::CredentialError::Empty))
}

fn decode(name: &str, key: &ApiKey) -> Result<SignIn, OAuthError> {
    serde_json::from_str(key.expose()).map_err(|e| {
        OAuthError::bad(
            name,
            "(stored sign-in)",
            format!("unreadable ({e}); run `chock login` again"),
        )
    })
}

/// Keeps `signed` for `provider` (the OS keyring, else a 0600 file); says where.
pub fn save(provider: &str, signed: &SignIn) -> Result<KeySource, OAuthError> {
    Ok(credentials::store(&entry_name(provider), &encode(signed)?)?)
}

/// The sign-in kept for `provider`, if any.
pub fn load(provider: &str) -> Result<Option<SignIn>, OAuthError> {
    let name = entry_name(provider);
    match credentials::find_key(&name, None)? {
        Some((key, _)) => decode(&name, &key).map(Some),
        None => Ok(None),
    }
}

/// Forgets the sign-in kept for `provider` (keyring and file); whether a file was removed.
pub fn forget(provider: &str) -> Result<bool, OAuthError> {
    let name = entry_name(provider);
    chock_config::keyring::forget(&name);
    let path = credentials::credentials_dir()?.join(&name);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(OAuthError::Io {
            what: format!("removing {}", path.display()),
            source,
        }),
    }
}

/// The claims of a JWT, read without checking its signature: the tokens come straight from the
/// issuer's token endpoint over TLS, and only the account they name is read from them.
fn claims(jwt: &str) -> Option<Value> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A JSON POST.
fn post_json(url: &Url, body: &Value) -> HttpRequest {
    HttpRequest {
        method: http::Method::POST,
        url: url.clone(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), "application/json".into()),
        ],
        body: body.to_string().into_bytes(),
    }
}

/// A token endpoint's `200` answer as JSON, or its OAuth error.
async fn answered<T: Transport>(transport: &T, request: HttpRequest) -> Result<Value, OAuthError> {
    let url = request.url.clone();
    let response = send(transport, request).await?;
    if response.status != 200 {
        return Err(crate::client::oauth_error(
            &url,
            response.status,
            &response.body,
        ));
    }
    serde_json::from_slice(&response.body)
        .map_err(|_| OAuthError::bad(url.as_str(), "(document)", "not JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &Value) -> String {
        format!(
            "e30.{}.c2ln",
            URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes())
        )
    }

    #[test]
    fn an_issuer_in_the_clear_off_the_machine_is_refused() {
        assert!(Issuer::new("http://auth.example.com").is_err());
        assert!(Issuer::new("http://127.0.0.1:9/").is_ok());
        assert!(Issuer::new("https://auth.openai.com").is_ok());
        assert!(Issuer::new("https://user:pw@auth.openai.com").is_err());
    }

    #[test]
    fn the_authorize_url_carries_pkce_state_and_the_registered_client() {
        let issuer = Issuer::new("https://auth.openai.com").unwrap();
        let pkce = Pkce::from_verifier("v".repeat(43));
        let url = issuer.authorize_url("http://localhost:1455/auth/callback", &pkce, "st");
        assert_eq!(url.path(), "/oauth/authorize");
        let q: std::collections::BTreeMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(q["client_id"], CLIENT_ID);
        assert_eq!(q["code_challenge"], pkce.challenge());
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["state"], "st");
        assert!(q["scope"].contains("offline_access"));
    }

    #[test]
    fn the_account_and_expiry_come_from_the_tokens() {
        let issuer = Issuer::new("https://auth.openai.com").unwrap();
        let id = jwt(&json!({"email": "a@b.c", AUTH_CLAIM: {"chatgpt_account_id": "acct-1"}}));
        let access = jwt(&json!({"exp": 2_000_000_000u64}));
        let endpoint = issuer.endpoint("/oauth/token");
        let answer = json!({"id_token": id, "access_token": access, "refresh_token": "r1"});
        let signed = issuer.sign_in(&endpoint, &answer, None).unwrap();
        assert_eq!(signed.account_id.as_deref(), Some("acct-1"));
        assert_eq!(signed.email.as_deref(), Some("a@b.c"));
        assert_eq!(signed.expires_at, Some(2_000_000_000));
        assert!(!signed.needs_refresh(1_999_999_000));
        assert!(signed.needs_refresh(1_999_999_800));
        // A refresh that returns only an access token keeps the rest.
        let again = issuer
            .sign_in(
                &endpoint,
                &json!({"access_token": "opaque", "expires_in": 60}),
                Some(&signed),
            )
            .unwrap();
        assert_eq!(again.refresh_token, signed.refresh_token);
        assert_eq!(again.account_id.as_deref(), Some("acct-1"));
        assert!(again.needs_refresh_now());
        // A missing refresh token in a first answer is refused by name.
        let err = issuer
            .sign_in(
                &endpoint,
                &json!({"id_token": "x", "access_token": "y"}),
                None,
            )
            .unwrap_err();
        assert!(err.to_string().contains("refresh_token"), "{err}");
    }
}
