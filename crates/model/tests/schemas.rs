//! The JSON Schemas in `schemas/` are the contract other teams code against; this test keeps them and
//! the Rust wire types in step.
//!
//! - Every example in `schemas/examples/valid/` validates against its own schema and against
//!   `event.schema.json` (records: `toolcall-record.schema.json`), decodes in Rust, and re-encodes to
//!   JSON that validates again. The file name's prefix (`<kind>-…`, `record-…`) names the schema.
//! - Every example in `schemas/examples/invalid/` fails both the schema and the Rust decode, for the
//!   reason listed in [`INVALID_EXAMPLES`].
//! - Drift: fully populated events and records built in Rust validate; each schema's properties are
//!   exactly the keys Rust writes (nested objects too); deleting fields, adding fields of other kinds
//!   and replacing values with wrong ones are accepted or refused alike by schema and decoder. The few
//!   places where the two cannot (or do not yet) agree are the [`Divergence`]s, each pinned by
//!   `known_divergences_are_still_real` so that an entry goes when the Rust side changes.
//!
//! Validation runs with format assertion on (`date-time`, `uuid`), as a strict consumer would.

use jsonschema::{Draft, Resource, Validator};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use toolcalls_model::record::{API_VERSION, KIND};
use toolcalls_model::{
    checksum_of, Announce, Approval, ApprovalDecision, ApprovalState, Completion, Correlation,
    Event, EventBody, EventKind, ExecutionEnd, ExecutionStart, HookDecision, HookDecisionEntry,
    HookVerdict, Metadata, Phase, RecordId, Ref, ReplayPolicy, SideEffectLevel, SideEffects, Spec,
    Status, Strategy, Timestamp, ToolCallRecord, TurnEnd,
};

const SCHEMA_BASE: &str = "https://toolcalls.dev/schemas/v1/";
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Schema name of the umbrella event schema (`oneOf` the eight kinds).
const EVENT: &str = "event";
/// Schema name of the ToolCall record schema.
const RECORD: &str = "toolcall-record";
/// Keys whose values are free-form JSON: mutations stop at them instead of descending.
const FREE_FORM: [&str; 6] = [
    "args",
    "result",
    "attributes",
    "hookContext",
    "input",
    "output",
];

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
    ("record-ref-unknown-field", "unknown field `version`"),
    (
        "record-revision-too-large",
        "invalid value: integer `4294967296`",
    ),
    ("record-side-effects-unknown-field", "unknown field `cost`"),
    ("record-unknown-field", "unknown field `toolName`"),
];

// ---------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// The ten schema documents and their validators, by name (`announce`, …, `event`, `toolcall-record`).
struct Schemas {
    docs: BTreeMap<String, Value>,
    validators: BTreeMap<String, Validator>,
}

impl Schemas {
    fn get() -> &'static Schemas {
        static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
        SCHEMAS.get_or_init(Schemas::load)
    }

    fn names() -> Vec<String> {
        let mut names: Vec<String> = EventKind::ALL
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect();
        names.push(EVENT.to_owned());
        names.push(RECORD.to_owned());
        names
    }

    fn load() -> Schemas {
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

    fn doc(&self, name: &str) -> &Value {
        &self.docs[name]
    }

    /// The validation errors of `instance` against schema `name`, one line each; empty when valid.
    fn errors(&self, name: &str, instance: &Value) -> Vec<String> {
        self.validators[name]
            .iter_errors(instance)
            .map(|e| format!("{e} (at `{}`)", e.instance_path))
            .collect()
    }

    fn is_valid(&self, name: &str, instance: &Value) -> bool {
        self.validators[name].is_valid(instance)
    }

    /// Follows a local `$ref` (`#/$defs/x`) inside document `doc`.
    fn resolve<'a>(doc: &'a Value, mut node: &'a Value) -> &'a Value {
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

// ---------------------------------------------------------------------------------------------
// Rust side
// ---------------------------------------------------------------------------------------------

/// What a JSON document is meant to be: an event of a kind, or a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Event(EventKind),
    Record,
}

impl Target {
    fn from_prefix(prefix: &str) -> Option<Target> {
        if prefix == "record" {
            return Some(Target::Record);
        }
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == prefix)
            .map(Target::Event)
    }

    /// The schema of exactly this target.
    fn schema(self) -> &'static str {
        match self {
            Target::Event(kind) => kind.as_str(),
            Target::Record => RECORD,
        }
    }

    /// The schema every document of this family must satisfy.
    fn umbrella(self) -> &'static str {
        match self {
            Target::Event(_) => EVENT,
            Target::Record => RECORD,
        }
    }

    /// Decodes as the processor does.
    fn decode(self, bytes: &[u8]) -> Result<Decoded, Rejection> {
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
enum Decoded {
    Event(Box<Event>),
    Record(Box<ToolCallRecord>),
}

impl Decoded {
    fn encode(&self) -> Vec<u8> {
        match self {
            Decoded::Event(e) => e.encode(),
            Decoded::Record(r) => r.encode(),
        }
    }
}

#[derive(Debug)]
struct Rejection {
    reason: &'static str,
    message: String,
}

fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a Value always serializes")
}

fn to_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("Rust encodes JSON")
}

/// How schema and decoder judge one document.
struct Verdict {
    schema_errors: Vec<String>,
    rust: Result<(), String>,
}

impl Verdict {
    fn schema_ok(&self) -> bool {
        self.schema_errors.is_empty()
    }

    fn agree(&self) -> bool {
        self.schema_ok() == self.rust.is_ok()
    }

    fn describe(&self) -> String {
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
fn judge(family: Target, instance: &Value) -> Verdict {
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

// ---------------------------------------------------------------------------------------------
// Examples
// ---------------------------------------------------------------------------------------------

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

/// Panics with every failure at once, so one run names every broken file.
fn report(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n  - {}",
        failures.len(),
        failures.join("\n  - ")
    );
}

// ---------------------------------------------------------------------------------------------
// Fully populated values
// ---------------------------------------------------------------------------------------------

fn ts(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).expect("test timestamp")
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// An event of `kind` with every field its kind has set (booleans `true`, so they are written).
/// Struct literals without `..Default::default()` make a new field a compile error here.
fn full_event(kind: EventKind) -> Event {
    let tool = "mcp__github__create_issue".to_owned();
    let args = json!({"repo": "acme/api", "title": "Flaky test", "labels": ["ci", "bug"]});
    let checksum = checksum_of(&tool, Some(&args));
    let body = match kind {
        EventKind::Announce => EventBody::Announce(Announce {
            tool,
            args: Some(args.into()),
            checksum: Some(checksum),
            side_effects: Some(SideEffects {
                level: Some(SideEffectLevel::ExternalWrite),
                idempotent: Some(false),
                idempotency_key: Some("issue-flaky-test".to_owned()),
            }),
            agent: Some("triage-agent".to_owned()),
            execution: Some("run-0042".to_owned()),
            hook_context: Some(object(json!({"preToolUse": "hk_1"}))),
        }),
        EventKind::Completion => EventBody::Completion(Completion {
            tool: Some(tool),
            args: Some(args.into()),
            checksum: Some(checksum),
            result: Some(
                json!({"number": 1042, "url": "https://example.invalid/issues/1042"}).into(),
            ),
            is_error: true,
            cancelled: true,
            started_at: Some(ts("2026-05-10T10:35:00.200Z")),
            duration_ms: Some(412),
        }),
        EventKind::ExecutionStart => EventBody::ExecutionStart(ExecutionStart {
            checksum,
            tool: Some(tool),
        }),
        EventKind::ExecutionEnd => EventBody::ExecutionEnd(ExecutionEnd {
            checksum,
            tool: Some(tool),
            is_error: true,
            started_at: Some(ts("2026-05-10T10:35:00.200Z")),
            duration_ms: Some(412),
        }),
        EventKind::TurnEnd => EventBody::TurnEnd(TurnEnd {
            reason: Some("end_turn".to_owned()),
        }),
        EventKind::TurnAborted => EventBody::TurnAborted(TurnEnd {
            reason: Some("interrupted".to_owned()),
        }),
        EventKind::Approval => EventBody::Approval(Approval {
            tool: Some(tool),
            args: Some(args.into()),
            checksum: Some(checksum),
            decision: ApprovalDecision::Denied,
            by: Some("user:alice".to_owned()),
            reason: Some("not on a Friday".to_owned()),
        }),
        EventKind::HookDecision => EventBody::HookDecision(HookDecision {
            tool: Some(tool),
            args: Some(args.into()),
            checksum: Some(checksum),
            hook: "PreToolUse".to_owned(),
            decision: HookVerdict::Modify,
            policy_id: Some("labels-policy".to_owned()),
            policy_version: Some("4".to_owned()),
            reason: Some("added the triage label".to_owned()),
        }),
    };
    let event = Event {
        source: "claude-code".into(),
        session: "3f2c9a1e-8b7d-4c5e-9f1a-2b3c4d5e6f70".into(),
        thread: Some("main".into()),
        turn: Some("msg_01HqZ4V7".into()),
        call_id: Some("toolu_01XkQ7vJm3RZ9bTq2W8yFhNc".into()),
        time: ts("2026-05-10T10:35:00.123Z"),
        attributes: Some(object(json!({"cwd": "/work/main"}))),
        body,
    };
    assert_eq!(event.kind(), kind);
    event
}

/// A record with every field set, including every nested optional field and one hook decision.
fn full_record() -> ToolCallRecord {
    let tool = "mcp__github__create_issue";
    let input = json!({"repo": "acme/api", "title": "Flaky test"});
    let source = "claude-code".into();
    let session = "3f2c9a1e-8b7d-4c5e-9f1a-2b3c4d5e6f70".into();
    let thread = "main".into();
    ToolCallRecord {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        metadata: Metadata {
            name: RecordId::derive(&source, &session, Some(&thread), "toolu_01"),
            revision: 2,
            source,
            session,
            thread: Some(thread),
            turn: Some("msg_01HqZ4V7".into()),
        },
        stream_id: Some("toolu_01".into()),
        checksum: Some(checksum_of(tool, Some(&input))),
        created_at: ts("2026-05-10T10:35:00.123Z"),
        updated_at: ts("2026-05-10T10:35:02.000Z"),
        spec: Spec {
            execution_ref: Some(Ref {
                name: "run-0042".to_owned(),
            }),
            agent_ref: Some(Ref {
                name: "triage-agent".to_owned(),
            }),
            tool_ref: Some(Ref {
                name: tool.to_owned(),
            }),
            input: Some(input.into()),
            side_effects: SideEffects {
                level: Some(SideEffectLevel::ExternalWrite),
                idempotent: Some(true),
                idempotency_key: Some("issue-flaky-test".to_owned()),
            },
            approval: Some(ApprovalState {
                required: true,
                status: ApprovalDecision::Approved,
                requested_at: Some(ts("2026-05-10T10:35:00.300Z")),
                approved_by: Some("user:alice".to_owned()),
                approved_at: Some(ts("2026-05-10T10:35:01.000Z")),
                reason: Some("looks fine".to_owned()),
            }),
            hook_context: Some(object(json!({"preToolUse": "hk_1"}))),
        },
        status: Status {
            phase: Phase::Failed,
            started_at: Some(ts("2026-05-10T10:35:01.100Z")),
            completed_at: Some(ts("2026-05-10T10:35:02.000Z")),
            duration_ms: Some(900),
            output: Some(json!({"error": "rate limited"}).into()),
            is_error: true,
            hook_decisions: vec![HookDecisionEntry {
                hook: "PreToolUse".to_owned(),
                decision: HookVerdict::Allow,
                policy_id: Some("labels-policy".to_owned()),
                policy_version: Some("4".to_owned()),
                reason: Some("labels ok".to_owned()),
                at: ts("2026-05-10T10:35:00.250Z"),
            }],
            reason: Some("the tool reported an error".to_owned()),
        },
        correlation: Correlation {
            strategy: Strategy::CallId,
            confidence: 1.0,
            candidates: 1,
            events_merged: 5,
            duplicates: 1,
            attempts: 2,
            key: "toolu_01".to_owned(),
        },
        replay: ReplayPolicy::Free,
        attributes: Some(object(json!({"cwd": "/work/main"}))),
    }
}

/// The fully populated value of a target, as JSON.
fn full_json(target: Target) -> Value {
    match target {
        Target::Event(kind) => to_value(&full_event(kind).encode()),
        Target::Record => to_value(&full_record().encode()),
    }
}

fn all_targets() -> Vec<Target> {
    let mut targets: Vec<Target> = EventKind::ALL.into_iter().map(Target::Event).collect();
    targets.push(Target::Record);
    targets
}

// ---------------------------------------------------------------------------------------------
// Paths into JSON documents
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

type JsonPath = Vec<Seg>;

fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Every object member and array element of `value`, not descending into free-form values.
fn paths(value: &Value) -> Vec<JsonPath> {
    fn walk(value: &Value, prefix: &mut JsonPath, out: &mut Vec<JsonPath>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    prefix.push(Seg::Key(key.clone()));
                    out.push(prefix.clone());
                    if !FREE_FORM.contains(&key.as_str()) {
                        walk(child, prefix, out);
                    }
                    prefix.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    prefix.push(Seg::Index(i));
                    out.push(prefix.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// The closed objects of `value` (the root and every object reached without entering free-form
/// values), as paths.
fn object_paths(value: &Value) -> Vec<JsonPath> {
    let mut out = vec![Vec::new()];
    out.extend(paths(value).into_iter().filter(|p| {
        let free = matches!(p.last(), Some(Seg::Key(k)) if FREE_FORM.contains(&k.as_str()));
        !free && at(value, p).is_object()
    }));
    out
}

fn at<'a>(value: &'a Value, path: &[Seg]) -> &'a Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => &v[k.as_str()],
        Seg::Index(i) => &v[*i],
    })
}

fn at_mut<'a>(value: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()).expect("path exists"),
        Seg::Index(i) => v.get_mut(*i).expect("path exists"),
    })
}

fn removed(value: &Value, path: &[Seg]) -> Value {
    let mut copy = value.clone();
    let (last, parent) = path.split_last().expect("non-empty path");
    match (at_mut(&mut copy, parent), last) {
        (Value::Object(map), Seg::Key(k)) => {
            map.remove(k);
        }
        (Value::Array(items), Seg::Index(i)) => {
            items.remove(*i);
        }
        _ => panic!("bad path {}", show(path)),
    }
    copy
}

fn replaced(value: &Value, path: &[Seg], new: Value) -> Value {
    let mut copy = value.clone();
    *at_mut(&mut copy, path) = new;
    copy
}

// ---------------------------------------------------------------------------------------------
// Known divergences
// ---------------------------------------------------------------------------------------------

/// Inputs on which the schemas and the Rust decoder do not agree, by class. Anything else that
/// splits them fails the drift tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Divergence {
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
    fn schema_accepts(self) -> bool {
        matches!(self, Divergence::IntegralFloat | Divergence::LeapSecond)
    }

    /// The class of divergence replacing `original`, the value at `path` of a `target` document,
    /// by `value` falls in, if any.
    fn classify(
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
fn expect_agreement(
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

// ---------------------------------------------------------------------------------------------
// Tests: the schema files
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Tests: the examples
// ---------------------------------------------------------------------------------------------

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
        let expected = checksum_of(tool, Some(args));
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

// ---------------------------------------------------------------------------------------------
// Tests: drift between the schemas and the Rust types
// ---------------------------------------------------------------------------------------------

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
