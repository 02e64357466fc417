//! Drift between the schemas and the Rust types: fully populated values, property lists,
//! removed, added and replaced fields are judged alike by both.

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use toolcalls_model::{EventKind, Phase, Strategy};

use crate::divergence::{expect_agreement, Divergence};
use crate::documents::Schemas;
use crate::full::{all_targets, full_json};
use crate::json_path::{at, at_mut, object_paths, paths, removed, replaced, show, Seg};
use crate::report;
use crate::target::{judge, to_bytes, to_value, Target};

#[test]
fn fully_populated_values_validate_and_round_trip() {
    let schemas = Schemas::get();
    let mut failures = Vec::new();
    for target in all_targets() {
        let json = full_json(target);
        for schema in [target.schema(), target.umbrella()] {
            let errors = schemas.errors(schema, &json);
            if !errors.is_empty() {
                failures.push(format!(
                    "full {}: refused by {schema}.schema.json: {}",
                    target.schema(),
                    errors.join("; ")
                ));
            }
        }
        let bytes = to_bytes(&json);
        match target.decode(&bytes) {
            Ok(decoded) if to_value(&decoded.encode()) == json => {}
            Ok(decoded) => failures.push(format!(
                "full {}: does not round-trip: {decoded:?}",
                target.schema()
            )),
            Err(e) => failures.push(format!(
                "full {}: Rust refuses its own encoding: {}",
                target.schema(),
                e.message
            )),
        }
    }
    report("fully populated values failing", failures);
}

/// Each schema's `properties`, at every level, are exactly the keys Rust writes for a fully
/// populated value: a field added (or renamed) on one side only fails here.
#[test]
fn schema_properties_are_exactly_the_fields_rust_writes() {
    fn walk(doc: &Value, node: &Value, value: &Value, at: &str, failures: &mut Vec<String>) {
        let node = Schemas::resolve(doc, node);
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            let Some(object) = value.as_object() else {
                failures.push(format!(
                    "`{at}`: the schema describes an object, Rust writes {value}"
                ));
                return;
            };
            if node.get("additionalProperties") != Some(&Value::Bool(false)) {
                failures.push(format!(
                    "`{at}`: the object is not closed (additionalProperties: false)"
                ));
            }
            let in_schema: BTreeSet<&String> = properties.keys().collect();
            let in_rust: BTreeSet<&String> = object.keys().collect();
            for missing in in_rust.difference(&in_schema) {
                failures.push(format!(
                    "`{at}`: Rust writes `{missing}`, the schema has no such property"
                ));
            }
            for extra in in_schema.difference(&in_rust) {
                failures.push(format!("`{at}`: the schema has `{extra}`, a fully populated Rust value does not write it"));
            }
            for (key, child) in object {
                if let Some(child_schema) = properties.get(key) {
                    let path = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{at}.{key}")
                    };
                    walk(doc, child_schema, child, &path, failures);
                }
            }
        }
        if let (Some(items), Some(values)) = (node.get("items"), value.as_array()) {
            assert!(
                !values.is_empty(),
                "`{at}`: populate the array so its items are checked"
            );
            for (i, child) in values.iter().enumerate() {
                walk(doc, items, child, &format!("{at}[{i}]"), failures);
            }
        }
    }

    let schemas = Schemas::get();
    let mut failures = Vec::new();
    for target in all_targets() {
        let doc = schemas.doc(target.schema());
        let mut problems = Vec::new();
        walk(doc, doc, &full_json(target), "", &mut problems);
        failures.extend(
            problems
                .into_iter()
                .map(|p| format!("{}.schema.json {p}", target.schema())),
        );
    }
    report("property drifts", failures);
}

/// Removing fields of a fully populated value (any one field at any depth; for events any two or
/// three top-level fields together, which reaches the callId/checksum/tool rule) is accepted or
/// refused alike: `required` lists cannot drift.
#[test]
fn removing_fields_is_judged_alike() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for target in all_targets() {
        let full = full_json(target);
        for path in paths(&full) {
            cases += 1;
            let what = format!("without `{}`", show(&path));
            expect_agreement(&mut failures, target, &what, &removed(&full, &path), None);
        }
        // Pairs within one object, at any depth; triples at the top level of events.
        for object in object_paths(&full) {
            let keys: Vec<String> = at(&full, &object)
                .as_object()
                .expect("object path")
                .keys()
                .cloned()
                .collect();
            for (i, a) in keys.iter().enumerate() {
                for (j, b) in keys.iter().enumerate().skip(i + 1) {
                    let mut pair =
                        removed(&full, &[object.clone(), vec![Seg::Key(a.clone())]].concat());
                    pair = removed(&pair, &[object.clone(), vec![Seg::Key(b.clone())]].concat());
                    cases += 1;
                    let what = format!("without `{a}` and `{b}` in `{}`", show(&object));
                    expect_agreement(&mut failures, target, &what, &pair, None);
                    if !object.is_empty() || target == Target::Record {
                        continue;
                    }
                    for c in keys.iter().skip(j + 1) {
                        let triple = removed(&pair, &[Seg::Key(c.clone())]);
                        cases += 1;
                        let what = format!("without `{a}`, `{b}` and `{c}`");
                        expect_agreement(&mut failures, target, &what, &triple, None);
                    }
                }
            }
        }
    }
    assert!(cases > 1000, "only {cases} removal cases");
    report("removals judged differently", failures);
}

/// A field of another kind, or an unknown field, is refused by both — at the top level and inside
/// every closed object.
#[test]
fn fields_of_other_kinds_and_unknown_fields_are_refused_by_both() {
    let fulls: BTreeMap<&str, Value> = EventKind::ALL
        .iter()
        .map(|k| (k.as_str(), full_json(Target::Event(*k))))
        .collect();
    let mut failures = Vec::new();
    for target in all_targets() {
        let full = full_json(target);
        let mut foreign: BTreeMap<String, Value> = BTreeMap::new();
        if let Target::Event(_) = target {
            for other in fulls.values() {
                for (key, value) in other.as_object().expect("object") {
                    if full.get(key).is_none() {
                        foreign.insert(key.clone(), value.clone());
                    }
                }
            }
            assert!(
                !foreign.is_empty(),
                "{}: no foreign fields to try",
                target.schema()
            );
        }
        for object in object_paths(&full) {
            let mut additions = vec![("surprise".to_owned(), json!("x"))];
            if object.is_empty() {
                additions.extend(foreign.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            for (key, value) in additions {
                let mut instance = full.clone();
                at_mut(&mut instance, &object)
                    .as_object_mut()
                    .expect("object path")
                    .insert(key.clone(), value);
                let verdict = judge(target, &instance);
                if verdict.schema_ok() || verdict.rust.is_ok() {
                    failures.push(format!(
                        "{}: with `{key}` added in `{}`: {}",
                        target.schema(),
                        show(&object),
                        verdict.describe()
                    ));
                }
            }
        }
    }
    report("extra fields not refused by both", failures);
}

/// Replacement values tried at every path: wrong types, edge numbers, every enum word Rust knows,
/// timestamps and checksums right and wrong.
fn replacement_values() -> Vec<Value> {
    let mut values = vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(1.0),
        json!(4294967295u64),
        json!(4294967296u64),
        json!(u64::MAX),
        json!(""),
        json!("x"),
        json!([]),
        json!(["x"]),
        json!({}),
        json!({"name": "x"}),
    ];
    // Every enum word on the wire, and near misses.
    let words = [
        "none",
        "read",
        "write",
        "external_write",
        "destructive",
        "requested",
        "approved",
        "denied",
        "allow",
        "deny",
        "modify",
        "free",
        "requires_override",
        "Succeeded",
        "succeeded",
        "Pending",
        "Orphaned",
        "call_id",
        "checksum",
        "tool_fifo",
        "oldest",
        "unmatched",
        "toolcalls.dev/v1",
        "ToolCall",
    ];
    values.extend(words.iter().map(|w| json!(w)));
    values.extend(EventKind::ALL.iter().map(|k| json!(k.as_str())));
    values.extend(Phase::ALL.iter().map(|p| json!(p.as_str())));
    values.extend(Strategy::ALL.iter().map(|s| json!(s.as_str())));
    // Timestamps: RFC 3339 variants both sides take, and malformed ones both refuse.
    let times = [
        "2026-05-10T10:35:00Z",
        "2026-05-10t10:35:00z",
        "2026-05-10T10:35:00.1Z",
        "2026-05-10T10:35:00.123456789012Z",
        "2026-05-10T10:35:00+23:59",
        "2026-05-10T10:35:00-00:00",
        "2024-02-29T10:35:00Z",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999Z",
        "2016-12-31T23:59:60Z",
        "2026-05-10T10:35:00",
        "2026-05-10T10:35Z",
        "2026-05-10T10:35:00.Z",
        "2026-05-10T24:00:00Z",
        "2026-05-10T10:60:00Z",
        "2026-05-10T10:35:61Z",
        "2026-02-29T10:35:00Z",
        "2026-04-31T10:35:00Z",
        "2026-13-01T10:35:00Z",
        "2026-00-10T10:35:00Z",
        "2026-05-00T10:35:00Z",
        "2026-05-10T10:35:00+24:00",
        "2026-05-10T10:35:00+01:60",
        "2026-05-10T10:35:00+0100",
        "2026-05-10T10:35:00 Z",
        "2026-05-10T10:35:00.123Z\n",
        "26-05-10T10:35:00Z",
        "+2026-05-10T10:35:00Z",
        "2026-05-10",
        "١٢٣٤-05-10T10:35:00Z",
        // Known divergences, classified by `Divergence::classify`.
        "2026-05-10 10:35:00Z",
        "2026-05-10x10:35:00Z",
        "2026-05-10T23:59:60Z",
    ];
    values.extend(times.iter().map(|t| json!(t)));
    // Checksums and UUIDs.
    let hex = "afe0d767059995a67ef89e4bfca96380f089d2d278e5c0b850e773a984136f95";
    values.extend([
        json!(hex),
        json!(hex.to_uppercase()),
        json!(&hex[..63]),
        json!(format!("{hex}0")),
        json!(format!(" {}", &hex[1..])),
        json!("5a0c4e0e-9c53-5a8e-8d2e-0f3b6c1d7a94"),
        json!("5A0C4E0E-9C53-5A8E-8D2E-0F3B6C1D7A94"),
        json!("5a0c4e0e9c535a8e8d2e0f3b6c1d7a94"),
        json!("{5a0c4e0e-9c53-5a8e-8d2e-0f3b6c1d7a94}"),
        json!("5a0c4e0e-9c53-5a8e-8d2e-0f3b6c1d7a9"),
    ]);
    values
}

/// Replacing any value of a fully populated event or record, at any depth, by any of
/// [`replacement_values`] is accepted or refused alike (but for the known divergences).
#[test]
fn replacing_values_is_judged_alike() {
    let values = replacement_values();
    let mut failures = Vec::new();
    let mut cases = 0;
    for target in all_targets() {
        let full = full_json(target);
        for path in paths(&full) {
            for value in &values {
                cases += 1;
                let instance = replaced(&full, &path, value.clone());
                let divergence = Divergence::classify(target, &path, at(&full, &path), value);
                let what = format!("`{}` = {value}", show(&path));
                expect_agreement(&mut failures, target, &what, &instance, divergence);
            }
        }
    }
    assert!(cases > 10_000, "only {cases} replacement cases");
    report("replacements judged differently", failures);
}

/// Each [`Divergence`] still happens, in the documented direction. When the Rust side is fixed the
/// case here fails: delete the divergence (the drift tests then hold the two sides to agreement).
#[test]
fn known_divergences_are_still_real() {
    let announce = full_json(Target::Event(EventKind::Announce));
    let completion = full_json(Target::Event(EventKind::Completion));
    let record = full_json(Target::Record);
    let set = |v: &Value, key: &str, new: Value| replaced(v, &[Seg::Key(key.to_owned())], new);
    let cases: Vec<(Divergence, Target, Value)> = vec![
        (
            Divergence::NullAsAbsent,
            Target::Record,
            set(&record, "streamId", Value::Null),
        ),
        (
            Divergence::IntegralFloat,
            Target::Event(EventKind::Completion),
            set(&completion, "durationMs", json!(412.0)),
        ),
        (
            Divergence::IntegralFloat,
            Target::Event(EventKind::Announce),
            set(&announce, "v", json!(1.0)),
        ),
        (
            Divergence::LeapSecond,
            Target::Event(EventKind::Announce),
            set(&announce, "time", json!("2026-05-10T23:59:60Z")),
        ),
        (
            Divergence::StructFromArray,
            Target::Event(EventKind::Announce),
            set(&announce, "sideEffects", json!(["write", true])),
        ),
        (
            Divergence::StructFromArray,
            Target::Record,
            set(&record, "spec", json!([])),
        ),
        (
            Divergence::RecordTypeTags,
            Target::Record,
            set(&record, "apiVersion", json!("toolcalls.dev/v0")),
        ),
        (
            Divergence::NonCanonicalUuid,
            Target::Record,
            replaced(
                &record,
                &[Seg::Key("metadata".into()), Seg::Key("name".into())],
                json!("{5a0c4e0e-9c53-5a8e-8d2e-0f3b6c1d7a94}"),
            ),
        ),
    ];
    let mut failures = Vec::new();
    for (divergence, target, instance) in cases {
        let verdict = judge(target, &instance);
        let documented = verdict.schema_ok() == divergence.schema_accepts()
            && verdict.rust.is_ok() != divergence.schema_accepts();
        if !documented {
            failures.push(format!(
                "{divergence:?} no longer diverges as documented ({}): remove it from `Divergence`",
                verdict.describe()
            ));
        }
    }
    report("stale divergences", failures);
}
