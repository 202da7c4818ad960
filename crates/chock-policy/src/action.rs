//! Action names: validated, dot-separated labels such as `net.fetch.com.github.api`.
//!
//! Every act the harness decides has one name. Names are built by the constructors below (so a host is
//! always reversed and lower-cased the same way) or parsed from text. A label holds only ASCII letters,
//! digits, `_`, `-` and `+`, so a name can never smuggle a `*`, a space or a path separator into a rule.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Why a text is not a well-formed action name or pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// Nothing was given.
    #[error("an action name cannot be empty")]
    Empty,
    /// Two dots in a row, or a dot at either end.
    #[error(
        "an action name cannot hold an empty label (two dots in a row, or a dot at either end)"
    )]
    EmptyLabel,
    /// A label holds a character outside `[A-Za-z0-9_+-]`.
    #[error(
        "label `{label}` holds `{ch}`: a label may hold only ASCII letters, digits, `_`, `-` and `+`"
    )]
    BadCharacter {
        /// The label.
        label: String,
        /// The first character it may not hold.
        ch: char,
    },
    /// A `*` that is not the last label, or a `*` inside a label.
    #[error("a `*` may only stand alone as the last label")]
    MisplacedWildcard,
    /// A `*` in a concrete action (only rules may hold wildcards).
    #[error("a concrete action cannot hold `*`")]
    WildcardInAction,
    /// A host that cannot be reversed into labels.
    #[error("host `{0}` is not a host name or an IP address")]
    BadHost(String),
    /// A program name holding a path separator: the caller must classify the path first.
    #[error("program `{0}` must be a file name, not a path")]
    ProgramIsPath(String),
}

/// A concrete, validated action name (no wildcard).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Action(String);

/// Where a program that `exec` runs was found. The caller (the exec tool) classifies the path; the
/// class is part of the name so a table can treat system tools and workspace scripts differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecClass {
    /// Under the system's own directories (`/usr/bin`, `/bin`, …), bound read-only.
    System,
    /// Inside the session's workspace copy.
    Workspace,
    /// Under a path the project declared in `[sandbox]`.
    Extra,
    /// Inside the dev shell closure the session started with.
    Devshell,
    /// A nix store path the session did not start with.
    NixStore,
}

impl ExecClass {
    /// The labels this class puts after `exec.`.
    pub fn labels(self) -> &'static str {
        match self {
            ExecClass::System => "system",
            ExecClass::Workspace => "workspace",
            ExecClass::Extra => "extra",
            ExecClass::Devshell => "devshell",
            ExecClass::NixStore => "nix.store",
        }
    }
}

/// True for a character a label may hold.
pub(crate) fn is_label_char(ch: char) -> bool {
    ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '+')
}

/// Checks one label (not a wildcard).
pub(crate) fn check_label(label: &str) -> Result<(), ActionError> {
    if label.is_empty() {
        return Err(ActionError::EmptyLabel);
    }
    if label.contains('*') {
        return Err(ActionError::MisplacedWildcard);
    }
    match label.chars().find(|c| !is_label_char(*c)) {
        Some(ch) => Err(ActionError::BadCharacter {
            label: label.to_owned(),
            ch,
        }),
        None => Ok(()),
    }
}

impl Action {
    /// Parses a concrete action name such as `git.push` or `net.connect.com.github.443`.
    pub fn parse(text: &str) -> Result<Action, ActionError> {
        if text.is_empty() {
            return Err(ActionError::Empty);
        }
        for label in text.split('.') {
            if label == "*" {
                return Err(ActionError::WildcardInAction);
            }
            check_label(label)?;
        }
        Ok(Action(text.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The labels, in order.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }

    /// `net.fetch.<reversed host>`: reading a URL on `host` through the broker.
    pub fn net_fetch(host: &str) -> Result<Action, ActionError> {
        Action::parse(&format!("net.fetch.{}", reverse_host(host)?))
    }

    /// `net.connect.<reversed host>.<port>`: a raw connection through the broker.
    pub fn net_connect(host: &str, port: u16) -> Result<Action, ActionError> {
        Action::parse(&format!("net.connect.{}.{port}", reverse_host(host)?))
    }

    /// `secret.password.<reversed host>`: a password for `host` typed by a person at git's prompt
    /// and handed to one call (`chock askpass`). Reversed like `net.*`, so `secret.password.com.
    /// github.*` names a host and everything under it.
    pub fn secret_password(host: &str) -> Result<Action, ActionError> {
        Action::parse(&format!("secret.password.{}", reverse_host(host)?))
    }

    /// `exec.<class>.<program>`: running `program` (a file name; dots in it become further labels, so
    /// `python3.12` is `exec.system.python3.12`).
    pub fn exec(class: ExecClass, program: &str) -> Result<Action, ActionError> {
        if program.contains('/') {
            return Err(ActionError::ProgramIsPath(program.to_owned()));
        }
        Action::parse(&format!("exec.{}.{program}", class.labels()))
    }

    /// `exec.unparsed`: a program path that cannot be resolved lexically (it holds `..`, a shell
    /// expansion, …), so no class can be trusted for it.
    pub fn exec_unparsed() -> Action {
        Action("exec.unparsed".to_owned())
    }

    /// `mcp.<server>.tool.<tool>`: one call of an MCP server's tool.
    pub fn mcp_tool(server: &str, tool: &str) -> Result<Action, ActionError> {
        check_label(server)?;
        Action::parse(&format!("mcp.{server}.tool.{tool}"))
    }

    /// `mcp.<server>.network`: an MCP server reaching the network.
    pub fn mcp_network(server: &str) -> Result<Action, ActionError> {
        check_label(server)?;
        Action::parse(&format!("mcp.{server}.network"))
    }

    /// `plugin.<plugin>.tool.<tool>`: one call of a WebAssembly plugin's tool.
    pub fn plugin_tool(plugin: &str, tool: &str) -> Result<Action, ActionError> {
        check_label(plugin)?;
        Action::parse(&format!("plugin.{plugin}.tool.{tool}"))
    }

    /// `git.<subcommand>` (`subcommand` may hold dots: `branch.delete`).
    pub fn git(subcommand: &str) -> Result<Action, ActionError> {
        Action::parse(&format!("git.{subcommand}"))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// Reverses a host into labels: `api.github.com` → `com.github.api`. Lower-cases it and drops one
/// trailing dot. An IPv4 address is reversed like any name (`1.0.0.127`); an IPv6 address cannot be
/// split on dots, so it becomes one label of its eight groups joined by `-`
/// (`::1` → `0-0-0-0-0-0-0-1`), and a `[...]` bracket pair is accepted around it.
pub fn reverse_host(host: &str) -> Result<String, ActionError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(IpAddr::V6(v6)) = bare.parse::<IpAddr>() {
        return Ok(ipv6_label(v6));
    }
    let lower = host.trim_end_matches('.').to_ascii_lowercase();
    if lower.is_empty() {
        return Err(ActionError::BadHost(host.to_owned()));
    }
    let mut labels = Vec::new();
    for label in lower.split('.') {
        let ok = !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(ActionError::BadHost(host.to_owned()));
        }
        labels.push(label);
    }
    labels.reverse();
    Ok(labels.join("."))
}

fn ipv6_label(addr: Ipv6Addr) -> String {
    addr.segments()
        .iter()
        .map(|s| format!("{s:x}"))
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_build_the_documented_names() {
        assert_eq!(
            Action::net_fetch("API.GitHub.com.").unwrap().as_str(),
            "net.fetch.com.github.api"
        );
        assert_eq!(
            Action::net_connect("github.com", 443).unwrap().as_str(),
            "net.connect.com.github.443"
        );
        assert_eq!(
            Action::net_fetch("127.0.0.1").unwrap().as_str(),
            "net.fetch.1.0.0.127"
        );
        assert_eq!(
            Action::secret_password("Git.Example.org").unwrap().as_str(),
            "secret.password.org.example.git"
        );
        assert!(Action::secret_password("a host").is_err());
        assert!(Action::secret_password("").is_err());
        assert_eq!(
            Action::net_fetch("[::1]").unwrap().as_str(),
            "net.fetch.0-0-0-0-0-0-0-1"
        );
        assert_eq!(
            Action::exec(ExecClass::System, "ls").unwrap().as_str(),
            "exec.system.ls"
        );
        assert_eq!(
            Action::exec(ExecClass::NixStore, "gcc").unwrap().as_str(),
            "exec.nix.store.gcc"
        );
        assert_eq!(
            Action::exec(ExecClass::System, "python3.12")
                .unwrap()
                .as_str(),
            "exec.system.python3.12"
        );
        assert_eq!(Action::exec_unparsed().as_str(), "exec.unparsed");
        assert_eq!(
            Action::mcp_tool("time", "now").unwrap().as_str(),
            "mcp.time.tool.now"
        );
        assert_eq!(
            Action::git("branch.delete").unwrap().as_str(),
            "git.branch.delete"
        );
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        assert_eq!(Action::parse(""), Err(ActionError::Empty));
        assert_eq!(Action::parse("a..b"), Err(ActionError::EmptyLabel));
        assert_eq!(Action::parse("a.b."), Err(ActionError::EmptyLabel));
        assert_eq!(Action::parse("a.*"), Err(ActionError::WildcardInAction));
        assert_eq!(
            Action::parse("a.b c"),
            Err(ActionError::BadCharacter {
                label: "b c".into(),
                ch: ' '
            })
        );
        assert_eq!(
            Action::exec(ExecClass::System, "/bin/ls"),
            Err(ActionError::ProgramIsPath("/bin/ls".into()))
        );
        assert_eq!(
            Action::net_fetch("a b.com"),
            Err(ActionError::BadHost("a b.com".into()))
        );
        assert_eq!(
            Action::mcp_tool("a.b", "t"),
            Err(ActionError::BadCharacter {
                label: "a.b".into(),
                ch: '.'
            })
        );
    }
}
