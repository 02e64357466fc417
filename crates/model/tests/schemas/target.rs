//! What a document is meant to be, and how the schemas and the Rust decoder judge it.

use serde_json::Value;
use toolcalls_model::{Event, EventKind, ToolCallRecord};

use crate::documents::Schemas;
use crate::{EVENT, RECORD};

/// What a JSON document is meant to be: an event of a kind, or a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Event(EventKind),
    Record,
}

impl Target {
    pub(crate) fn from_prefix(prefix: &str) -> Option<Target> {
        if prefix == "record" {
            return Some(Target::Record);
        }
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == prefix)
            .map(Target::Event)
    }

    /// The schema of exactly this target.
    pub(crate) fn schema(self) -> &'static str {
        match self {
            Target::Event(kind) => kind.as_str(),
            Target::Record => RECORD,
        }
    }

    /// The schema every document of this family must satisfy.
    pub(crate) fn umbrella(self) -> &'static str {
        match self {
            Target::Event(_) => EVENT,
            Target::Record => RECORD,
        }
    }

    /// Decodes as the processor does.
    pub(crate) fn decode(self, bytes: &[u8]) -> Result<Decoded, Rejection> {
        match self {
            Target::Event(_) => Event::decode(bytes)
                .map(|e| Decoded::Event(Box::new(e)))
                .map_err(|e| Rejection {
                    reason: e.reason(),
                    message: e.to_string(),
                }),
            Target::Record => serde_json::from_slice::<ToolCallRecord>(bytes)
                .map(|r| Decoded::Record(Box::new(r)))
                .map_err(|e| Rejection {
                    reason: "serde",
                    message: e.to_string(),
                }),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decoded {
    Event(Box<Event>),
    Record(Box<ToolCallRecord>),
}

impl Decoded {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Decoded::Event(e) => e.encode(),
            Decoded::Record(r) => r.encode(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

pub(crate) fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a Value always serializes")
}

pub(crate) fn to_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("Rust encodes JSON")
}

/// How schema and decoder judge one document.
pub(crate) struct Verdict {
    pub(crate) schema_errors: Vec<String>,
    pub(crate) rust: Result<(), String>,
}

impl Verdict {
    pub(crate) fn schema_ok(&self) -> bool {
        self.schema_errors.is_empty()
    }

    pub(crate) fn agree(&self) -> bool {
        self.schema_ok() == self.rust.is_ok()
    }

    pub(crate) fn describe(&self) -> String {
        let schema = if self.schema_ok() {
            "schema accepts".to_owned()
        } else {
            format!("schema refuses ({})", self.schema_errors.join("; "))
        };
        let rust = match &self.rust {
            Ok(()) => "Rust accepts".to_owned(),
            Err(e) => format!("Rust refuses ({e})"),
        };
        format!("{schema}, {rust}")
    }
}

/// Judges `instance` as a member of `family`'s umbrella schema and with the Rust decoder. For events,
/// the schema of the kind the instance names must agree with `event.schema.json`.
pub(crate) fn judge(family: Target, instance: &Value) -> Verdict {
    let schemas = Schemas::get();
    let schema_errors = schemas.errors(family.umbrella(), instance);
    if let Target::Event(_) = family {
        let named = instance
            .get("kind")
            .and_then(Value::as_str)
            .and_then(Target::from_prefix);
        if let Some(Target::Event(kind)) = named {
            let by_kind = schemas.is_valid(kind.as_str(), instance);
            assert_eq!(
                by_kind,
                schema_errors.is_empty(),
                "{kind}.schema.json and event.schema.json disagree on {instance}"
            );
        }
    }
    let rust = family
        .decode(&to_bytes(instance))
        .map(|_| ())
        .map_err(|r| r.message);
    Verdict {
        schema_errors,
        rust,
    }
}
