//! Loading a configured plugin: its bytes checked against the pin, compiled, its imports read and
//! each granting import's act decided by the table (a denied one is not linked and the plugin does
//! not start), then its tools listed in a store of their own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chock_policy::{Action, PluginConfig, Policy};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};

use crate::bindings::{PluginPre, chock::plugin as wit};
use crate::engine::PluginEngine;
use crate::imports::{Capability, Import};
use crate::run::{self, CallEnd, CallReport, Doors, Limits, NoDoors, State};

/// Why a plugin cannot start. Each names the plugin and the file, field, import or rule at fault.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The component's file cannot be read.
    #[error("{place}: plugins.{plugin}.path: cannot read {}: {reason}", file.display())]
    Read {
        /// The plugin's name (its `[plugins.<name>]` table).
        plugin: String,
        /// Where its table is written (`chock.toml:12`).
        place: String,
        /// The component's file.
        file: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// The bytes are not the pinned ones: a changed file is a new plugin.
    #[error(
        "{place}: plugins.{plugin}.sha256 does not match {}: the file's SHA-256 is {actual}, the pin is {pinned}; \
         changed bytes are a new plugin, refused until the pin is updated",
        file.display()
    )]
    Pin {
        /// The plugin's name.
        plugin: String,
        /// Where its table is written (`chock.toml:12`).
        place: String,
        /// The component's file.
        file: PathBuf,
        /// The SHA-256 (hex) the table pins.
        pinned: String,
        /// The SHA-256 (hex) of the file's bytes.
        actual: String,
    },
    /// The engine could not be made.
    #[error("plugin {plugin}: the WebAssembly engine cannot start: {reason}")]
    Engine {
        /// The plugin that needed the engine.
        plugin: String,
        /// Why the engine could not be made.
        reason: String,
    },
    /// Not a component wasmtime can compile.
    #[error("plugin {plugin}: {} is not a WebAssembly component Chock can run: {reason}", file.display())]
    Compile {
        /// The plugin's name.
        plugin: String,
        /// The component's file.
        file: PathBuf,
        /// What wasmtime said (compiling or linking it).
        reason: String,
    },
    /// An import whose act the table denies: it is not linked.
    #[error(
        "plugin {plugin} imports {import}, decided as {action}: {decided_by} denies it, so it is not linked and the plugin does not start"
    )]
    Denied {
        /// The plugin's name.
        plugin: String,
        /// The import, as the component names it.
        import: String,
        /// The act the import grants (`fs.read`, `fs.write`, `plugin.<name>.network`).
        action: String,
        /// The layer and rule that denied the act.
        decided_by: String,
    },
    /// An import Chock does not provide.
    #[error(
        "plugin {plugin} imports {import}, which Chock does not provide (a plugin imports only chock:plugin/* and \
         the wasi:io, wasi:cli, wasi:clocks and wasi:random surface; no filesystem or sockets), so it does not start"
    )]
    Unsupported {
        /// The plugin's name.
        plugin: String,
        /// The import, as the component names it.
        import: String,
    },
    /// Listing its tools failed.
    #[error("plugin {plugin}: listing its tools failed: {reason}")]
    Tools {
        /// The plugin's name.
        plugin: String,
        /// What stopped the listing (the instance could not be made, trapped or hit a limit).
        reason: String,
    },
    /// A tool it lists is unusable.
    #[error("plugin {plugin}: tool {tool:?}: {problem}")]
    BadTool {
        /// The plugin's name.
        plugin: String,
        /// The tool's name as listed (empty when the fault is an import's act, not a tool).
        tool: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// One tool a plugin offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// Its name inside the plugin.
    pub name: String,
    /// Its description, for the model.
    pub description: String,
    /// Its input's JSON Schema (an object).
    pub input_schema: serde_json::Value,
    /// `plugin.<plugin>.tool.<name>`.
    pub action: Action,
}

/// A plugin whose bytes matched its pin, compiled and linked: ready for calls, each in a fresh store.
pub struct LoadedPlugin {
    config: PluginConfig,
    engine: PluginEngine,
    sha256: String,
    imports: Vec<Import>,
    pre: PluginPre<State>,
    tools: Vec<ToolDef>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.config.name)
            .field("sha256", &self.sha256)
            .field("imports", &self.imports)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

fn limits(config: &PluginConfig) -> Limits {
    Limits {
        fuel: config.fuel,
        timeout: config.timeout,
        memory: config.memory_bytes,
        output: config.output_bytes,
    }
}

/// The component's imports, classified, in the component's order.
fn imports_of(engine: &wasmtime::Engine, component: &Component) -> Vec<Import> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| Import::classify(name))
        .collect()
}

/// Checks every import against the table: the capabilities to link, or the first refusal.
fn decide_imports(
    plugin: &str,
    imports: &[Import],
    policy: &Policy,
) -> Result<BTreeSet<Capability>, PluginError> {
    let mut linked = BTreeSet::new();
    for import in imports {
        match import {
            Import::Unsupported { name } => {
                return Err(PluginError::Unsupported {
                    plugin: plugin.to_string(),
                    import: name.clone(),
                });
            }
            Import::Wasi { .. } => {}
            Import::Chock { name, capability } => {
                let action = capability
                    .action(plugin)
                    .map_err(|e| PluginError::BadTool {
                        plugin: plugin.to_string(),
                        tool: String::new(),
                        problem: e.to_string(),
                    })?;
                if let Some(action) = action {
                    let verdict = policy.decide(&action);
                    if verdict.decision == chock_policy::Decision::Deny {
                        return Err(PluginError::Denied {
                            plugin: plugin.to_string(),
                            import: name.clone(),
                            action: action.as_str().to_string(),
                            decided_by: verdict.decided_by.to_string(),
                        });
                    }
                }
                linked.insert(*capability);
            }
        }
    }
    Ok(linked)
}

/// A linker holding the stdio surface and exactly the capabilities in `linked`.
fn linker(
    engine: &wasmtime::Engine,
    linked: &BTreeSet<Capability>,
) -> wasmtime::Result<Linker<State>> {
    let mut linker = Linker::new(engine);
    crate::wasi::add_to_linker(&mut linker)?;
    for capability in linked {
        match capability {
            Capability::Types => {
                wit::types::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?
            }
            Capability::Log => wit::log::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?,
            Capability::WorkspaceRead => {
                wit::workspace_read::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
            }
            Capability::WorkspaceWrite => {
                wit::workspace_write::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
            }
            Capability::Fetch => {
                wit::fetch::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?
            }
        }
    }
    Ok(linker)
}

/// The hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl LoadedPlugin {
    /// Reads `<project>/<config.path>`, checks it against the pin, compiles it, decides its
    /// imports under `policy` and lists its tools.
    pub fn load(
        engine: &PluginEngine,
        project: &Path,
        config: &PluginConfig,
        policy: &Policy,
    ) -> Result<LoadedPlugin, PluginError> {
        let plugin = config.name.clone();
        let file = project.join(&config.path);
        let bytes = std::fs::read(&file).map_err(|e| PluginError::Read {
            plugin: plugin.clone(),
            place: config.place.clone(),
            file: file.clone(),
            reason: e.to_string(),
        })?;
        let actual = sha256_hex(&bytes);
        if actual != config.sha256 {
            return Err(PluginError::Pin {
                plugin,
                place: config.place.clone(),
                file,
                pinned: config.sha256.clone(),
                actual,
            });
        }
        // Compiled from these bytes only: the cache is keyed by the digest just checked.
        let component = engine
            .compile(&actual, &bytes)
            .map_err(|e| PluginError::Compile {
                plugin: plugin.clone(),
                file: file.clone(),
                reason: format!("{e:#}"),
            })?;
        let imports = imports_of(engine.engine(), &component);
        let linked = decide_imports(&plugin, &imports, policy)?;
        let link_failed = |e: wasmtime::Error| PluginError::Compile {
            plugin: plugin.clone(),
            file: file.clone(),
            reason: format!("{e:#}"),
        };
        let linker = linker(engine.engine(), &linked).map_err(link_failed)?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(link_failed)?;
        let mut loaded = LoadedPlugin {
            config: config.clone(),
            engine: engine.clone(),
            sha256: actual,
            imports,
            pre,
            tools: Vec::new(),
        };
        loaded.tools = loaded.list_tools()?;
        Ok(loaded)
    }

    fn list_tools(&self) -> Result<Vec<ToolDef>, PluginError> {
        let plugin = &self.config.name;
        let failed = |reason: String| PluginError::Tools {
            plugin: plugin.clone(),
            reason,
        };
        let mut store = run::store(
            self.engine.engine(),
            limits(&self.config),
            Box::new(NoDoors),
        )
        .map_err(|e| failed(format!("{e:#}")))?;
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| failed(describe(&run::not_instantiated(&e))))?;
        let listed = instance
            .call_tools(&mut store)
            .map_err(|e| failed(describe(&run::stopped(&e))))?;
        let mut tools: Vec<ToolDef> = Vec::new();
        for tool in listed {
            let bad = |problem: String| PluginError::BadTool {
                plugin: plugin.clone(),
                tool: tool.name.clone(),
                problem,
            };
            if tool.name.is_empty()
                || tool.name.len() > 32
                || !tool
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            {
                return Err(bad(
                    "a tool's name is 1 to 32 of lower-case letters, digits, `_` and `-`".into(),
                ));
            }
            if tools.iter().any(|t| t.name == tool.name) {
                return Err(bad("listed twice".into()));
            }
            let action = Action::plugin_tool(plugin, &tool.name).map_err(|e| bad(e.to_string()))?;
            let input_schema: serde_json::Value = serde_json::from_str(&tool.input_schema)
                .map_err(|e| bad(format!("its input schema is not JSON: {e}")))?;
            if input_schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
                return Err(bad("its input schema does not describe an object".into()));
            }
            tools.push(ToolDef {
                name: tool.name,
                description: tool.description,
                input_schema,
                action,
            });
        }
        Ok(tools)
    }

    /// The plugin's name in chock.toml.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The SHA-256 of its bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Its imports, as read from the component.
    pub fn imports(&self) -> &[Import] {
        &self.imports
    }

    /// Its tools.
    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Its configuration (limits included).
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// Decides the imports again under `policy` (the live table, which a ratchet may have narrowed
    /// since the plugin loaded): the refusal that keeps the plugin from starting, if any.
    pub fn check_imports(&self, policy: &Policy) -> Result<(), PluginError> {
        decide_imports(&self.config.name, &self.imports, policy).map(drop)
    }

    /// Runs `tool` on `input` (JSON text) in a fresh store behind `doors`, after checking the
    /// imports against `policy` again. Blocking: call it from a thread that may block.
    pub fn call(
        &self,
        policy: &Policy,
        tool: &str,
        input: &str,
        doors: Box<dyn Doors>,
    ) -> CallReport {
        let limits = limits(&self.config);
        if let Err(err) = self.check_imports(policy) {
            return CallReport::refused(limits, err.to_string());
        }
        let started = Instant::now();
        let mut store = match run::store(self.engine.engine(), limits, doors) {
            Ok(store) => store,
            Err(err) => return CallReport::refused(limits, format!("{err:#}")),
        };
        let instance = match self.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(err) => {
                let end = run::not_instantiated(&err);
                return run::report(&mut store, limits, started, end, 0);
            }
        };
        let (end, bytes) = match instance.call_call(&mut store, tool, input) {
            Ok(Ok(text)) => {
                let bytes = text.len() as u64;
                if bytes > limits.output {
                    (CallEnd::OutputTooLarge { bytes }, bytes)
                } else {
                    (CallEnd::Returned(text), bytes)
                }
            }
            Ok(Err(text)) => {
                let bytes = text.len() as u64;
                if bytes > limits.output {
                    (CallEnd::OutputTooLarge { bytes }, bytes)
                } else {
                    (CallEnd::ToolError(text), bytes)
                }
            }
            Err(err) => (run::stopped(&err), 0),
        };
        run::report(&mut store, limits, started, end, bytes)
    }
}

/// A stop in words (for an error while listing tools).
pub(crate) fn describe(end: &CallEnd) -> String {
    match end {
        CallEnd::OutOfFuel => "it ran out of fuel".into(),
        CallEnd::TimedOut => "it ran past its timeout".into(),
        CallEnd::MemoryCap(why) | CallEnd::Trapped(why) | CallEnd::Refused(why) => why.clone(),
        CallEnd::OutputTooLarge { bytes } => format!("its output of {bytes} bytes is over the cap"),
        CallEnd::Returned(text) | CallEnd::ToolError(text) => text.clone(),
    }
}
