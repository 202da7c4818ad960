//! `chock login --provider NAME` for a provider of kind `chatgpt`: signs a ChatGPT account in as
//! Codex does, in the person's browser (authorization code with PKCE; the redirect comes back to
//! a one-shot listener on 127.0.0.1 at the port the client is registered with) or, with
//! `--device-code`, by a code typed at the issuer's device page. The tokens are kept in the OS
//! keyring, else a 0600 file, and never printed; the provider refreshes them as they lapse.

use std::process::ExitCode;
use std::time::Duration;

use chock_config::config::ProviderConfig;
use chock_oauth::OAuthError;
use chock_oauth::chatgpt::{self, Issuer, SignIn};
use chock_oauth::loopback::{LoopbackReceiver, open_browser};
use chock_oauth::pkce::{Pkce, random_token};
use chock_provider::signin::DirectTransport;

use crate::exit::{BAD_INPUT, Exit, FAILURE};
use crate::say::{say, say_err};

/// How long the person has to finish in the browser.
const BROWSER_WAIT: Duration = Duration::from_secs(600);
/// How long a device code stays good.
const DEVICE_WAIT: Duration = Duration::from_secs(15 * 60);

/// Signs `name` in at its table's issuer and keeps the tokens.
pub fn run(
    name: &str,
    table: &ProviderConfig,
    device_code: bool,
    callback_port: u16,
) -> anyhow::Result<ExitCode> {
    let issuer = Issuer::new(table.issuer.as_deref().unwrap_or(chatgpt::ISSUER))
        .map_err(|e| Exit::new(BAD_INPUT, format!("providers.{name}.issuer: {e}")))?;
    let transport = DirectTransport::new().map_err(|e| Exit::new(FAILURE, e))?;
    let signed = super::block_on(async {
        if device_code {
            by_device_code(&issuer, &transport).await
        } else {
            in_browser(&issuer, &transport, callback_port).await
        }
    })?
    .map_err(|e| Exit::new(FAILURE, format!("signing in to {}: {e}", issuer.as_str())))?;
    let kept = chatgpt::save(name, &signed).map_err(|e| Exit::new(FAILURE, e.to_string()))?;
    let who = signed.email.as_deref().unwrap_or("a ChatGPT account");
    match signed.account_id.as_deref() {
        Some(account) => {
            say!("signed in as {who} (account {account}); the tokens are kept in {kept}")
        }
        None => say!("signed in as {who}; the tokens are kept in {kept}"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn in_browser(
    issuer: &Issuer,
    transport: &DirectTransport,
    port: u16,
) -> Result<SignIn, OAuthError> {
    let receiver = LoopbackReceiver::bind_registered(port, chatgpt::CALLBACK_PATH).await?;
    let redirect = receiver.redirect_uri().to_string();
    let pkce = Pkce::new();
    let state = random_token();
    let url = issuer.authorize_url(&redirect, &pkce, &state);
    say_err!(
        "open this address to sign in (waiting up to {} minutes):",
        BROWSER_WAIT.as_secs() / 60
    );
    say_err!("  {url}");
    if !open_browser(url.as_str()) {
        say_err!(
            "(no browser could be started here; open it on this machine, or use --device-code)"
        );
    }
    let answer = receiver.wait(&state, BROWSER_WAIT).await?;
    // RFC 9207: an answer that names its issuer must name this one.
    if let Some(iss) = &answer.iss
        && iss.trim_end_matches('/') != issuer.as_str()
    {
        return Err(OAuthError::BadDocument {
            document: "the authorization response".into(),
            field: "iss".into(),
            problem: format!("names `{iss}`, not the issuer asked ({})", issuer.as_str()),
        });
    }
    issuer
        .exchange(transport, &answer.code, &redirect, pkce.verifier())
        .await
}

async fn by_device_code(
    issuer: &Issuer,
    transport: &DirectTransport,
) -> Result<SignIn, OAuthError> {
    let code = issuer.device_code(transport).await?;
    say_err!(
        "open {} and enter the code {}",
        code.verification_url,
        code.user_code
    );
    say_err!("(it expires in 15 minutes; a device code is a phishing target: never share it)");
    issuer
        .finish_device_code(transport, &code, DEVICE_WAIT)
        .await
}
