//! `private_key_jwt` client authentication (RFC 7523 §2.2, OpenID Connect Core §9): instead of a
//! secret, the client sends a short-lived JWT naming itself (`iss` and `sub`), the authorization
//! server (`aud`), signed with a key whose public half the server holds. The key is the person's
//! (a PKCS#8 PEM file named in the configuration); it never leaves the host, and neither does the
//! assertion except to the token endpoint.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};

use crate::OAuthError;
use crate::pkce::random_token;
use crate::token::{Secret, now};

/// `client_assertion_type` of a JWT assertion (RFC 7523 §2.2).
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is good for: the token request that carries it is made at once.
const LIFETIME_SECS: u64 = 300;

/// The algorithms a key may sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl Algorithm {
    /// The JWS name (`ES256`, `RS256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Es256 => "ES256",
            Algorithm::Rs256 => "RS256",
        }
    }

    /// The algorithm named `name`, if Chock signs with it.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "ES256" => Some(Algorithm::Es256),
            "RS256" => Some(Algorithm::Rs256),
            _ => None,
        }
    }
}

/// A client's signing key: a PKCS#8 private key and the algorithm it signs with. Its `Debug`
/// never prints the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionKey {
    pkcs8_pem: Secret,
    alg: Algorithm,
}

impl AssertionKey {
    /// The key in `pem` (`-----BEGIN PRIVATE KEY-----`, PKCS#8) for `alg`, checked by signing
    /// nothing yet: a key that does not parse for `alg` is refused here, naming `what` (the
    /// file or field it came from).
    pub fn from_pem(pem: &str, alg: Algorithm, what: &str) -> Result<AssertionKey, OAuthError> {
        let key = AssertionKey {
            pkcs8_pem: Secret::new(pem),
            alg,
        };
        key.sign(b"probe").map_err(|problem| OAuthError::BadKey {
            what: what.to_string(),
            problem,
        })?;
        Ok(key)
    }

    /// The algorithm.
    pub fn alg(&self) -> Algorithm {
        self.alg
    }

    fn der(&self) -> Result<Vec<u8>, String> {
        let text = self.pkcs8_pem.expose();
        let body = text
            .split("-----BEGIN PRIVATE KEY-----")
            .nth(1)
            .and_then(|rest| rest.split("-----END PRIVATE KEY-----").next())
            .ok_or("not a PKCS#8 PEM key (`-----BEGIN PRIVATE KEY-----`)")?;
        let joined: String = body.split_whitespace().collect();
        STANDARD
            .decode(joined)
            .map_err(|e| format!("its base64 does not decode: {e}"))
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let der = self.der()?;
        let rng = SystemRandom::new();
        match self.alg {
            Algorithm::Es256 => {
                let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                    .map_err(|e| format!("not a P-256 key for ES256: {e}"))?;
                pair.sign(&rng, message)
                    .map(|s| s.as_ref().to_vec())
                    .map_err(|e| format!("signing failed: {e}"))
            }
            Algorithm::Rs256 => {
                let pair = RsaKeyPair::from_pkcs8(&der)
                    .map_err(|e| format!("not an RSA key for RS256: {e}"))?;
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .map_err(|e| format!("signing failed: {e}"))?;
                Ok(signature)
            }
        }
    }

    /// A fresh assertion for `client_id` at the authorization server `audience` (its issuer):
    /// `iss` and `sub` the client, `aud` the server, a random `jti`, valid for five minutes.
    pub fn assertion(&self, client_id: &str, audience: &str) -> Result<Secret, OAuthError> {
        let header = serde_json::json!({"alg": self.alg.name(), "typ": "JWT"});
        let issued = now();
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + LIFETIME_SECS,
            "jti": random_token(),
        });
        let part = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let input = format!("{}.{}", part(&header), part(&claims));
        let signature = self
            .sign(input.as_bytes())
            .map_err(|problem| OAuthError::BadKey {
                what: format!("the signing key of client `{client_id}`"),
                problem,
            })?;
        Ok(Secret::new(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};

    fn pem(der: &[u8]) -> String {
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der)
        )
    }

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_names_client_and_server() {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
        let key = AssertionKey::from_pem(&pem(der.as_ref()), Algorithm::Es256, "test").unwrap();
        let jwt = key.assertion("client-1", "https://auth.example").unwrap();
        let parts: Vec<&str> = jwt.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let signed = format!("{}.{}", parts[0], parts[1]);
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref())
            .verify(signed.as_bytes(), &signature)
            .expect("the signature verifies");
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["sub"], "client-1");
        assert_eq!(claims["aud"], "https://auth.example");
        assert!(claims["exp"].as_u64() > claims["iat"].as_u64());
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
    }

    #[test]
    fn a_key_that_is_not_one_is_refused_naming_where_it_came_from() {
        let err = AssertionKey::from_pem("hello", Algorithm::Es256, "key.pem").unwrap_err();
        assert!(err.to_string().starts_with("key.pem:"), "{err}");
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let err = AssertionKey::from_pem(&pem(der.as_ref()), Algorithm::Rs256, "key.pem");
        assert!(err.is_err(), "a P-256 key does not sign RS256");
    }
}
