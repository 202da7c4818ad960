use chock_log::LogError;
use chock_policy::{Action, ActionError};
use schemars::schema_for;
use serde_json::{Value, json};

use super::*;
use crate::schema::for_provider;
use crate::tool::{Access, Act, Effect, Tool, ToolContext};
use crate::{ToolOutput, builtin, commands, files, web};

/// A tool a test registers at run time.
#[derive(Debug)]
struct Echo(&'static str);

/// Echo's input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoInput {
    /// What to say back.
    text: String,
    /// How often.
    #[serde(default)]
    #[schemars(range(min = 1, max = 3))]
    times: Option<u8>,
}

impl Tool for Echo {
    type Input = EchoInput;
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "Say it back."
    }
    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }
    fn access(&self, _input: &EchoInput) -> Result<Access, ActionError> {
        Ok(Access::Acts(vec![Act::new(
            Action::plugin_tool("test", "echo")?,
            "echo",
        )]))
    }
    async fn run<'a>(
        &'a self,
        _cx: ToolContext<'a>,
        input: EchoInput,
    ) -> Result<ToolOutput, LogError> {
        Ok(ToolOutput::ok(
            input.text.repeat(input.times.unwrap_or(1).into()),
        ))
    }
}

#[test]
fn a_name_registered_twice_is_refused_and_the_first_stays() {
    let mut registry = Registry::new();
    registry.register(Echo("echo")).unwrap();
    let err = registry.register(Echo("echo")).unwrap_err();
    assert!(matches!(&err, RegistryError::Duplicate { name } if name == "echo"));
    assert_eq!(err.to_string(), "a tool named echo is already registered");
    assert_eq!(registry.names().collect::<Vec<_>>(), ["echo"]);
    let mut builtin = Registry::builtin();
    assert!(matches!(
        builtin.register(Echo("read_file")),
        Err(RegistryError::Duplicate { .. })
    ));
}

#[test]
fn a_name_no_provider_takes_is_refused() {
    for bad in ["", "mcp.docs.tool.search", "two words", &"x".repeat(65)] {
        let name: &'static str = Box::leak(bad.to_string().into_boxed_str());
        assert!(
            matches!(
                Registry::new().register(Echo(name)),
                Err(RegistryError::BadName { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(Registry::new().register(Echo("mcp__docs__search")).is_ok());
}

#[test]
fn an_unknown_tool_is_a_call_error_naming_it() {
    let registry = Registry::builtin();
    let err = registry.prepare("rm_rf", &json!({})).err().unwrap();
    assert!(matches!(&err, CallError::Unknown { name } if name == "rm_rf"));
    assert_eq!(err.to_string(), "there is no tool named rm_rf");
}

#[test]
fn every_builtin_offers_the_schema_derived_from_its_input_type() {
    let expected: Vec<(&str, Value)> = vec![
        ("read_file", for_provider(schema_for!(files::ReadFileInput))),
        (
            "write_file",
            for_provider(schema_for!(files::WriteFileInput)),
        ),
        ("edit_file", for_provider(schema_for!(files::EditFileInput))),
        ("list", for_provider(schema_for!(files::ListInput))),
        ("glob", for_provider(schema_for!(files::GlobInput))),
        ("grep", for_provider(schema_for!(files::GrepInput))),
        ("run_command", for_provider(schema_for!(commands::RunInput))),
        (
            "read_output",
            for_provider(schema_for!(commands::ReadOutputInput)),
        ),
        ("update_plan", for_provider(schema_for!(builtin::PlanInput))),
        ("ask_user", for_provider(schema_for!(builtin::AskInput))),
        ("set_title", for_provider(schema_for!(builtin::TitleInput))),
        (
            "restrict_self",
            for_provider(schema_for!(builtin::RestrictInput)),
        ),
        (
            "request_action",
            for_provider(schema_for!(builtin::RequestInput)),
        ),
        ("fetch_url", for_provider(schema_for!(web::FetchInput))),
        ("web_search", for_provider(schema_for!(web::SearchInput))),
        (
            "read_guidance",
            for_provider(schema_for!(builtin::GuidanceInput)),
        ),
        (
            "memory_read",
            for_provider(schema_for!(builtin::MemoryReadInput)),
        ),
        (
            "memory_write",
            for_provider(schema_for!(builtin::MemoryWriteInput)),
        ),
    ];
    let specs = Registry::builtin().specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let expected_names: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected_names, "the built-in tools, in order");
    for ((name, schema), spec) in expected.iter().zip(&specs) {
        assert_eq!(&spec.input_schema, schema, "{name}");
        assert_eq!(spec.input_schema["type"], "object", "{name}");
        assert!(spec.input_schema["properties"].is_object(), "{name}");
        assert!(!spec.description.is_empty(), "{name}");
        let text = spec.input_schema.to_string();
        assert!(
            !text.contains("$ref") && !text.contains("$schema"),
            "{name}: {text}"
        );
    }
}

/// The smallest input the schema allows: every required field, with a value of its type.
fn example(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let ty = match &schema["type"] {
        Value::Array(types) => types.first().and_then(Value::as_str).unwrap_or("null"),
        other => other.as_str().unwrap_or("null"),
    };
    match ty {
        "object" => {
            let mut object = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                object.insert(name.into(), example(&schema["properties"][name]));
            }
            Value::Object(object)
        }
        "string" => json!("x"),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "array" => json!([example(&schema["items"])]),
        _ => Value::Null,
    }
}

#[test]
fn schema_and_parser_agree_on_what_is_required() {
    let registry = Registry::builtin();
    for spec in registry.specs() {
        let input = example(&spec.input_schema);
        assert!(
            registry.prepare(&spec.name, &input).is_ok(),
            "{}: the smallest input its schema allows does not parse: {input}",
            spec.name
        );
        for field in spec.input_schema["required"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let mut without = input.clone();
            without
                .as_object_mut()
                .unwrap()
                .remove(field.as_str().unwrap());
            let tool = spec.name.as_str();
            // The schema names the field; the parser alone would refuse it too.
            let err = registry.prepare(tool, &without).err().unwrap();
            assert!(
                matches!(&err, CallError::Field { field: f, problem: FieldProblem::Missing, .. } if f == field),
                "{tool}: {err}"
            );
            assert!(
                registry.get(tool).unwrap().prepare(&without).is_err(),
                "{tool}: {field}"
            );
        }
    }
}

#[test]
fn an_input_that_violates_the_schema_is_refused_naming_tool_and_field() {
    let registry = Registry::builtin();
    let refusal =
        |tool: &str, input: Value| registry.prepare(tool, &input).err().unwrap().to_string();
    assert_eq!(
        refusal("read_file", json!({"path": 7})),
        "the input of read_file does not fit its schema: field `path` must be string, not integer"
    );
    assert_eq!(
        refusal("read_file", json!({"path": "a", "offset": 0})),
        "the input of read_file does not fit its schema: field `offset` must be at least 1"
    );
    assert_eq!(
        refusal(
            "update_plan",
            json!({"steps": [{"step": "a", "status": "later"}]})
        ),
        "the input of update_plan does not fit its schema: field `steps[0].status` must be one of \"pending\", \"in_progress\", \"done\""
    );
    assert_eq!(
        refusal("web_search", json!({"query": "q", "max_results": 50})),
        "the input of web_search does not fit its schema: field `max_results` must be at most 10"
    );
    assert_eq!(
        refusal("run_command", json!("ls")),
        "the input of run_command does not fit its schema: the input must be object, not string"
    );
    assert!(
        refusal(
            "restrict_self",
            json!({"action": "exec.*", "decision": "maybe"})
        )
        .contains("`decision` must be one of \"allow\"")
    );
    assert!(refusal("read_guidance", json!({"topic": "nope"})).contains("\"sandbox\""));
}

#[test]
fn a_tool_registered_at_run_time_is_offered_with_its_derived_schema() {
    let mut registry = Registry::builtin();
    registry.register(Echo("echo")).unwrap();
    let spec = registry.specs().pop().unwrap();
    assert_eq!(spec.name, "echo");
    assert_eq!(spec.input_schema, for_provider(schema_for!(EchoInput)));
    assert_eq!(spec.input_schema["properties"]["times"]["maximum"], 3);
    let call = registry.prepare("echo", &json!({"text": "hi"})).unwrap();
    assert_eq!(
        call.access().unwrap(),
        Access::Acts(vec![Act::new(
            Action::parse("plugin.test.tool.echo").unwrap(),
            "echo"
        )])
    );
    assert!(
        registry
            .prepare("echo", &json!({"text": "hi", "times": 4}))
            .is_err()
    );
}

#[test]
fn each_tool_describes_its_own_calls_and_only_reads_inside_the_project_name_a_location() {
    use chock_protocol::live::ToolKind;
    let registry = Registry::builtin();
    let shown = |tool: &str, input: Value| registry.display(tool, &input).unwrap();
    let read = shown("read_file", json!({"path": "src/a.rs"}));
    assert_eq!(
        (read.title.as_str(), read.kind, read.locations.as_slice()),
        (
            "Read src/a.rs",
            ToolKind::Read,
            ["src/a.rs".to_string()].as_slice()
        )
    );
    let write = shown("write_file", json!({"path": "src/a.rs", "content": ""}));
    assert_eq!(write.kind, ToolKind::Edit);
    assert!(write.locations.is_empty(), "a write lands in the copy");
    assert!(
        shown("read_file", json!({"path": "../etc/passwd"}))
            .locations
            .is_empty()
    );
    assert!(shown("list", json!({"path": "/etc"})).locations.is_empty());
    let run = shown("run_command", json!({"command": "echo a\necho b"}));
    assert_eq!(
        (run.title.as_str(), run.kind),
        ("Run `echo a…`", ToolKind::Execute)
    );
    assert_eq!(
        shown("fetch_url", json!({"url": "https://x"})).kind,
        ToolKind::Fetch
    );
    assert_eq!(
        shown("grep", json!({"pattern": "fn"})).kind,
        ToolKind::Search
    );
    assert_eq!(
        shown("update_plan", json!({"steps": []})).kind,
        ToolKind::Think
    );
    // A tool that says nothing more of itself is shown by its name.
    assert_eq!(shown("memory_read", json!({})).title, "memory_read");
    assert!(registry.display("no_such_tool", &json!({})).is_none());
}
