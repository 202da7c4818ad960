//! What a component imports, read before it is instantiated: Chock's own interfaces (each a
//! capability with the act that prices it), the WASI stdio surface [`crate::wasi`] provides, or
//! something Chock does not provide (which refuses the plugin).

use chock_policy::{Action, ActionError};

/// One of Chock's own interfaces a plugin may import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `chock:plugin/workspace-read`: each call is `fs.read`.
    WorkspaceRead,
    /// `chock:plugin/workspace-write`: each call is `fs.write`.
    WorkspaceWrite,
    /// `chock:plugin/fetch`: importing it is `plugin.<plugin>.network`; each call is
    /// `net.fetch.<host>`, decided by the broker.
    Fetch,
    /// `chock:plugin/log`: lines into the call's `plugin.call` event; grants nothing.
    Log,
    /// `chock:plugin/types`: type definitions only.
    Types,
}

impl Capability {
    /// The interface's name without its version.
    pub fn interface(self) -> &'static str {
        match self {
            Capability::WorkspaceRead => "chock:plugin/workspace-read",
            Capability::WorkspaceWrite => "chock:plugin/workspace-write",
            Capability::Fetch => "chock:plugin/fetch",
            Capability::Log => "chock:plugin/log",
            Capability::Types => "chock:plugin/types",
        }
    }

    /// The act the table decides before this import is linked, if it grants anything. The same
    /// act (or, for fetch, `net.fetch.<host>`) is decided again on every call that uses it.
    pub fn action(self, plugin: &str) -> Result<Option<Action>, ActionError> {
        Ok(match self {
            Capability::WorkspaceRead => Some(Action::parse("fs.read")?),
            Capability::WorkspaceWrite => Some(Action::parse("fs.write")?),
            Capability::Fetch => Some(Action::parse(&format!("plugin.{plugin}.network"))?),
            Capability::Log | Capability::Types => None,
        })
    }

    fn from_interface(name: &str) -> Option<Capability> {
        [
            Capability::WorkspaceRead,
            Capability::WorkspaceWrite,
            Capability::Fetch,
            Capability::Log,
            Capability::Types,
        ]
        .into_iter()
        .find(|c| c.interface() == name)
    }
}

/// One import of a component, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Import {
    /// One of Chock's interfaces (named as imported, with its version).
    Chock {
        /// The import's full name (`chock:plugin/workspace-read@0.1.0`).
        name: String,
        /// Which.
        capability: Capability,
    },
    /// A WASI interface of the surface Chock links itself (stdio, clocks, random).
    Wasi {
        /// The import's full name.
        name: String,
    },
    /// Anything else: the plugin does not start.
    Unsupported {
        /// The import's full name.
        name: String,
    },
}

impl Import {
    /// Classifies the import `name` (`package:namespace/interface@version`).
    pub fn classify(name: &str) -> Import {
        let (base, version) = name.split_once('@').unwrap_or((name, ""));
        if let Some(capability) = Capability::from_interface(base)
            && (version.starts_with("0.1.") || version == "0.1")
        {
            return Import::Chock {
                name: name.to_string(),
                capability,
            };
        }
        if crate::wasi::INTERFACES.contains(&base) && version.starts_with("0.2.") {
            return Import::Wasi {
                name: name.to_string(),
            };
        }
        Import::Unsupported {
            name: name.to_string(),
        }
    }

    /// The import's full name.
    pub fn name(&self) -> &str {
        match self {
            Import::Chock { name, .. } | Import::Wasi { name } | Import::Unsupported { name } => {
                name
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_classified_by_interface_and_version() {
        assert!(matches!(
            Import::classify("chock:plugin/workspace-read@0.1.0"),
            Import::Chock {
                capability: Capability::WorkspaceRead,
                ..
            }
        ));
        assert!(matches!(
            Import::classify("chock:plugin/workspace-read@0.2.0"),
            Import::Unsupported { .. }
        ));
        assert!(matches!(
            Import::classify("wasi:cli/stderr@0.2.6"),
            Import::Wasi { .. }
        ));
        assert!(matches!(
            Import::classify("wasi:filesystem/preopens@0.2.6"),
            Import::Unsupported { .. }
        ));
        assert!(matches!(
            Import::classify("wasi:sockets/tcp@0.2.6"),
            Import::Unsupported { .. }
        ));
    }

    #[test]
    fn each_granting_import_is_priced_as_an_act() {
        let act = |c: Capability| c.action("lint").unwrap().map(|a| a.as_str().to_string());
        assert_eq!(act(Capability::WorkspaceRead).as_deref(), Some("fs.read"));
        assert_eq!(act(Capability::WorkspaceWrite).as_deref(), Some("fs.write"));
        assert_eq!(
            act(Capability::Fetch).as_deref(),
            Some("plugin.lint.network")
        );
        assert_eq!(act(Capability::Log), None);
    }
}
