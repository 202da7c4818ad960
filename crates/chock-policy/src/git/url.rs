//! A remote's URL read the way git reads it (`git help fetch`, "GIT URLS"), for the one question a push
//! needs answered before any credential leaves the host: which scheme, which host, which port. A URL
//! whose scheme this cannot read with certainty is refused, never guessed.

use std::fmt;

use crate::action::{Action, ActionError, reverse_host};

/// How git reaches the remote, and so which credential it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `https://`: a password through `GIT_ASKPASS`.
    Https,
    /// `http://`: the same, unencrypted (the question says so).
    Http,
    /// `ssh://`, `git+ssh://`, `ssh+git://` or scp-like `[user@]host:path`: a signature from an agent.
    Ssh,
}

impl Scheme {
    /// The port git uses when the URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Https => 443,
            Scheme::Http => 80,
            Scheme::Ssh => 22,
        }
    }

    /// The scheme's name as written in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
            Scheme::Ssh => "ssh",
        }
    }
}

/// Why a URL is not one a push may use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// `file://`, `git://`, `ftp://`, … : no scheme a push carries a credential over.
    #[error(
        "the remote URL `{url}` uses the scheme `{scheme}`; a push goes over https, http or ssh only"
    )]
    Scheme {
        /// The URL as written.
        url: String,
        /// Its scheme, lower-cased.
        scheme: String,
    },
    /// `<transport>::<address>`: a remote helper, a program git would run.
    #[error(
        "the remote URL `{0}` names a remote helper (`<transport>::`), which a push may not use"
    )]
    Helper(String),
    /// A path on this machine.
    #[error("the remote `{0}` is a local path, not a remote host")]
    Local(String),
    /// A password written into the URL would travel into the sandbox in git's argv.
    #[error("the remote URL `{0}` carries a password; remove it (the person is asked for it)")]
    Password(String),
    /// No host, or one with characters no host has.
    #[error("the remote URL `{0}` has no host that can be read")]
    Host(String),
    /// A port that is not a number from 1 to 65535.
    #[error("the remote URL `{0}` has a port that can be read")]
    Port(String),
}

/// A remote URL a push may use: its scheme, user, host, port and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    /// How git reaches it.
    pub scheme: Scheme,
    /// The user written in the URL (`alice@`), if any.
    pub user: Option<String>,
    /// The host, lower-cased; an IPv6 address without its brackets.
    pub host: String,
    /// The port, the scheme's default when none is written.
    pub port: u16,
    /// The URL as written (what git is given and the person is shown).
    pub text: String,
}

impl RemoteUrl {
    /// Reads `url`; anything this cannot read with certainty is an error naming why.
    pub fn parse(url: &str) -> Result<RemoteUrl, UrlError> {
        let text = url.to_owned();
        if let Some((scheme, rest)) = url.split_once("://")
            && !scheme.contains([':', '/', '@'])
        {
            if names_helper(url) {
                return Err(UrlError::Helper(text));
            }
            let scheme = match scheme.to_ascii_lowercase().as_str() {
                "https" => Scheme::Https,
                "http" => Scheme::Http,
                "ssh" | "git+ssh" | "ssh+git" => Scheme::Ssh,
                other => {
                    return Err(UrlError::Scheme {
                        url: text,
                        scheme: other.to_owned(),
                    });
                }
            };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            return RemoteUrl::from_authority(scheme, authority, true, text);
        }
        if names_helper(url) {
            return Err(UrlError::Helper(text));
        }
        // scp-like: a colon before any slash (`[user@]host:path`); git reads `./a:b` and `/a:b` as paths.
        let colon = url.find(':');
        let slash = url.find('/');
        match colon {
            Some(c) if slash.is_none_or(|s| c < s) && c > 0 => {
                let before = &url[..c];
                // `[user@][::1]:path`: the colon that ends the host is the one after the bracket.
                let authority = if before.contains('[') && !before.contains(']') {
                    let close = url.find(']').ok_or_else(|| UrlError::Host(text.clone()))?;
                    if !url[close + 1..].starts_with(':') {
                        return Err(UrlError::Host(text));
                    }
                    &url[..=close]
                } else {
                    before
                };
                RemoteUrl::from_authority(Scheme::Ssh, authority, false, text)
            }
            _ => Err(UrlError::Local(text)),
        }
    }

    /// `[user@]host[:port]`; `with_port` says whether a colon may give a port.
    fn from_authority(
        scheme: Scheme,
        authority: &str,
        with_port: bool,
        text: String,
    ) -> Result<RemoteUrl, UrlError> {
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, authority),
        };
        if user.is_some_and(|u| u.contains(':')) {
            return Err(UrlError::Password(text));
        }
        let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| UrlError::Host(text.clone()))?;
            (host, after.strip_prefix(':'))
        } else {
            match hostport.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (hostport, None),
            }
        };
        let port = match port {
            Some(p) if with_port => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| UrlError::Port(text.clone()))?,
            Some(_) => return Err(UrlError::Host(text)),
            None => scheme.default_port(),
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let readable = !host.is_empty()
            && (host.parse::<std::net::Ipv6Addr>().is_ok()
                || host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'));
        if !readable || host.starts_with('-') {
            return Err(UrlError::Host(text));
        }
        Ok(RemoteUrl {
            scheme,
            user: user.map(str::to_owned),
            host,
            port,
            text,
        })
    }

    /// `net.connect.<reversed host>.<port>`: the one connection an approved push is given.
    pub fn connect_action(&self) -> Result<Action, ActionError> {
        Action::net_connect(&self.host, self.port)
    }

    /// `git.push.<reversed host>`: the name a rule uses to let a push reach a host that is not a remote
    /// of the host's own repository configuration.
    pub fn push_action(&self) -> Result<Action, ActionError> {
        Action::parse(&format!("git.push.{}", reverse_host(&self.host)?))
    }

    /// `git.fetch.<reversed host>`: the name a rule uses to let a fetch or pull that gets a credential
    /// reach a host that is not a remote of the host's own repository configuration.
    pub fn fetch_action(&self) -> Result<Action, ActionError> {
        Action::parse(&format!("git.fetch.{}", reverse_host(&self.host)?))
    }

    /// The host as git writes it in a prompt (`[::1]` bracketed), with the port when it is not the
    /// scheme's default.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// git's test for `<transport>::<address>`: the URL begins with a scheme's characters (a letter, then
/// letters, digits, `+`, `-`, `.`) followed by `::`.
fn names_helper(url: &str) -> bool {
    let end = url
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_alphabetic() || (i > 0 && (c.is_ascii_digit() || "+-.".contains(c))))
        })
        .map_or(url.len(), |(i, _)| i);
    end > 0 && url[end..].starts_with("::")
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(url: &str) -> (Scheme, Option<String>, String, u16) {
        let u = RemoteUrl::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (u.scheme, u.user, u.host, u.port)
    }

    #[test]
    fn the_schemes_a_push_uses_are_read_with_host_and_port() {
        use Scheme::*;
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            ok("https://github.com/a/b.git"),
            (Https, None, "github.com".into(), 443)
        );
        assert_eq!(
            ok("HTTPS://GitHub.com./a"),
            (Https, None, "github.com".into(), 443)
        );
        assert_eq!(
            ok("http://alice@127.0.0.1:8080/r.git"),
            (Http, some("alice"), "127.0.0.1".into(), 8080)
        );
        assert_eq!(
            ok("ssh://git@example.org:2222/r.git"),
            (Ssh, some("git"), "example.org".into(), 2222)
        );
        assert_eq!(
            ok("git+ssh://example.org/r"),
            (Ssh, None, "example.org".into(), 22)
        );
        assert_eq!(
            ok("git@github.com:me/r.git"),
            (Ssh, some("git"), "github.com".into(), 22)
        );
        assert_eq!(ok("host:r.git"), (Ssh, None, "host".into(), 22));
        assert_eq!(ok("ssh://[::1]:22/r"), (Ssh, None, "::1".into(), 22));
        assert_eq!(ok("git@[::1]:r"), (Ssh, some("git"), "::1".into(), 22));
    }

    #[test]
    fn anything_else_is_refused_naming_why() {
        let err = |u: &str| RemoteUrl::parse(u).unwrap_err();
        assert!(
            matches!(err("file:///srv/r.git"), UrlError::Scheme { scheme, .. } if scheme == "file")
        );
        assert!(matches!(
            err("git://example.org/r"),
            UrlError::Scheme { .. }
        ));
        assert!(matches!(err("ext::sh -c evil"), UrlError::Helper(_)));
        assert!(matches!(err("fd::3"), UrlError::Helper(_)));
        assert!(matches!(err("/srv/r.git"), UrlError::Local(_)));
        assert!(matches!(err("./a:b"), UrlError::Local(_)));
        assert!(matches!(err("../r"), UrlError::Local(_)));
        assert!(matches!(
            err("https://u:pw@example.org/r"),
            UrlError::Password(_)
        ));
        assert!(matches!(err("https:///r"), UrlError::Host(_)));
        assert!(matches!(err("https://ex ample/r"), UrlError::Host(_)));
        assert!(matches!(err("ssh://-oProxyCommand=x/r"), UrlError::Host(_)));
        assert!(matches!(err("https://example.org:0/r"), UrlError::Port(_)));
        assert!(matches!(
            err("https://example.org:99999/r"),
            UrlError::Port(_)
        ));
    }

    #[test]
    fn the_acts_name_the_host_and_port() {
        let u = RemoteUrl::parse("http://alice@127.0.0.1:8080/r.git").unwrap();
        assert_eq!(
            u.connect_action().unwrap().as_str(),
            "net.connect.1.0.0.127.8080"
        );
        assert_eq!(u.push_action().unwrap().as_str(), "git.push.1.0.0.127");
        assert_eq!(u.fetch_action().unwrap().as_str(), "git.fetch.1.0.0.127");
        assert_eq!(u.authority(), "127.0.0.1:8080");
        let u = RemoteUrl::parse("https://github.com/a").unwrap();
        assert_eq!(u.authority(), "github.com");
    }
}
