//! Where a server's grant (its token and the client it was issued to) is kept: chock-config's
//! credential store, so the OS keyring when one takes it, else a 0600 file in the credentials
//! directory, as API keys are. A grant is keyed by the server's URL and resource together, so a
//! token for one server is never found for another. Nothing here prints a token.

use std::path::Path;

use chock_config::credentials::{self, ApiKey, KeySource};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::OAuthError;
use crate::client::{AuthMethod, RegisteredClient};
use crate::token::{Secret, Token};

/// What is kept for one server: the token, and the client that refreshes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The MCP server's URL.
    pub server: String,
    /// The resource the token is for.
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// The client ID.
    pub client_id: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<Secret>,
    /// The token endpoint auth method's RFC 7591 name.
    pub auth_method: String,
    /// The authorization server's revocation endpoint (RFC 7009), where logout revokes the token.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The token.
    pub token: Token,
    /// The key a DPoP-bound token is bound to (RFC 9449), kept with it.
    #[serde(default)]
    pub dpop_key: Option<crate::dpop::DpopKey>,
}

impl Grant {
    /// The client the grant was issued to.
    pub fn client(&self) -> RegisteredClient {
        let auth_method = match self.auth_method.as_str() {
            "client_secret_basic" => AuthMethod::ClientSecretBasic,
            "client_secret_post" => AuthMethod::ClientSecretPost,
            "private_key_jwt" => AuthMethod::PrivateKeyJwt,
            _ => AuthMethod::None,
        };
        // The signing key of a `private_key_jwt` client is the configuration's, never stored.
        RegisteredClient {
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            auth_method,
            private_key: None,
            dpop: self.dpop_key.clone(),
        }
    }
}

/// The credential name of a server's grant: `mcp-oauth-` and a hash of its URL and resource.
pub fn entry_name(server: &str, resource: &str) -> String {
    let digest = Sha256::digest(format!("{server}\n{resource}").as_bytes());
    format!("mcp-oauth-{}", &hex::encode(digest)[..32])
}

fn encode(grant: &Grant) -> Result<ApiKey, OAuthError> {
    let text = serde_json::to_string(grant).unwrap_or_default();
    ApiKey::new(&text).ok_or(OAuthError::Store(credentials::CredentialError::Empty))
}

fn decode(name: &str, key: &ApiKey) -> Result<Grant, OAuthError> {
    serde_json::from_str(key.expose())
        .map_err(|e| OAuthError::bad(name, "(stored grant)", format!("unreadable: {e}")))
}

/// Stores `grant` (keyring, else the 0600 file); says where.
pub fn save(grant: &Grant) -> Result<KeySource, OAuthError> {
    let name = entry_name(&grant.server, &grant.resource);
    Ok(credentials::store(&name, &encode(grant)?)?)
}

/// The grant stored for `server` and `resource`, if any.
pub fn load(server: &str, resource: &str) -> Result<Option<Grant>, OAuthError> {
    let name = entry_name(server, resource);
    match credentials::find_key(&name, None)? {
        Some((key, _)) => decode(&name, &key).map(Some),
        None => Ok(None),
    }
}

/// Removes the grant for `server` and `resource` from the keyring and the file store. Returns
/// whether a file was removed (the keyring does not say).
pub fn forget(server: &str, resource: &str) -> Result<bool, OAuthError> {
    let name = entry_name(server, resource);
    chock_config::keyring::forget(&name);
    forget_in(&credentials::credentials_dir()?, server, resource)
}

/// Stores `grant` in the file store at `dir` (tests; a store without a keyring).
pub fn save_in(dir: &Path, grant: &Grant) -> Result<(), OAuthError> {
    let name = entry_name(&grant.server, &grant.resource);
    credentials::store_in(dir, &name, &encode(grant)?)?;
    Ok(())
}

/// The grant in the file store at `dir`.
pub fn load_from(dir: &Path, server: &str, resource: &str) -> Result<Option<Grant>, OAuthError> {
    let name = entry_name(server, resource);
    match credentials::load_from(dir, &name)? {
        Some((key, _)) => decode(&name, &key).map(Some),
        None => Ok(None),
    }
}

/// Removes the grant's file at `dir`; whether there was one.
pub fn forget_in(dir: &Path, server: &str, resource: &str) -> Result<bool, OAuthError> {
    let path = dir.join(entry_name(server, resource));
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(OAuthError::Io {
            what: format!("removing {}", path.display()),
            source,
        }),
    }
}
