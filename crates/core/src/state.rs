//! The entries of a partition's state, as kept in memory and written to the changelog.

use crate::Position;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolcalls_model::{
    ApprovalState, CallId, Checksum, HookDecisionEntry, Json, RecordId, SessionId, SideEffects,
    Source, ThreadId, Timestamp, ToolCallRecord, TurnId,
};

/// The correlation scope: native ids are unique only inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct ScopeKey {
    pub source: Source,
    pub session: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
}

/// Why a pending call's deadline is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Deadline {
    Timeout,
    TurnEnded,
    TurnAborted,
    Denied,
}

/// What the observability bus said about the execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExecEnd {
    pub at: Timestamp,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// An announced call waiting for its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Call {
    pub scope: Arc<ScopeKey>,
    pub seq: u64,
    /// The key the record id derives from (call id, or `@topic:offset` of the announce).
    pub key: String,
    pub record_id: RecordId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    /// Ids of retries collapsed into this call by idempotency key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnId>,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<SideEffects>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_context: Option<Map<String, Value>>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_end: Option<ExecEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookDecisionEntry>,
    #[serde(default)]
    pub denied: bool,
    pub events: u32,
    #[serde(default)]
    pub duplicates: u32,
    pub attempts: u32,
    pub deadline: Timestamp,
    pub why: Deadline,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
}

impl Call {
    pub fn idempotency_key(&self) -> Option<&str> {
        self.side_effects.as_ref()?.idempotency_key.as_deref()
    }
}

/// The result part of a completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Done {
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Json>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A fact about a call other than its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum Fact {
    ExecStart {
        at: Timestamp,
    },
    ExecEnd {
        end: ExecEnd,
        started_at: Option<Timestamp>,
    },
    Approval {
        at: Timestamp,
        decision: toolcalls_model::ApprovalDecision,
        by: Option<String>,
        reason: Option<String>,
    },
    Hook {
        entry: HookDecisionEntry,
    },
}

/// Events about a call that has not been announced (yet): a result, and/or other facts. Events
/// with the same call id gather in one entry; events without an id get one entry each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Loose {
    pub scope: Arc<ScopeKey>,
    pub seq: u64,
    pub key: String,
    pub record_id: RecordId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<Done>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Fact>,
    pub first_at: Timestamp,
    pub updated_at: Timestamp,
    pub events: u32,
    #[serde(default)]
    pub duplicates: u32,
    pub deadline: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
}

impl Loose {
    /// A result with nothing to tell its call apart: only rule 4 (oldest) may link it.
    pub fn hintless(&self) -> bool {
        self.call_id.is_none() && self.checksum.is_none() && self.tool.is_none()
    }
}

/// A call that was closed and published, remembered so repeats count as duplicates and retries
/// with the same idempotency key collapse into it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Closed {
    pub scope: Arc<ScopeKey>,
    pub seq: u64,
    pub record_id: RecordId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The published record, kept only for calls with an idempotency key (a collapsed retry
    /// publishes a new revision of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<ToolCallRecord>>,
    pub expires: Timestamp,
}

/// Partition-wide values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_time: Option<Timestamp>,
    /// Largest event time per input topic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topic_time: Vec<Option<Timestamp>>,
    pub next_seq: u64,
}

/// A pending entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Live {
    Call(Box<Call>),
    Loose(Box<Loose>),
}

/// One changelog value, as written (borrowed) and read back (owned). Externally tagged
/// (`{"call": {…}}`): an internally tagged enum would buffer its content, which verbatim JSON
/// ([`Json`]) cannot pass through.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EntryRef<'a> {
    Call(&'a Call),
    Loose(&'a Loose),
    Closed(&'a Closed),
    Meta(&'a Meta),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Entry {
    Call(Box<Call>),
    Loose(Box<Loose>),
    Closed(Box<Closed>),
    Meta(Meta),
}

/// The key of the partition-wide entry.
pub(crate) const META_KEY: &str = "meta";

/// One change to a partition's state, for the compacted changelog topic.
///
/// `value` is the JSON of the entry's current value, or `None` when the entry is gone (a
/// tombstone). `pos` is the input position of the last event that changed the entry; a restore
/// ignores changes whose position is beyond the committed input offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogOp {
    pub key: String,
    pub value: Option<Vec<u8>>,
    pub pos: Position,
}
