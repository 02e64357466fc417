//! The known divergences between the schemas and the Rust decoder.

use serde_json::Value;

use crate::json_path::{show, Seg};
use crate::target::{judge, Target};

/// Inputs on which the schemas and the Rust decoder do not agree, by class. Anything else that
/// splits them fails the drift tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Divergence {
    /// Records: serde reads `null` as an absent `Option`, so Rust accepts `null` for optional record
    /// fields; the schema refuses it. (Events refuse `null` for typed fields on both sides.)
    NullAsAbsent,
    /// JSON Schema compares numbers by value, so `5.0`, `-0` and `1e2` are integers to it; serde's
    /// integer types refuse a number written with a fraction or exponent (and `v` must be written
    /// `1`). Not expressible in JSON Schema.
    IntegralFloat,
    /// RFC 3339 allows second `60` only in a real leap second. The `date-time` format accepts it at
    /// 23:59 UTC on any day; the `time` crate only on the last day of a month. Not worth a pattern.
    LeapSecond,
    /// Records: Rust accepts any `apiVersion` and `kind` string; the schema pins `toolcalls.dev/v1`
    /// and `ToolCall`.
    RecordTypeTags,
    /// Records: the uuid crate also parses uppercase, braced, un-hyphenated and URN forms of
    /// `metadata.name`; the schema takes the lowercase hyphenated form the processor writes (it is
    /// the Kafka key, compared as a string).
    NonCanonicalUuid,
    /// serde's derived `Deserialize` also reads a struct from a JSON array of its fields in
    /// declaration order: `"sideEffects": []`, `"toolRef": ["Bash"]`, even a whole event
    /// `[1, "turn_end", "s", "x", null, null, null, "2026-05-10T10:35:00Z"]`. The schemas take
    /// objects only. (Reported.)
    StructFromArray,
}

impl Divergence {
    /// Which side accepts the input in this class of divergence.
    pub(crate) fn schema_accepts(self) -> bool {
        matches!(self, Divergence::IntegralFloat | Divergence::LeapSecond)
    }

    /// The class of divergence replacing `original`, the value at `path` of a `target` document,
    /// by `value` falls in, if any.
    pub(crate) fn classify(
        target: Target,
        path: &[Seg],
        original: &Value,
        value: &Value,
    ) -> Option<Divergence> {
        let path = show(path);
        match value {
            Value::Null if target == Target::Record => Some(Divergence::NullAsAbsent),
            Value::Array(_) if original.is_object() => Some(Divergence::StructFromArray),
            Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                Some(Divergence::IntegralFloat)
            }
            Value::String(_)
                if target == Target::Record && (path == "apiVersion" || path == "kind") =>
            {
                Some(Divergence::RecordTypeTags)
            }
            Value::String(_) if target == Target::Record && path == "metadata.name" => {
                Some(Divergence::NonCanonicalUuid)
            }
            Value::String(s) if s.contains(":60") => Some(Divergence::LeapSecond),
            _ => None,
        }
    }
}

/// Checks that schema and decoder agree on `instance`, or disagree only as a known divergence does.
pub(crate) fn expect_agreement(
    failures: &mut Vec<String>,
    target: Target,
    what: &str,
    instance: &Value,
    divergence: Option<Divergence>,
) {
    let verdict = judge(target, instance);
    if verdict.agree() {
        return;
    }
    match divergence {
        Some(d) if d.schema_accepts() == verdict.schema_ok() => {}
        _ => failures.push(format!(
            "{}: {what}: {}",
            target.schema(),
            verdict.describe()
        )),
    }
}
