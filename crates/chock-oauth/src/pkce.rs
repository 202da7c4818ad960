//! PKCE with S256 (RFC 7636), and the `state` that ties a redirect to its request. Both from the
//! OS's random source.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// 32 random bytes, base64url without padding (43 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is unavailable");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE pair: the verifier stays with the client until the token request; the challenge goes
/// in the authorization URL.
#[derive(Clone)]
pub struct Pkce {
    verifier: String,
    challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

impl Pkce {
    /// A fresh pair.
    pub fn new() -> Pkce {
        Pkce::from_verifier(random_token())
    }

    /// The pair of a given verifier (a test's fixed value).
    pub fn from_verifier(verifier: String) -> Pkce {
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Pkce {
            verifier,
            challenge,
        }
    }

    /// `code_verifier`, for the token request.
    pub fn verifier(&self) -> &str {
        &self.verifier
    }

    /// `code_challenge` (method S256), for the authorization URL.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }
}

impl Default for Pkce {
    fn default() -> Self {
        Pkce::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_is_base64url_of_sha256_without_padding() {
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWhOEjXk".into());
        assert_eq!(p.challenge(), "deKhybfvslxcnHi17AxXdben4LygaRzoZ6zBhBQa3iE");
        assert_eq!(Pkce::new().verifier().len(), 43);
        assert_ne!(random_token(), random_token());
    }
}
