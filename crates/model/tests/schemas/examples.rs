//! The examples in `schemas/examples/`: valid ones validate, decode and round-trip; invalid ones
//! fail both sides for the listed reason.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use toolcalls_model::checksum_of;

use crate::documents::{read_json, schemas_dir, Schemas};
use crate::full::all_targets;
use crate::report;
use crate::target::{to_value, Decoded, Target};

/// Every invalid example and why it must fail: for events the [`DecodeError::reason`] label, for
/// records a fragment of serde's error. Listing the reason keeps each example failing for the rule
/// it was written to break, not for an accident elsewhere in the file.
///
/// [`DecodeError::reason`]: toolcalls_model::DecodeError::reason
const INVALID_EXAMPLES: &[(&str, &str)] = &[
    ("announce-attributes-array", "invalid_field"),
    ("announce-bad-side-effect-level", "invalid_field"),
    ("announce-call-id-number", "invalid_field"),
    ("announce-checksum-sha1-length", "invalid_field"),
    ("announce-checksum-uppercase", "invalid_field"),
    ("announce-empty-agent", "empty_field"),
    ("announce-empty-call-id", "empty_field"),
    ("announce-empty-session", "empty_field"),
    ("announce-empty-tool", "empty_field"),
    ("announce-missing-kind", "missing_field"),
    ("announce-missing-session", "missing_field"),
    ("announce-missing-tool", "missing_field"),
    ("announce-missing-v", "missing_field"),
    ("announce-result-on-wrong-kind", "field_not_allowed"),
    ("announce-side-effects-unknown-field", "invalid_field"),
    ("announce-time-epoch-millis", "invalid_field"),
    ("announce-time-without-offset", "invalid_field"),
    ("announce-unknown-field", "invalid_field"),
    ("announce-unknown-kind", "unknown_kind"),
    ("announce-v-as-string", "invalid_field"),
    ("announce-v2", "unsupported_version"),
    ("approval-bad-decision", "invalid"),
    ("approval-empty-by", "empty_field"),
    ("approval-hook-on-wrong-kind", "field_not_allowed"),
    ("approval-missing-decision", "missing_field"),
    ("approval-without-call-reference", "invalid"),
    ("completion-empty-source", "empty_field"),
    ("completion-fractional-duration", "invalid_field"),
    ("completion-hook-on-wrong-kind", "field_not_allowed"),
    ("completion-is-error-as-string", "invalid_field"),
    ("completion-missing-time", "missing_field"),
    ("completion-negative-duration", "invalid_field"),
    ("completion-started-at-not-a-date", "invalid_field"),
    ("execution_end-cancelled-on-wrong-kind", "field_not_allowed"),
    ("execution_end-checksum-not-hex", "invalid_field"),
    ("execution_end-result-on-wrong-kind", "field_not_allowed"),
    ("execution_start-args-on-wrong-kind", "field_not_allowed"),
    ("execution_start-missing-checksum", "missing_field"),
    ("hook_decision-bad-decision", "invalid"),
    ("hook_decision-by-on-wrong-kind", "field_not_allowed"),
    ("hook_decision-empty-policy-id", "empty_field"),
    ("hook_decision-missing-hook", "missing_field"),
    ("hook_decision-without-call-reference", "invalid"),
    ("turn_aborted-checksum-on-wrong-kind", "field_not_allowed"),
    ("turn_aborted-missing-time", "missing_field"),
    ("turn_end-empty-turn", "empty_field"),
    ("turn_end-reason-not-a-string", "invalid_field"),
    ("turn_end-tool-on-wrong-kind", "field_not_allowed"),
    ("record-approval-bad-status", "unknown variant `pending`"),
    ("record-bad-replay", "unknown variant `always`"),
    ("record-bad-strategy", "unknown variant `fuzzy`"),
    (
        "record-checksum-short",
        "checksum must be 64 lowercase hex digits",
    ),
    ("record-created-at-bad-time", "is not an RFC 3339 timestamp"),
    ("record-hook-decision-missing-at", "missing field `at`"),
    ("record-missing-correlation", "missing field `correlation`"),
    ("record-missing-metadata-session", "missing field `session`"),
    ("record-name-not-a-uuid", "UUID parsing failed"),
    ("record-negative-duration", "invalid value: integer `-5`"),
    ("record-phase-lowercase", "unknown variant `succeeded`"),
    ("record-phase-unknown", "unknown variant `Completed`"),
    (
        "record-provenance-unknown-shape",
        "did not match any variant of untagged enum Origin",
    ),
    ("record-ref-unknown-field", "unknown field `version`"),
    (
        "record-revision-too-large",
        "invalid value: integer `4294967296`",
    ),
    ("record-side-effects-unknown-field", "unknown field `cost`"),
    ("record-unknown-field", "unknown field `toolName`"),
];

struct Example {
    /// File name without `.json`.
    name: String,
    /// `schemas/examples/<valid|invalid>/<name>.json`, for messages.
    file: String,
    target: Target,
    bytes: Vec<u8>,
    json: Value,
}

fn examples(which: &str) -> Vec<Example> {
    let dir = schemas_dir().join("examples").join(which);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("readable directory entry").path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .expect("UTF-8 file name");
        let name = file
            .strip_suffix(".json")
            .unwrap_or_else(|| panic!("{}: examples are .json files", path.display()))
            .to_owned();
        let prefix = name.split('-').next().unwrap_or_default();
        let target = Target::from_prefix(prefix).unwrap_or_else(|| {
            panic!(
                "{}: the name must start with an event kind or `record` and a dash",
                path.display()
            )
        });
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let json = read_json(&path);
        let file = format!("schemas/examples/{which}/{file}");
        out.push(Example {
            name,
            file,
            target,
            bytes,
            json,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(!out.is_empty(), "no examples in {}", dir.display());
    out
}

#[test]
fn examples_cover_every_kind_and_the_record() {
    let count = |which: &str, target: Target| {
        examples(which)
            .iter()
            .filter(|e| e.target == target)
            .count()
    };
    let mut failures = Vec::new();
    for target in all_targets() {
        let (valid, invalid) = (count("valid", target), count("invalid", target));
        if valid < 2 || invalid < 2 {
            failures.push(format!(
                "{}: {valid} valid and {invalid} invalid examples; want at least 2 of each",
                target.schema()
            ));
        }
    }
    report("gaps in the examples", failures);
}

#[test]
fn valid_examples_validate_decode_and_round_trip() {
    let schemas = Schemas::get();
    let mut failures = Vec::new();
    for ex in examples("valid") {
        let file = &ex.file;
        for schema in [ex.target.schema(), ex.target.umbrella()] {
            let errors = schemas.errors(schema, &ex.json);
            if !errors.is_empty() {
                failures.push(format!(
                    "{file}: refused by {schema}.schema.json: {}",
                    errors.join("; ")
                ));
            }
        }
        let decoded = match ex.target.decode(&ex.bytes) {
            Ok(decoded) => decoded,
            Err(e) => {
                failures.push(format!(
                    "{file}: Rust refuses it: {} ({})",
                    e.message, e.reason
                ));
                continue;
            }
        };
        if let (Target::Event(kind), Decoded::Event(event)) = (ex.target, &decoded) {
            if event.kind() != kind {
                failures.push(format!(
                    "{file}: decodes as a {} event, named as {kind}",
                    event.kind()
                ));
            }
        }
        let encoded = decoded.encode();
        let reencoded = to_value(&encoded);
        for schema in [ex.target.schema(), ex.target.umbrella()] {
            let errors = schemas.errors(schema, &reencoded);
            if !errors.is_empty() {
                failures.push(format!(
                    "{file}: re-encoded by Rust, refused by {schema}.schema.json: {}",
                    errors.join("; ")
                ));
            }
        }
        match ex.target.decode(&encoded) {
            Ok(again) if again == decoded => {}
            Ok(again) => failures.push(format!("{file}: decode(encode(x)) != x: {again:?}")),
            Err(e) => failures.push(format!(
                "{file}: Rust refuses its own encoding: {}",
                e.message
            )),
        }
    }
    report("valid examples failing", failures);
}

/// Examples that carry a tool, its arguments and a checksum must carry the real ADK checksum, so
/// producers can copy them.
#[test]
fn example_checksums_are_the_adk_checksums() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for ex in examples("valid") {
        let (tool, args, checksum) = match ex.target {
            Target::Event(_) => (&ex.json["tool"], &ex.json["args"], &ex.json["checksum"]),
            Target::Record => (
                &ex.json["spec"]["toolRef"]["name"],
                &ex.json["spec"]["input"],
                &ex.json["checksum"],
            ),
        };
        let (Some(tool), Some(checksum)) = (tool.as_str(), checksum.as_str()) else {
            continue;
        };
        if args.is_null() {
            continue;
        }
        checked += 1;
        // A string of JSON text from a format that encodes its arguments so (OpenAI, Codex
        // `function_call`, OTel) is hashed as the value it holds; any other args as sent.
        let source = ex.json["source"]
            .as_str()
            .or_else(|| ex.json["metadata"]["source"].as_str());
        let expected = match (args.as_str(), source) {
            (Some(encoded), Some("openai" | "codex" | "otel")) => {
                toolcalls_model::checksum::checksum_of_encoded(tool, encoded)
            }
            _ => checksum_of(tool, Some(args)),
        };
        if checksum != expected.as_str() {
            failures.push(format!(
                "{}: checksum {checksum} is not sha256(canonical {{tool, args}}) = {expected}",
                ex.file
            ));
        }
    }
    assert!(
        checked >= 3,
        "only {checked} examples carry tool, args and checksum"
    );
    report("examples with wrong checksums", failures);
}

#[test]
fn invalid_examples_fail_both_schema_and_decode_for_the_listed_reason() {
    let schemas = Schemas::get();
    let listed: BTreeMap<&str, &str> = INVALID_EXAMPLES.iter().copied().collect();
    assert_eq!(
        listed.len(),
        INVALID_EXAMPLES.len(),
        "INVALID_EXAMPLES lists a file twice"
    );
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for ex in examples("invalid") {
        let file = &ex.file;
        seen.insert(ex.name.clone());
        for schema in [ex.target.schema(), ex.target.umbrella()] {
            if schemas.is_valid(schema, &ex.json) {
                failures.push(format!("{file}: accepted by {schema}.schema.json"));
            }
        }
        let Some(expected) = listed.get(ex.name.as_str()) else {
            failures.push(format!(
                "{file}: not listed in INVALID_EXAMPLES with the reason it must fail"
            ));
            continue;
        };
        match ex.target.decode(&ex.bytes) {
            Ok(decoded) => failures.push(format!("{file}: Rust accepts it as {decoded:?}")),
            Err(e) => {
                let matches = match ex.target {
                    Target::Event(_) => e.reason == *expected,
                    Target::Record => e.message.contains(expected),
                };
                if !matches {
                    failures.push(format!(
                        "{file}: Rust refuses it for another reason than `{expected}`: {} ({})",
                        e.message, e.reason
                    ));
                }
            }
        }
    }
    for name in listed.keys().filter(|n| !seen.contains(**n)) {
        failures.push(format!("INVALID_EXAMPLES lists {name}, which has no file"));
    }
    report("invalid examples not failing as they should", failures);
}
