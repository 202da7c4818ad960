//! DPoP (RFC 9449): a token bound to a key the client holds, so a token that leaks is useless
//! without it. The client makes one P-256 key per grant, kept with the grant (the keyring or the
//! 0600 file, like the token), and signs a fresh proof for every request that carries the token
//! and for every token request: the method, the URL without query or fragment, the time, a random
//! `jti`, the token's hash (`ath`) where one is presented, and the server's nonce when it asked
//! for one (`use_dpop_nonce`).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use url::Url;

use crate::OAuthError;
use crate::pkce::random_token;
use crate::token::{Secret, now};

/// The one algorithm Chock signs proofs with.
pub const DPOP_ALG: &str = "ES256";

/// A DPoP key: a P-256 private key (PKCS#8, base64). Its `Debug` never prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DpopKey {
    pkcs8: Secret,
}

fn key_error(problem: impl std::fmt::Display) -> OAuthError {
    OAuthError::BadKey {
        what: "the DPoP key".into(),
        problem: problem.to_string(),
    }
}

impl DpopKey {
    /// A fresh key.
    pub fn generate() -> Result<DpopKey, OAuthError> {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(key_error)?;
        Ok(DpopKey {
            pkcs8: Secret::new(STANDARD.encode(der.as_ref())),
        })
    }

    fn pair(&self) -> Result<EcdsaKeyPair, OAuthError> {
        let der = STANDARD.decode(self.pkcs8.expose()).map_err(key_error)?;
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &SystemRandom::new())
            .map_err(key_error)
    }

    /// A proof for a `method` request to `url` (its query and fragment left out), with `ath`
    /// for `access_token` when one is presented and the server's `nonce` when it gave one.
    pub fn proof(
        &self,
        method: &str,
        url: &Url,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, OAuthError> {
        let pair = self.pair()?;
        // An uncompressed point: 0x04, then x and y of 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        let header = serde_json::json!({
            "typ": "dpop+jwt",
            "alg": DPOP_ALG,
            "jwk": {"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)},
        });
        let mut htu = url.clone();
        htu.set_query(None);
        htu.set_fragment(None);
        let mut claims = serde_json::json!({
            "jti": random_token(),
            "htm": method,
            "htu": htu.as_str(),
            "iat": now(),
        });
        if let Some(token) = access_token {
            claims["ath"] = URL_SAFE_NO_PAD
                .encode(Sha256::digest(token.as_bytes()))
                .into();
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let part = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let input = format!("{}.{}", part(&header), part(&claims));
        let signature = pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .map_err(key_error)?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn a_proof_is_signed_by_the_key_in_its_header_and_names_the_request() {
        let key = DpopKey::generate().unwrap();
        let url = Url::parse("https://mcp.example/mcp?x=1#f").unwrap();
        let proof = key
            .proof("POST", &url, Some("the-token"), Some("n-1"))
            .unwrap();
        let parts: Vec<&str> = proof.split('.').collect();
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(header["typ"], "dpop+jwt");
        let mut point = vec![4u8];
        for c in ["x", "y"] {
            point.extend(
                URL_SAFE_NO_PAD
                    .decode(header["jwk"][c].as_str().unwrap())
                    .unwrap(),
            );
        }
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
            )
            .expect("signed by the key in its header");
        assert_eq!(claims["htu"], "https://mcp.example/mcp");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["nonce"], "n-1");
        assert_eq!(
            claims["ath"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(b"the-token"))
        );
        let again = key.proof("POST", &url, Some("the-token"), None).unwrap();
        let claims2: serde_json::Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(again.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_ne!(claims["jti"], claims2["jti"], "a fresh jti each time");
    }
}
