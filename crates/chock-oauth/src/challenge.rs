//! The `WWW-Authenticate: Bearer …` challenge of a protected resource (RFC 6750 §3, RFC 9728 §5.1):
//! where its protected-resource metadata is, which scope it wants, and whether the token lacked
//! scope (`insufficient_scope`, the cue for step-up authorization).

use std::collections::BTreeMap;

/// A Bearer challenge's parameters that the client acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: the URL of the protected-resource metadata document.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among `values` (each a `WWW-Authenticate` header's value), if any.
    pub fn from_headers<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
        values.into_iter().find_map(Challenge::parse)
    }

    /// The Bearer challenge in one header value, if it has one. Other schemes are skipped.
    pub fn parse(value: &str) -> Option<Challenge> {
        let mut params: Option<BTreeMap<String, String>> = None;
        let mut rest = value.trim();
        while !rest.is_empty() {
            let (token, after) = split_token(rest);
            let after = after.trim_start();
            if token.is_empty() {
                // A stray separator.
                rest = after.get(1..).unwrap_or_default().trim_start();
                continue;
            }
            if let Some(value_part) = after.strip_prefix('=') {
                let (value, after) = read_value(value_part.trim_start());
                if let Some(map) = params.as_mut() {
                    map.entry(token.to_ascii_lowercase()).or_insert(value);
                }
                rest = after.trim_start().trim_start_matches(',').trim_start();
            } else {
                // A new scheme: stop when the Bearer one is done.
                if params.is_some() {
                    break;
                }
                if token.eq_ignore_ascii_case("bearer") {
                    params = Some(BTreeMap::new());
                }
                rest = after.trim_start_matches(',').trim_start();
            }
        }
        let mut map = params?;
        Some(Challenge {
            resource_metadata: map.remove("resource_metadata"),
            scope: map.remove("scope"),
            error: map.remove("error"),
            error_description: map.remove("error_description"),
        })
    }

    /// Whether the token lacked scope (a 403 with `error="insufficient_scope"`).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

fn split_token(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| c.is_whitespace() || c == '=' || c == ',')
        .unwrap_or(text.len());
    text.split_at(end)
}

/// A quoted string (with `\` escapes) or a token; and what follows it.
fn read_value(text: &str) -> (String, &str) {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, next)) = chars.next() {
                        out.push(next);
                    }
                }
                '"' => return (out, &quoted[i + 1..]),
                c => out.push(c),
            }
        }
        (out, "")
    } else {
        let end = text
            .find(|c: char| c == ',' || c.is_whitespace())
            .unwrap_or(text.len());
        (text[..end].to_string(), &text[end..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bearer_parameters() {
        let c = Challenge::parse(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert!(!c.insufficient_scope());
    }

    #[test]
    fn reads_insufficient_scope_after_another_scheme() {
        let c = Challenge::parse(
            r#"Basic realm="x", Bearer error="insufficient_scope", scope=admin, error_description="needs \"admin\"""#,
        )
        .unwrap();
        assert!(c.insufficient_scope());
        assert_eq!(c.scope.as_deref(), Some("admin"));
        assert_eq!(c.error_description.as_deref(), Some(r#"needs "admin""#));
    }

    #[test]
    fn no_bearer_no_challenge() {
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse("Bearer").unwrap(), Challenge::default());
    }
}
