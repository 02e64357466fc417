//! The schema files themselves: valid draft 2020-12, named after their files, and their enums are
//! the Rust enums.

use serde_json::Value;
use toolcalls_model::{
    ApprovalDecision, EventKind, HookVerdict, Phase, ReplayPolicy, SideEffectLevel, Strategy,
};

use crate::documents::Schemas;
use crate::{report, DRAFT_2020_12, EVENT, RECORD, SCHEMA_BASE};

#[test]
fn schemas_are_draft_2020_12_with_ids_named_after_their_files() {
    let schemas = Schemas::get();
    let mut failures = Vec::new();
    for name in Schemas::names() {
        let doc = schemas.doc(&name);
        if let Err(e) = jsonschema::meta::validate(doc) {
            failures.push(format!("{name}.schema.json is not a valid schema: {e}"));
        }
        if doc["$schema"] != DRAFT_2020_12 {
            failures.push(format!(
                "{name}.schema.json: `$schema` is not draft 2020-12"
            ));
        }
        let id = format!("{SCHEMA_BASE}{name}.schema.json");
        if doc["$id"] != id.as_str() {
            failures.push(format!(
                "{name}.schema.json: `$id` is {}, expected {id}",
                doc["$id"]
            ));
        }
        for key in ["title", "description"] {
            if doc[key].as_str().is_none_or(str::is_empty) {
                failures.push(format!("{name}.schema.json has no `{key}`"));
            }
        }
    }
    // The umbrella names each kind exactly once.
    let refs: Vec<&str> = schemas.doc(EVENT)["oneOf"]
        .as_array()
        .expect("event.schema.json has a oneOf")
        .iter()
        .map(|r| r["$ref"].as_str().expect("oneOf entries are $refs"))
        .collect();
    let expected: Vec<String> = EventKind::ALL
        .iter()
        .map(|k| format!("{k}.schema.json"))
        .collect();
    if refs != expected {
        failures.push(format!(
            "event.schema.json oneOf is {refs:?}, expected {expected:?}"
        ));
    }
    // Each kind schema pins its own kind and describes every property for producers.
    for kind in EventKind::ALL {
        let doc = schemas.doc(kind.as_str());
        if doc["properties"]["kind"]["const"] != kind.as_str() {
            failures.push(format!(
                "{kind}.schema.json: `kind` is not const \"{kind}\""
            ));
        }
        for (property, schema) in doc["properties"].as_object().expect("properties") {
            let described = schema
                .get("description")
                .or_else(|| Schemas::resolve(doc, schema).get("description"))
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
            if !described {
                failures.push(format!(
                    "{kind}.schema.json: `{property}` has no description"
                ));
            }
        }
    }
    report("schema file problems", failures);
}

#[test]
fn enums_in_the_schemas_are_the_rust_enums() {
    fn names<T: serde::Serialize>(values: &[T]) -> Vec<Value> {
        values
            .iter()
            .map(|v| serde_json::to_value(v).expect("serializes"))
            .collect()
    }
    // An exhaustive match next to each list: a new variant fails to compile until it is listed.
    fn levels() -> Vec<Value> {
        use SideEffectLevel::*;
        let all = [None, Read, Write, ExternalWrite, Destructive];
        let _: fn(SideEffectLevel) = |l| match l {
            None | Read | Write | ExternalWrite | Destructive => {}
        };
        names(&all)
    }
    fn approvals() -> Vec<Value> {
        use ApprovalDecision::*;
        let _: fn(ApprovalDecision) = |d| match d {
            Requested | Approved | Denied => {}
        };
        names(&[Requested, Approved, Denied])
    }
    fn verdicts() -> Vec<Value> {
        use HookVerdict::*;
        let _: fn(HookVerdict) = |v| match v {
            Allow | Deny | Modify => {}
        };
        names(&[Allow, Deny, Modify])
    }
    fn replays() -> Vec<Value> {
        use ReplayPolicy::*;
        let _: fn(ReplayPolicy) = |r| match r {
            Free | RequiresOverride => {}
        };
        names(&[Free, RequiresOverride])
    }

    let schemas = Schemas::get();
    let cases: Vec<(&str, &str, Vec<Value>)> = vec![
        (
            "announce",
            "/$defs/sideEffects/properties/level/enum",
            levels(),
        ),
        ("approval", "/properties/decision/enum", approvals()),
        ("hook_decision", "/properties/decision/enum", verdicts()),
        (RECORD, "/$defs/sideEffects/properties/level/enum", levels()),
        (
            RECORD,
            "/$defs/approvalState/properties/status/enum",
            approvals(),
        ),
        (
            RECORD,
            "/$defs/hookDecision/properties/decision/enum",
            verdicts(),
        ),
        (
            RECORD,
            "/$defs/status/properties/phase/enum",
            names(&Phase::ALL),
        ),
        (
            RECORD,
            "/$defs/correlation/properties/strategy/enum",
            names(&Strategy::ALL),
        ),
        (RECORD, "/properties/replay/enum", replays()),
    ];
    let mut failures = Vec::new();
    for (schema, pointer, rust) in cases {
        let in_schema = schemas
            .doc(schema)
            .pointer(pointer)
            .and_then(Value::as_array);
        if in_schema != Some(&rust) {
            failures.push(format!(
                "{schema}.schema.json {pointer} is {in_schema:?}, Rust writes {rust:?}"
            ));
        }
    }
    report("enum mismatches", failures);
}
