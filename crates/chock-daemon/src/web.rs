//! The loopback HTTP transport's checks: a request must name this daemon's own address in `Host`
//! (a DNS-rebinding page names its own host), carry no foreign `Origin`, and bear the token — as
//! `Authorization: Bearer`, or on the WebSocket as the subprotocol `bearer.<token>` beside
//! [`WS_PROTOCOL`] (a browser cannot set headers on a WebSocket). The token is never taken from a
//! query string and never put in a cookie: browsers send a host's cookies to every port of it, so
//! any other server on 127.0.0.1 the browser visited would receive one. The page gets the token by
//! trading a one-time login code (`POST /login`) and keeps it in its origin's storage, which is
//! scoped to this port. No CORS header is ever sent, so no other origin can read a response.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Mutex;

use http::{HeaderMap, header};
use rand::RngCore;

/// The WebSocket subprotocol the daemon speaks; a browser offers it with `bearer.<token>`.
pub const WS_PROTOCOL: &str = "chock.v1";

/// The prefix of the subprotocol that carries the token on a WebSocket.
const WS_BEARER: &str = "bearer.";

/// What the loopback transport checks against.
#[derive(Debug)]
pub(crate) struct Web {
    /// `127.0.0.1:PORT` or `[::1]:PORT`: the only `Host` accepted.
    pub(crate) host: String,
    /// `http://` + host: the only `Origin` accepted.
    pub(crate) origin: String,
    token: String,
    /// One-time login codes not used yet.
    codes: Mutex<HashSet<String>>,
}

/// 32 random bytes, as hex.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Web {
    pub(crate) fn new(addr: SocketAddr) -> Web {
        let host = addr.to_string();
        Web {
            origin: format!("http://{host}"),
            host,
            token: random_hex(),
            codes: Mutex::default(),
        }
    }

    /// The token (for the 0600 token file clients read).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// A new one-time login link. The code is in the fragment, which the browser never sends:
    /// the page trades it for the token with `POST /login`.
    pub(crate) fn login_link(&self) -> String {
        let code = random_hex();
        self.codes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(code.clone());
        format!("{}/#login={code}", self.origin)
    }

    /// Uses up `code`; `true` when it was a valid unused one.
    pub(crate) fn redeem(&self, code: &str) -> bool {
        self.codes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(code)
    }

    /// `Host` is this daemon's address, and `Origin`, when sent, its own.
    pub(crate) fn check_place(&self, headers: &HeaderMap) -> Result<(), String> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if host != self.host {
            return Err(format!(
                "Host `{host}` is not this daemon's address {} (a DNS-rebinding page?)",
                self.host
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if origin != self.origin {
                return Err(format!(
                    "Origin `{origin}` is not the daemon's own UI ({})",
                    self.origin
                ));
            }
        }
        Ok(())
    }

    /// The request bears the token (`Authorization: Bearer`, or the WebSocket subprotocol).
    pub(crate) fn check_token(&self, headers: &HeaderMap) -> Result<(), String> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .is_some_and(|t| same(t.trim(), &self.token));
        let subprotocol = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(','))
            .filter_map(|p| p.trim().strip_prefix(WS_BEARER))
            .any(|t| same(t, &self.token));
        if bearer || subprotocol {
            Ok(())
        } else {
            Err(
                "no valid token: open the login link `chock serve` printed, or send \
                 `Authorization: Bearer` with the token from the daemon's token file"
                    .into(),
            )
        }
    }
}

/// A state-changing request (`POST /rpc`) carries a JSON body and the custom header `X-Chock: 1`,
/// which no form and no simple cross-site request can send.
pub(crate) fn check_json_post(headers: &HeaderMap) -> Result<(), String> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return Err("the body must be JSON (Content-Type: application/json)".into());
    }
    if headers.get("x-chock").and_then(|h| h.to_str().ok()) != Some("1") {
        return Err("a state-changing request needs the header `X-Chock: 1`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn host_origin_and_token_are_checked() {
        let web = Web::new("127.0.0.1:4000".parse().unwrap());
        web.check_place(&headers(&[("host", "127.0.0.1:4000")]))
            .unwrap();
        assert!(
            web.check_place(&headers(&[("host", "evil.example:4000")]))
                .is_err()
        );
        assert!(
            web.check_place(&headers(&[
                ("host", "127.0.0.1:4000"),
                ("origin", "http://evil.example")
            ]))
            .is_err()
        );
        let token = web.token().to_string();
        web.check_token(&headers(&[("authorization", &format!("Bearer {token}"))]))
            .unwrap();
        web.check_token(&headers(&[(
            "sec-websocket-protocol",
            &format!("{WS_PROTOCOL}, bearer.{token}"),
        )]))
        .unwrap();
        assert!(
            web.check_token(&headers(&[("cookie", &format!("chock_token={token}"))]))
                .is_err(),
            "a cookie is never a credential"
        );
        assert!(
            web.check_token(&headers(&[("authorization", "Bearer nope")]))
                .is_err()
        );
        let link = web.login_link();
        let code = link.rsplit_once("#login=").unwrap().1;
        assert!(web.redeem(code));
        assert!(!web.redeem(code), "a code works once");
    }
}
