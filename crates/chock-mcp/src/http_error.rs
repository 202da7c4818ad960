//! The errors of Chock's streamable HTTP client, and the one a `401` or `403` becomes: the
//! server's Bearer challenge (its scope, `insufficient_scope`), whether a token was sent, and the
//! nonce a DPoP server asked for, which decide whether the session signs in again (crate::http).

/// What went wrong between Chock's client and the server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpClientError {
    /// In words: the broker's refusal, a connection that failed, a response Chock does not take.
    #[error("{0}")]
    Other(String),
    /// The server answered `401` or `403`: it wants a token (none is stored, or it was refused),
    /// or more scope (`insufficient_scope`, which `chock mcp login` asks for again).
    #[error("{}", unauthorized_words(*.status, .challenge.as_ref(), *.sent_token))]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The server's Bearer challenge, if it sent one.
        challenge: Option<chock_oauth::Challenge>,
        /// Whether the request carried a stored token.
        sent_token: bool,
        /// The `DPoP-Nonce` the server sent with a `use_dpop_nonce` challenge (RFC 9449 §9).
        dpop_nonce: Option<String>,
    },
}

impl HttpClientError {
    pub(crate) fn new(message: String) -> Self {
        HttpClientError::Other(message)
    }
}

fn unauthorized_words(
    status: u16,
    challenge: Option<&chock_oauth::Challenge>,
    sent_token: bool,
) -> String {
    let scope = challenge
        .and_then(|c| c.scope.as_deref())
        .map(|s| format!(" (scope `{s}`)"))
        .unwrap_or_default();
    if challenge.is_some_and(chock_oauth::Challenge::insufficient_scope) {
        format!(
            "HTTP {status}: the stored token lacks the scope the server wants{scope}; sign in again with `chock mcp login`"
        )
    } else if sent_token {
        format!(
            "HTTP {status}: the server refused the stored token{scope}; sign in again with `chock mcp login`"
        )
    } else {
        format!(
            "HTTP {status}: the server wants authorization{scope}; sign in with `chock mcp login`"
        )
    }
}

/// The error of a `401` or `403` answer with `headers`: its Bearer challenge, and the
/// `DPoP-Nonce` of a `WWW-Authenticate: DPoP error="use_dpop_nonce"` (RFC 9449 §9).
pub(crate) fn unauthorized(
    status: u16,
    headers: &http::HeaderMap,
    sent_token: bool,
) -> HttpClientError {
    let values = || {
        headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
    };
    let challenge = chock_oauth::Challenge::from_headers(values());
    let dpop_nonce = values()
        .any(|v| v.trim_start().starts_with("DPoP") && v.contains("use_dpop_nonce"))
        .then(|| {
            headers
                .get("dpop-nonce")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .flatten();
    HttpClientError::Unauthorized {
        status,
        challenge,
        sent_token,
        dpop_nonce,
    }
}
