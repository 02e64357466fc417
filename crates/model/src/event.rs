//! The v1 input events.
//!
//! Every Kafka message on an input topic is one JSON object: an envelope (`v`, `kind`, `source`,
//! `session`, optional `thread` / `turn` / `callId`, `time`, optional `attributes`) and the fields of
//! its kind. Field names are camelCase. Unknown fields are refused, so a typo reaches the dead-letter
//! topic instead of silently losing data; free-form producer data goes in `attributes`.
//!
//! [`Event::decode`] is the one way in: it returns an [`Event`] or a [`DecodeError`] whose
//! [`reason`](DecodeError::reason) is a short, bounded label (for metrics and dead-letter headers)
//! and whose text says what was wrong and what to send instead.

use crate::checksum::Checksum;
use crate::ids::{CallId, SessionId, Source, ThreadId, TurnId};
use crate::json::Json;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The only wire version this build understands.
pub const WIRE_VERSION: u32 = 1;

/// One input event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawEvent", into = "RawEvent")]
pub struct Event {
    /// The framework that produced it; part of the correlation scope.
    pub source: Source,
    /// The session; the Kafka key and part of the correlation scope.
    pub session: SessionId,
    /// A thread inside the session, for formats whose ids restart per thread.
    pub thread: Option<ThreadId>,
    /// The turn; fallback matching stays inside a turn when both sides name one.
    pub turn: Option<TurnId>,
    /// The native or stream id of the call this event is about.
    pub call_id: Option<CallId>,
    /// Event time: when it happened at the source, not when it was read.
    pub time: Timestamp,
    /// Free-form producer data, carried into the record untouched.
    pub attributes: Option<Map<String, Value>>,
    pub body: EventBody,
}

/// The kind-specific part of an event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    Announce(Announce),
    Completion(Completion),
    ExecutionStart(ExecutionStart),
    ExecutionEnd(ExecutionEnd),
    TurnEnd(TurnEnd),
    TurnAborted(TurnEnd),
    Approval(Approval),
    HookDecision(HookDecision),
}

/// The kinds of event, as named on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Announce,
    Completion,
    ExecutionStart,
    ExecutionEnd,
    TurnEnd,
    TurnAborted,
    Approval,
    HookDecision,
}

impl EventKind {
    pub const ALL: [EventKind; 8] = [
        EventKind::Announce,
        EventKind::Completion,
        EventKind::ExecutionStart,
        EventKind::ExecutionEnd,
        EventKind::TurnEnd,
        EventKind::TurnAborted,
        EventKind::Approval,
        EventKind::HookDecision,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Announce => "announce",
            EventKind::Completion => "completion",
            EventKind::ExecutionStart => "execution_start",
            EventKind::ExecutionEnd => "execution_end",
            EventKind::TurnEnd => "turn_end",
            EventKind::TurnAborted => "turn_aborted",
            EventKind::Approval => "approval",
            EventKind::HookDecision => "hook_decision",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The model asked for a tool call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Announce {
    pub tool: String,
    /// Arguments as the model gave them; a JSON string (OpenAI style) is kept as sent.
    pub args: Option<Json>,
    /// `sha256(canonical {tool, args})`; the processor computes it when absent and args are present.
    pub checksum: Option<Checksum>,
    pub side_effects: Option<SideEffects>,
    /// The agent that made the call (joch `agentRef`).
    pub agent: Option<String>,
    /// The execution / run the call belongs to (joch `executionRef`).
    pub execution: Option<String>,
    /// Hook context ids (joch `hookContext`), carried into the record.
    pub hook_context: Option<Map<String, Value>>,
}

/// The tool's result.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// Tool name, when the format repeats it on the result (a correlation hint).
    pub tool: Option<String>,
    /// Arguments, when the format repeats them on the result (hook payloads do); with `tool` they
    /// give a checksum.
    pub args: Option<Json>,
    pub checksum: Option<Checksum>,
    pub result: Option<Json>,
    pub is_error: bool,
    /// The call was cancelled before or while it ran (the record becomes Interrupted).
    pub cancelled: bool,
    pub started_at: Option<Timestamp>,
    pub duration_ms: Option<u64>,
}

/// An observability bus saw the tool start (ADK `ToolExecutionStartEvent`; its `callId` is the checksum).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionStart {
    pub checksum: Checksum,
    pub tool: Option<String>,
}

/// An observability bus saw the tool end (ADK `ToolExecutionEndEvent`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionEnd {
    pub checksum: Checksum,
    pub tool: Option<String>,
    pub is_error: bool,
    pub started_at: Option<Timestamp>,
    pub duration_ms: Option<u64>,
}

/// The turn ended (or was aborted); calls of the turn still pending become Interrupted after a grace.
/// Without a `turn` in the envelope it applies to every pending call of the session (and thread).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnEnd {
    pub reason: Option<String>,
}

/// An approval step of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub tool: Option<String>,
    pub args: Option<Json>,
    pub checksum: Option<Checksum>,
    pub decision: ApprovalDecision,
    /// Who decided.
    pub by: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    Requested,
    Approved,
    Denied,
}

impl ApprovalDecision {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Requested => "requested",
            ApprovalDecision::Approved => "approved",
            ApprovalDecision::Denied => "denied",
        }
    }
}

/// A policy hook's decision on a call (AOS `steps/toolCallRequest` / `steps/toolCallResult`,
/// Claude Code PreToolUse / PostToolUse).
#[derive(Debug, Clone, PartialEq)]
pub struct HookDecision {
    pub tool: Option<String>,
    pub args: Option<Json>,
    pub checksum: Option<Checksum>,
    pub hook: String,
    pub decision: HookVerdict,
    pub policy_id: Option<String>,
    pub policy_version: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookVerdict {
    Allow,
    Deny,
    Modify,
}

impl HookVerdict {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            HookVerdict::Allow => "allow",
            HookVerdict::Deny => "deny",
            HookVerdict::Modify => "modify",
        }
    }
}

/// Declared side effects of a call (joch `spec.sideEffects`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SideEffects {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub level: Option<SideEffectLevel>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotent: Option<bool>,
    /// Calls with the same key inside the configured window collapse into one record.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectLevel {
    None,
    Read,
    Write,
    ExternalWrite,
    Destructive,
}

impl SideEffectLevel {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffectLevel::None => "none",
            SideEffectLevel::Read => "read",
            SideEffectLevel::Write => "write",
            SideEffectLevel::ExternalWrite => "external_write",
            SideEffectLevel::Destructive => "destructive",
        }
    }
}

impl Event {
    pub fn kind(&self) -> EventKind {
        match &self.body {
            EventBody::Announce(_) => EventKind::Announce,
            EventBody::Completion(_) => EventKind::Completion,
            EventBody::ExecutionStart(_) => EventKind::ExecutionStart,
            EventBody::ExecutionEnd(_) => EventKind::ExecutionEnd,
            EventBody::TurnEnd(_) => EventKind::TurnEnd,
            EventBody::TurnAborted(_) => EventKind::TurnAborted,
            EventBody::Approval(_) => EventKind::Approval,
            EventBody::HookDecision(_) => EventKind::HookDecision,
        }
    }

    /// Decodes and validates one message.
    pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => return Err(DecodeError::Empty),
            Some(b'{') => {}
            Some(_) if std::str::from_utf8(bytes).is_err() => return Err(DecodeError::InvalidUtf8),
            Some(_) => {
                return Err(
                    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                        Err(e) => classify_json_error(bytes, e),
                        Ok(_) => DecodeError::Invalid(
                            "an event is a JSON object; this message is another JSON value".into(),
                        ),
                    },
                )
            }
        }
        // Any byte that is not UTF-8 makes the message `invalid_utf8`, wherever it is; checking the
        // whole message once lets serde skip checking every string on its own.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err(DecodeError::InvalidUtf8);
        };
        let raw: RawEvent = match serde_json::from_str(text) {
            Ok(raw) => raw,
            Err(e) => return Err(classify_json_error(bytes, e)),
        };
        Event::try_from(raw)
    }

    /// Encodes the event as one line of JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("events always serialize")
    }
}

fn classify_json_error(bytes: &[u8], e: serde_json::Error) -> DecodeError {
    use serde_json::error::Category;
    if std::str::from_utf8(bytes).is_err() {
        return DecodeError::InvalidUtf8;
    }
    let msg = e.to_string();
    if msg.contains("recursion limit") {
        return DecodeError::TooDeep;
    }
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => DecodeError::NotJson(msg),
        Category::Data => {
            // A message from a newer producer fails on its new fields before we see `v`: report
            // the version, which is the real cause.
            if msg.starts_with("unknown field") {
                if let Ok(probe) = serde_json::from_slice::<VersionProbe>(bytes) {
                    if let Some(v) = probe.v {
                        if v != u64::from(WIRE_VERSION) {
                            return DecodeError::UnsupportedVersion(v.to_string());
                        }
                    }
                }
            }
            DecodeError::InvalidField(msg)
        }
    }
}

#[derive(Deserialize)]
struct VersionProbe {
    v: Option<u64>,
}

/// Why a message is not a valid v1 event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("message is empty; send one JSON event object per message")]
    Empty,
    #[error("message is not valid UTF-8; events are UTF-8 JSON")]
    InvalidUtf8,
    #[error("message is not JSON: {0}")]
    NotJson(String),
    #[error("message nests too deeply (serde_json's limit is 128 levels); flatten the arguments or result")]
    TooDeep,
    #[error(
        "message is larger than {limit} bytes ({size} bytes); raise the limit or trim the result"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("invalid field: {0}")]
    InvalidField(String),
    #[error("unsupported version `v: {0}`; this processor reads v: 1 — upgrade the processor or downgrade the producer")]
    UnsupportedVersion(String),
    #[error("unknown kind `{0}`; expected one of announce, completion, execution_start, execution_end, turn_end, turn_aborted, approval, hook_decision")]
    UnknownKind(String),
    #[error("missing required field `{field}` on a `{kind}` event")]
    MissingField {
        kind: &'static str,
        field: &'static str,
    },
    #[error("field `{field}` does not belong on a `{kind}` event")]
    FieldNotAllowed {
        kind: &'static str,
        field: &'static str,
    },
    #[error("field `{field}` must not be empty")]
    EmptyField { field: &'static str },
    #[error("{0}")]
    Invalid(String),
}

impl DecodeError {
    /// A short label for metrics and the dead-letter `reason` header (a bounded set).
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Empty => "empty",
            DecodeError::InvalidUtf8 => "invalid_utf8",
            DecodeError::NotJson(_) => "not_json",
            DecodeError::TooDeep => "too_deep",
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::InvalidField(_) => "invalid_field",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::MissingField { .. } => "missing_field",
            DecodeError::FieldNotAllowed { .. } => "field_not_allowed",
            DecodeError::EmptyField { .. } => "empty_field",
            DecodeError::Invalid(_) => "invalid",
        }
    }
}

/// The `kind` field as sent: a known kind is read without allocating; an unknown name is kept for
/// the error that names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KindName {
    Known(EventKind),
    Unknown(String),
}

impl KindName {
    fn as_str(&self) -> &str {
        match self {
            KindName::Known(k) => k.as_str(),
            KindName::Unknown(name) => name,
        }
    }
}

impl Serialize for KindName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for KindName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KindName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<KindName, E> {
                Ok(EventKind::parse(name)
                    .map_or_else(|| KindName::Unknown(name.to_owned()), KindName::Known))
            }
        }
        d.deserialize_str(V)
    }
}

/// The flat wire shape: every field of every kind, all optional. Decoding goes through it so that
/// errors can name the field and the kind; encoding too, so both directions share one field list.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawEvent {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub v: Option<serde_json::Number>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<KindName>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub source: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub session: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub thread: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub turn: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub call_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<Timestamp>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub attributes: Option<Map<String, Value>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub args: Option<Json>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub checksum: Option<Checksum>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub side_effects: Option<SideEffects>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub execution: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub hook_context: Option<Map<String, Value>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub result: Option<Json>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub is_error: Option<bool>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cancelled: Option<bool>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<Timestamp>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub decision: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub by: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub hook: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub policy_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub policy_version: Option<String>,
}

/// A field that is present is `Some`, even when it is `null`: `null` is refused by typed fields
/// and kept as `Value::Null` by `args` / `result` (ADK hashes `"args":null`, not a missing `args`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Which optional body fields each kind admits (the envelope fields are admitted everywhere).
fn allowed(kind: EventKind, field: &str) -> bool {
    use EventKind::*;
    match field {
        "tool" => !matches!(kind, TurnEnd | TurnAborted),
        "args" => matches!(kind, Announce | Completion | Approval | HookDecision),
        "checksum" => !matches!(kind, TurnEnd | TurnAborted),
        "sideEffects" | "agent" | "execution" | "hookContext" => kind == Announce,
        "result" | "cancelled" => kind == Completion,
        "isError" | "startedAt" | "durationMs" => matches!(kind, Completion | ExecutionEnd),
        "reason" => matches!(kind, TurnEnd | TurnAborted | Approval | HookDecision),
        "decision" => matches!(kind, Approval | HookDecision),
        "by" => kind == Approval,
        "hook" | "policyId" | "policyVersion" => kind == HookDecision,
        _ => true,
    }
}

impl TryFrom<RawEvent> for Event {
    type Error = DecodeError;

    fn try_from(raw: RawEvent) -> Result<Self, DecodeError> {
        let kind_name = raw.kind.as_ref().map(KindName::as_str);
        let v = raw.v.as_ref().ok_or(DecodeError::MissingField {
            kind: kind_name
                .and_then(EventKind::parse)
                .map_or("v1", EventKind::as_str),
            field: "v",
        })?;
        if v.as_u64() != Some(u64::from(WIRE_VERSION)) {
            return Err(DecodeError::UnsupportedVersion(v.to_string()));
        }
        let kind_name =
            raw.kind
                .as_ref()
                .map(KindName::as_str)
                .ok_or(DecodeError::MissingField {
                    kind: "v1",
                    field: "kind",
                })?;
        let kind = EventKind::parse(kind_name)
            .ok_or_else(|| DecodeError::UnknownKind(kind_name.chars().take(64).collect()))?;
        let k = kind.as_str();

        let present: [(&'static str, bool); 18] = [
            ("tool", raw.tool.is_some()),
            ("args", raw.args.is_some()),
            ("checksum", raw.checksum.is_some()),
            ("sideEffects", raw.side_effects.is_some()),
            ("agent", raw.agent.is_some()),
            ("execution", raw.execution.is_some()),
            ("hookContext", raw.hook_context.is_some()),
            ("result", raw.result.is_some()),
            ("isError", raw.is_error.is_some()),
            ("cancelled", raw.cancelled.is_some()),
            ("startedAt", raw.started_at.is_some()),
            ("durationMs", raw.duration_ms.is_some()),
            ("reason", raw.reason.is_some()),
            ("decision", raw.decision.is_some()),
            ("by", raw.by.is_some()),
            ("hook", raw.hook.is_some()),
            ("policyId", raw.policy_id.is_some()),
            ("policyVersion", raw.policy_version.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, p)| *p && !allowed(kind, f)) {
            return Err(DecodeError::FieldNotAllowed { kind: k, field });
        }

        let required =
            |field: &'static str, value: Option<String>| -> Result<String, DecodeError> {
                match value {
                    None => Err(DecodeError::MissingField { kind: k, field }),
                    Some(s) if s.is_empty() => Err(DecodeError::EmptyField { field }),
                    Some(s) => Ok(s),
                }
            };
        let optional =
            |field: &'static str, value: Option<String>| -> Result<Option<String>, DecodeError> {
                match value {
                    Some(s) if s.is_empty() => Err(DecodeError::EmptyField { field }),
                    other => Ok(other),
                }
            };

        let source = Source(required("source", raw.source)?);
        let session = SessionId(required("session", raw.session)?);
        let thread = optional("thread", raw.thread)?.map(ThreadId);
        let turn = optional("turn", raw.turn)?.map(TurnId);
        let call_id = optional("callId", raw.call_id)?.map(CallId);
        let time = raw.time.ok_or(DecodeError::MissingField {
            kind: k,
            field: "time",
        })?;
        let tool = optional("tool", raw.tool)?;

        let body = match kind {
            EventKind::Announce
                if raw
                    .side_effects
                    .as_ref()
                    .and_then(|s| s.idempotency_key.as_deref())
                    == Some("") =>
            {
                return Err(DecodeError::EmptyField {
                    field: "sideEffects.idempotencyKey",
                })
            }
            EventKind::Announce => EventBody::Announce(Announce {
                tool: tool.ok_or(DecodeError::MissingField {
                    kind: k,
                    field: "tool",
                })?,
                args: raw.args,
                checksum: raw.checksum,
                side_effects: raw.side_effects,
                agent: optional("agent", raw.agent)?,
                execution: optional("execution", raw.execution)?,
                hook_context: raw.hook_context,
            }),
            EventKind::Completion => EventBody::Completion(Completion {
                tool,
                args: raw.args,
                checksum: raw.checksum,
                result: raw.result,
                is_error: raw.is_error.unwrap_or(false),
                cancelled: raw.cancelled.unwrap_or(false),
                started_at: raw.started_at,
                duration_ms: raw.duration_ms,
            }),
            EventKind::ExecutionStart => EventBody::ExecutionStart(ExecutionStart {
                checksum: raw.checksum.ok_or(DecodeError::MissingField {
                    kind: k,
                    field: "checksum",
                })?,
                tool,
            }),
            EventKind::ExecutionEnd => EventBody::ExecutionEnd(ExecutionEnd {
                checksum: raw.checksum.ok_or(DecodeError::MissingField {
                    kind: k,
                    field: "checksum",
                })?,
                tool,
                is_error: raw.is_error.unwrap_or(false),
                started_at: raw.started_at,
                duration_ms: raw.duration_ms,
            }),
            EventKind::TurnEnd | EventKind::TurnAborted => {
                let end = TurnEnd { reason: raw.reason };
                if kind == EventKind::TurnEnd {
                    EventBody::TurnEnd(end)
                } else {
                    EventBody::TurnAborted(end)
                }
            }
            EventKind::Approval => {
                let decision = match required("decision", raw.decision)?.as_str() {
                    "requested" => ApprovalDecision::Requested,
                    "approved" => ApprovalDecision::Approved,
                    "denied" => ApprovalDecision::Denied,
                    other => {
                        return Err(DecodeError::Invalid(format!(
                            "approval decision `{}` is not one of requested, approved, denied",
                            other.chars().take(32).collect::<String>()
                        )))
                    }
                };
                let approval = Approval {
                    tool,
                    args: raw.args,
                    checksum: raw.checksum,
                    decision,
                    by: optional("by", raw.by)?,
                    reason: raw.reason,
                };
                require_call_ref(
                    k,
                    call_id.is_some(),
                    approval.checksum.is_some(),
                    approval.tool.is_some(),
                )?;
                EventBody::Approval(approval)
            }
            EventKind::HookDecision => {
                let decision = match required("decision", raw.decision)?.as_str() {
                    "allow" => HookVerdict::Allow,
                    "deny" => HookVerdict::Deny,
                    "modify" => HookVerdict::Modify,
                    other => {
                        return Err(DecodeError::Invalid(format!(
                            "hook decision `{}` is not one of allow, deny, modify",
                            other.chars().take(32).collect::<String>()
                        )))
                    }
                };
                let hook = HookDecision {
                    tool,
                    args: raw.args,
                    checksum: raw.checksum,
                    hook: required("hook", raw.hook)?,
                    decision,
                    policy_id: optional("policyId", raw.policy_id)?,
                    policy_version: optional("policyVersion", raw.policy_version)?,
                    reason: raw.reason,
                };
                require_call_ref(
                    k,
                    call_id.is_some(),
                    hook.checksum.is_some(),
                    hook.tool.is_some(),
                )?;
                EventBody::HookDecision(hook)
            }
        };

        Ok(Event {
            source,
            session,
            thread,
            turn,
            call_id,
            time,
            attributes: raw.attributes,
            body,
        })
    }
}

/// Approvals and hook decisions must say which call they are about.
fn require_call_ref(
    kind: &'static str,
    call_id: bool,
    checksum: bool,
    tool: bool,
) -> Result<(), DecodeError> {
    if call_id || checksum || tool {
        Ok(())
    } else {
        Err(DecodeError::Invalid(format!(
            "a `{kind}` event needs `callId`, `checksum` or `tool` to find its call"
        )))
    }
}

impl From<Event> for RawEvent {
    fn from(e: Event) -> RawEvent {
        let mut raw = RawEvent {
            v: Some(WIRE_VERSION.into()),
            kind: Some(KindName::Known(e.kind())),
            source: Some(e.source.0),
            session: Some(e.session.0),
            thread: e.thread.map(|t| t.0),
            turn: e.turn.map(|t| t.0),
            call_id: e.call_id.map(|c| c.0),
            time: Some(e.time),
            attributes: e.attributes,
            ..RawEvent::default()
        };
        match e.body {
            EventBody::Announce(a) => {
                raw.tool = Some(a.tool);
                raw.args = a.args;
                raw.checksum = a.checksum;
                raw.side_effects = a.side_effects;
                raw.agent = a.agent;
                raw.execution = a.execution;
                raw.hook_context = a.hook_context;
            }
            EventBody::Completion(c) => {
                raw.tool = c.tool;
                raw.args = c.args;
                raw.checksum = c.checksum;
                raw.result = c.result;
                raw.is_error = c.is_error.then_some(true);
                raw.cancelled = c.cancelled.then_some(true);
                raw.started_at = c.started_at;
                raw.duration_ms = c.duration_ms;
            }
            EventBody::ExecutionStart(s) => {
                raw.checksum = Some(s.checksum);
                raw.tool = s.tool;
            }
            EventBody::ExecutionEnd(s) => {
                raw.checksum = Some(s.checksum);
                raw.tool = s.tool;
                raw.is_error = s.is_error.then_some(true);
                raw.started_at = s.started_at;
                raw.duration_ms = s.duration_ms;
            }
            EventBody::TurnEnd(t) | EventBody::TurnAborted(t) => raw.reason = t.reason,
            EventBody::Approval(a) => {
                raw.tool = a.tool;
                raw.args = a.args;
                raw.checksum = a.checksum;
                raw.decision = Some(a.decision.as_str().to_owned());
                raw.by = a.by;
                raw.reason = a.reason;
            }
            EventBody::HookDecision(h) => {
                raw.tool = h.tool;
                raw.args = h.args;
                raw.checksum = h.checksum;
                raw.hook = Some(h.hook);
                raw.decision = Some(h.decision.as_str().to_owned());
                raw.policy_id = h.policy_id;
                raw.policy_version = h.policy_version;
                raw.reason = h.reason;
            }
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announce_with_args(args: &str) -> Vec<u8> {
        format!(r#"{{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","args":{args}}}"#)
            .into_bytes()
    }

    #[test]
    fn arguments_are_kept_verbatim() {
        let args = r#"{"b": 12345678901234567890123, "a": 1.0}"#;
        let e = Event::decode(&announce_with_args(args)).unwrap();
        let EventBody::Announce(a) = &e.body else {
            panic!("{e:?}")
        };
        assert_eq!(a.args.as_ref().unwrap().as_str(), args);
        assert_eq!(Event::decode(&e.encode()).unwrap(), e);
        // `null` is a value (ADK hashes it), not an absent field.
        let e = Event::decode(&announce_with_args("null")).unwrap();
        let EventBody::Announce(a) = &e.body else {
            panic!()
        };
        assert_eq!(a.args.as_ref().map(Json::as_str), Some("null"));
    }

    #[test]
    fn nesting_too_deep_is_refused_inside_arguments_too() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            Event::decode(&announce_with_args(&deep)),
            Err(DecodeError::TooDeep)
        );
    }

    #[test]
    fn reasons_are_bounded_labels() {
        assert_eq!(Event::decode(b"  ").unwrap_err().reason(), "empty");
        assert_eq!(Event::decode(b"[1]").unwrap_err().reason(), "invalid");
        assert_eq!(Event::decode(b"{").unwrap_err().reason(), "not_json");
        assert_eq!(
            Event::decode(b"{\"v\":2}").unwrap_err().reason(),
            "unsupported_version"
        );
        assert_eq!(
            Event::decode(&[b'{', 0xff, b'}']).unwrap_err().reason(),
            "invalid_utf8"
        );
        let unknown = br#"{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","tol":1}"#;
        assert_eq!(
            Event::decode(unknown).unwrap_err().reason(),
            "invalid_field"
        );
    }
}
