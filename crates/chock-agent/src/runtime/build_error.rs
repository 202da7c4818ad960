//! Why a session could not be made, typed, so the command line can tell bad input (exit 2) from a
//! failure of the machine.

/// Why a session could not be made. [`BuildError::is_bad_input`] tells a mistake in what was
/// asked for (a flag, config.toml, chock.toml, the project) from a failure of the machine.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No provider was named and config.toml names no default.
    #[error(
        "no provider: pass --provider NAME (try `--provider demo`, which needs no key), or set \
         default_provider in config.toml (see docs/config.md)"
    )]
    NoProvider,
    /// The offline recording could not be read.
    #[error("{0}")]
    Recording(String),
    /// The provider is not configured.
    #[error(
        "unknown provider `{name}`: add a [providers.{name}] table to {file}, or use demo, anthropic, openai, chatgpt"
    )]
    UnknownProvider {
        /// The provider named.
        name: String,
        /// The config file its table was looked for in.
        file: String,
    },
    /// The key store could not be read.
    #[error("{0}")]
    Credentials(String),
    /// The provider needs a key and none is set.
    #[error("no key for provider `{name}`: set {env} or run `chock login --provider {name}`")]
    NoKey {
        /// The provider.
        name: String,
        /// The environment variable the key is looked for in (the table's `key_env`).
        env: String,
    },
    /// A sign-in provider has no account signed in (or one signed in at another issuer).
    #[error("provider `{name}` is not signed in: run `chock login --provider {name}`")]
    NotSignedIn {
        /// The provider.
        name: String,
    },
    /// The provider's table lacks a field its kind needs.
    #[error("{file}: providers.{name} needs base_url (kind {kind})")]
    NoBaseUrl {
        /// The provider.
        name: String,
        /// The config file holding its table.
        file: String,
        /// The provider's kind, which has no default address.
        kind: &'static str,
    },
    /// No model was named anywhere.
    #[error("no model for provider `{name}`: pass --model or set providers.{name}.model")]
    NoModel {
        /// The provider.
        name: String,
    },
    /// The provider's client could not be made.
    #[error("{0}")]
    Connect(String),
    /// config.toml's `[web_search]` is invalid.
    #[error("config.toml [web_search]: {0}")]
    Search(String),
    /// The session could not be opened (the project, its policy, the log, the workspace).
    #[error(transparent)]
    Session(#[from] chock_session::SessionError),
    /// The log refused a write.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// A resumed session's log could not be read back.
    #[error(transparent)]
    Resume(#[from] super::resume::ResumeError),
    /// A child session's spec cannot be followed.
    #[error("child session: {0}")]
    Child(String),
    /// A tool handed to the builder cannot be registered (its name is taken or not one a provider
    /// accepts).
    #[error(transparent)]
    Tool(#[from] chock_tools::registry::RegistryError),
    /// The MCP servers could not be set up (the trust file, the client's runtime). A server that
    /// is not trusted or does not start is not this: it is logged and left out.
    #[error(transparent)]
    Mcp(#[from] chock_mcp::McpError),
    /// A plugin chock.toml configures cannot start (its file, its pin, an import the table
    /// denies, its tools).
    #[error(transparent)]
    Plugin(#[from] chock_plugin::PluginError),
}

impl BuildError {
    /// Whether the person asked for something that cannot be (exit status 2), rather than the
    /// machine failing.
    pub fn is_bad_input(&self) -> bool {
        match self {
            BuildError::Session(e) => matches!(
                e,
                chock_session::SessionError::Policy(_)
                    | chock_session::SessionError::Project { .. }
            ),
            BuildError::Log(_) => false,
            BuildError::Mcp(e) => matches!(e, chock_mcp::McpError::TrustFile { .. }),
            BuildError::Resume(e) => e.is_bad_input(),
            _ => true,
        }
    }
}
