//! The tools a session offers, by name: the built-in tools register at start; an MCP server's tools,
//! a plugin's tools and `spawn_agent` register the same way, under their own names and acts, and
//! the loop neither knows nor changes. The loop asks for [`Registry::specs`] to send the model and
//! dispatches a call with [`Registry::prepare`].

use std::collections::HashMap;
use std::sync::Arc;

use chock_provider::ToolSpec;
use serde_json::Value;

use super::schema::{FieldProblem, check};
use super::tool::{DynTool, Prepared};

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Another tool already has the name.
    #[error("a tool named {name} is already registered")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The name is not one every provider accepts.
    #[error("{name:?} cannot name a tool: use 1 to 64 of A-Z, a-z, 0-9, _ and -")]
    BadName {
        /// The name.
        name: String,
    },
    /// The input schema does not describe a JSON object (providers take only objects).
    #[error("the input schema of {name} does not describe an object: {schema}")]
    NotAnObject {
        /// The tool.
        name: String,
        /// The schema given.
        schema: String,
    },
}

/// Why a call could not be prepared: it is refused before anything is decided.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No tool has the name.
    #[error("there is no tool named {name}")]
    Unknown {
        /// The name the model used.
        name: String,
    },
    /// The input does not fit the tool's schema.
    #[error("the input of {tool} does not fit its schema: {} {problem}", field_name(.field))]
    Field {
        /// The tool.
        tool: String,
        /// The field's path (`steps[0].status`; empty for the input itself).
        field: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
    /// The input fits the schema but does not parse.
    #[error("the input of {tool} does not parse: {source}")]
    Parse {
        /// The tool.
        tool: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
}

fn field_name(field: &str) -> String {
    if field.is_empty() {
        "the input".to_string()
    } else {
        format!("field `{field}`")
    }
}

struct Entry {
    tool: Arc<dyn DynTool>,
    spec: ToolSpec,
}

/// The tools of a session, in the order they registered (the order the model sees them).
#[derive(Default)]
pub struct Registry {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every built-in tool (docs/tools.md lists them).
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        super::builtin::register_all(&mut registry)
            .unwrap_or_else(|err| unreachable!("the built-in tools register: {err}"));
        registry
    }

    /// Adds `tool`; its spec (name, description, input schema) is computed once, here.
    pub fn register(&mut self, tool: impl DynTool + 'static) -> Result<(), RegistryError> {
        self.register_shared(Arc::new(tool))
    }

    /// [`Registry::register`] for a tool held elsewhere too (an MCP client's tools share its
    /// connection).
    pub fn register_shared(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegistryError> {
        let name = tool.name().to_string();
        if !valid_name(&name) {
            return Err(RegistryError::BadName { name });
        }
        if self.by_name.contains_key(&name) {
            return Err(RegistryError::Duplicate { name });
        }
        let schema = tool.input_schema();
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(RegistryError::NotAnObject {
                name,
                schema: schema.to_string(),
            });
        }
        let spec = ToolSpec {
            name: name.clone(),
            description: tool.description().to_string(),
            input_schema: schema,
        };
        self.by_name.insert(name, self.entries.len());
        self.entries.push(Entry { tool, spec });
        Ok(())
    }

    /// The tools' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.spec.name.as_str())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.by_name.get(name).map(|&i| &self.entries[i].tool)
    }

    /// How a call of `name` with `input` is shown, as the tool describes it ([`DynTool::display`]);
    /// None for a tool this registry does not hold.
    pub fn display(&self, name: &str, input: &Value) -> Option<chock_protocol::live::ToolDisplay> {
        self.get(name).map(|tool| tool.display(input))
    }

    /// Each tool's name and the input fields its schema requires: what a recording's calls are
    /// checked against when it is loaded ([`chock_provider::Recording::check_tools`]).
    pub fn shapes(&self) -> Vec<chock_provider::ToolShape> {
        self.entries
            .iter()
            .map(|e| chock_provider::ToolShape {
                name: e.spec.name.clone(),
                required: e
                    .spec
                    .input_schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// What the model is offered: every tool's name, description and input schema, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|e| e.spec.clone()).collect()
    }

    /// The call of `name` with `input`: checked against the advertised schema (naming the field
    /// that does not fit), then parsed by the tool.
    pub fn prepare(&self, name: &str, input: &Value) -> Result<Box<dyn Prepared + '_>, CallError> {
        let Some(&i) = self.by_name.get(name) else {
            return Err(CallError::Unknown {
                name: name.to_string(),
            });
        };
        let entry = &self.entries[i];
        check(&entry.spec.input_schema, input).map_err(|(field, problem)| CallError::Field {
            tool: name.to_string(),
            field,
            problem,
        })?;
        entry
            .tool
            .prepare(input)
            .map_err(|source| CallError::Parse {
                tool: name.to_string(),
                source,
            })
    }
}

#[cfg(test)]
mod tests;
