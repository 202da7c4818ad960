//! The caller's HTTP: the host implements [`Transport`] over its broker door (in chock-mcp, hyper
//! whose every connection `Broker::open_stream` opens), so every request this crate makes is an
//! act the table decides and the log records.

use std::future::Future;

use url::Url;

use crate::OAuthError;

/// One request. The body is already encoded (a form or JSON), its type in `headers`.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `GET` or `POST`.
    pub method: http::Method,
    /// Where it goes. The transport connects to this URL's host and port and nowhere else.
    pub url: Url,
    /// Header names and values. May carry a client secret (`Authorization: Basic`): a transport
    /// must not log header values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// One response, read whole (a transport bounds its size).
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Header names (any case) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (a server may send several `WWW-Authenticate`).
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the client reaches the network. The contract:
/// - connect to the request URL's host and port only (the host decides `net.connect` there);
/// - follow **no** redirect: a `3xx` comes back as it is, and the client refuses it, so neither
///   a token nor a client secret is ever sent to where a redirect points;
/// - bound the body's size and the time taken.
pub trait Transport: Send + Sync {
    /// Sends `request`; an error is the transport's words (a refusal names the act and rule).
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, String>> + Send;
}

/// A [`Transport`] behind a pointer (`Arc<dyn DynTransport>`), for a caller that picks one at
/// run time; every `Transport` is one, and the pointer is a `Transport` again.
pub trait DynTransport: Send + Sync {
    /// [`Transport::send`], boxed.
    fn send_dyn(
        &self,
        request: HttpRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<HttpResponse, String>> + Send + '_>>;
}

impl<T: Transport> DynTransport for T {
    fn send_dyn(
        &self,
        request: HttpRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<HttpResponse, String>> + Send + '_>> {
        Box::pin(self.send(request))
    }
}

impl<'t> Transport for std::sync::Arc<dyn DynTransport + 't> {
    fn send(
        &self,
        request: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, String>> + Send {
        self.as_ref().send_dyn(request)
    }
}

/// Sends `request` and refuses a redirect, naming where it pointed.
pub(crate) async fn send<T: Transport>(
    transport: &T,
    request: HttpRequest,
) -> Result<HttpResponse, OAuthError> {
    let url = request.url.to_string();
    let response = transport
        .send(request)
        .await
        .map_err(|message| OAuthError::Transport {
            url: url.clone(),
            message,
        })?;
    if (300..400).contains(&response.status) {
        return Err(OAuthError::Redirected {
            url,
            location: response.header("location").unwrap_or_default().to_string(),
        });
    }
    Ok(response)
}

/// A GET with `Accept: application/json`.
pub(crate) fn get_json(url: &Url) -> HttpRequest {
    HttpRequest {
        method: http::Method::GET,
        url: url.clone(),
        headers: vec![("accept".into(), "application/json".into())],
        body: Vec::new(),
    }
}

/// A form POST (`application/x-www-form-urlencoded`) of `pairs`.
pub(crate) fn post_form(url: &Url, pairs: &[(&str, &str)]) -> HttpRequest {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    HttpRequest {
        method: http::Method::POST,
        url: url.clone(),
        headers: vec![
            (
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
            ("accept".into(), "application/json".into()),
        ],
        body: body.into_bytes(),
    }
}

/// The start of a body, for an error.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    text.trim().to_string()
}
