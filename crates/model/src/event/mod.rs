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
//!
//! This file holds the event types; `wire` the flat JSON shape both directions go through,
//! `decode` the strict decoding, `direct` its fast path for the common message, `encode` the
//! event as one line of JSON and `error` the reasons a message is refused.

mod decode;
mod direct;
mod encode;
mod error;
mod recent;
mod wire;

pub use error::DecodeError;

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
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "wire::RawEvent")]
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
        deserialize_with = "wire::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub level: Option<SideEffectLevel>,
    #[serde(
        default,
        deserialize_with = "wire::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotent: Option<bool>,
    /// Calls with the same key inside the configured window collapse into one record.
    #[serde(
        default,
        deserialize_with = "wire::present",
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
}
