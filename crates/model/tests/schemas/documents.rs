//! The schema documents of `schemas/` and their validators.

use jsonschema::{Draft, Resource, Validator};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use toolcalls_model::EventKind;

use crate::{EVENT, RECORD, SCHEMA_BASE};

pub(crate) fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// The ten schema documents and their validators, by name (`announce`, …, `event`, `toolcall-record`).
pub(crate) struct Schemas {
    pub(crate) docs: BTreeMap<String, Value>,
    pub(crate) validators: BTreeMap<String, Validator>,
}

impl Schemas {
    pub(crate) fn get() -> &'static Schemas {
        static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
        SCHEMAS.get_or_init(Schemas::load)
    }

    pub(crate) fn names() -> Vec<String> {
        let mut names: Vec<String> = EventKind::ALL
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect();
        names.push(EVENT.to_owned());
        names.push(RECORD.to_owned());
        names
    }

    pub(crate) fn load() -> Schemas {
        let docs: BTreeMap<String, Value> = Schemas::names()
            .into_iter()
            .map(|name| {
                let doc = read_json(&schemas_dir().join(format!("{name}.schema.json")));
                (name, doc)
            })
            .collect();
        let validators = docs
            .iter()
            .map(|(name, doc)| {
                // The other documents are registered under their `$id`s, so `event.schema.json`'s
                // relative `$ref`s resolve without any network or file access.
                let mut options = jsonschema::options()
                    .with_draft(Draft::Draft202012)
                    .should_validate_formats(true);
                for (other, other_doc) in docs.iter().filter(|(other, _)| *other != name) {
                    let resource = Resource::from_contents(other_doc.clone())
                        .unwrap_or_else(|e| panic!("{other}.schema.json as a resource: {e}"));
                    options = options
                        .with_resource(format!("{SCHEMA_BASE}{other}.schema.json"), resource);
                }
                let validator = options
                    .build(doc)
                    .unwrap_or_else(|e| panic!("{name}.schema.json does not compile: {e}"));
                (name.clone(), validator)
            })
            .collect();
        Schemas { docs, validators }
    }

    pub(crate) fn doc(&self, name: &str) -> &Value {
        &self.docs[name]
    }

    /// The validation errors of `instance` against schema `name`, one line each; empty when valid.
    pub(crate) fn errors(&self, name: &str, instance: &Value) -> Vec<String> {
        self.validators[name]
            .iter_errors(instance)
            .map(|e| format!("{e} (at `{}`)", e.instance_path))
            .collect()
    }

    pub(crate) fn is_valid(&self, name: &str, instance: &Value) -> bool {
        self.validators[name].is_valid(instance)
    }

    /// Follows a local `$ref` (`#/$defs/x`) inside document `doc`.
    pub(crate) fn resolve<'a>(doc: &'a Value, mut node: &'a Value) -> &'a Value {
        while let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            let pointer = reference
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("only local $refs are followed here, found {reference}"));
            node = doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {reference}"));
        }
        node
    }
}
