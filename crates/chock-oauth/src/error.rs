//! What went wrong, naming the document, field, endpoint or act.

/// Why an OAuth step failed. Each names the URL or document it concerns, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The transport (the host's broker door) could not make the request, or refused it.
    #[error("{url}: {message}")]
    Transport {
        /// Where the request went.
        url: String,
        /// The transport's words (a refusal names the act and the rule).
        message: String,
    },
    /// An endpoint answered with a status the step does not take.
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// Its status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// A document (metadata, registration answer, token answer) is not what the spec says.
    #[error("{document}: field `{field}`: {problem}")]
    BadDocument {
        /// The URL the document came from.
        document: String,
        /// The field at fault (`(document)` for the whole).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A URL that cannot be used (not http/https, no host, credentials in it).
    #[error("`{url}`: {problem}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// An endpoint redirected; the client follows no redirect.
    #[error("{url} redirects to `{location}`, and the OAuth client follows no redirect")]
    Redirected {
        /// Where the request went.
        url: String,
        /// Where it pointed.
        location: String,
    },
    /// No metadata document was found at any of the places the spec names.
    #[error("no {what} found; tried {tried}")]
    NotFound {
        /// Which document.
        what: &'static str,
        /// Every URL asked, in order.
        tried: String,
    },
    /// The authorization server does not support PKCE with S256, which OAuth 2.1 requires.
    #[error(
        "{issuer}: the authorization server does not list S256 in `code_challenge_methods_supported`; Chock refuses to authorize without PKCE"
    )]
    NoPkce {
        /// The authorization server.
        issuer: String,
    },
    /// No way to register: no client ID was configured and the server takes neither a client ID
    /// metadata document nor dynamic registration.
    #[error(
        "{issuer}: no client ID is configured and the authorization server offers neither client ID metadata documents nor dynamic registration"
    )]
    NoRegistration {
        /// The authorization server.
        issuer: String,
    },
    /// The authorization or token endpoint answered with an OAuth error.
    #[error("{endpoint}: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The endpoint, or `authorization` for the redirect's error.
        endpoint: String,
        /// The OAuth error code (`access_denied`, `invalid_grant`, …).
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// The redirect's `state` did not match the one sent: the answer is not to this request.
    #[error("the authorization answer's state does not match the request's; refused")]
    StateMismatch,
    /// The authorization response's `iss` is not the authorization server's issuer, or is
    /// missing where the server promised it (RFC 9207): the code is not exchanged.
    #[error("the authorization response's `iss` is {}, not the authorization server's issuer `{expected}` (RFC 9207); its code is not exchanged", got.as_deref().map(|g| format!("`{g}`")).unwrap_or_else(|| "missing although the server promised it".into()))]
    IssuerMismatch {
        /// The issuer from the metadata, as written.
        expected: String,
        /// The `iss` received, if any.
        got: Option<String>,
    },
    /// A token was about to go somewhere other than the origin of the resource it was issued for.
    #[error(
        "{url}: not the origin of the resource `{resource}` the token was issued for; the token is not sent"
    )]
    NotForThisOrigin {
        /// Where the request would have gone.
        url: String,
        /// The token's resource.
        resource: String,
    },
    /// A client signing key that cannot be used (not PKCS#8 PEM, not of its algorithm).
    #[error("{what}: {problem}")]
    BadKey {
        /// Where the key came from (its file or field).
        what: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The person did not finish in time.
    #[error("no authorization answer within {0}s")]
    Timeout(u64),
    /// Step-up authorization was asked too many times.
    #[error("the server asked for more scope {0} times (`insufficient_scope`); giving up")]
    StepUpLimit(u32),
    /// The loopback receiver or the store failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The credential store refused.
    #[error(transparent)]
    Store(#[from] chock_config::credentials::CredentialError),
}

impl OAuthError {
    pub(crate) fn bad(document: &str, field: &str, problem: impl Into<String>) -> OAuthError {
        OAuthError::BadDocument {
            document: document.to_string(),
            field: field.to_string(),
            problem: problem.into(),
        }
    }
}
