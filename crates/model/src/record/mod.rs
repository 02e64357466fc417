//! The ToolCall record: what the processor publishes, one per call.
//!
//! Shaped after the joch.dev `ToolCall` resource (`apiVersion`, `kind`, `metadata`, `spec`, `status`)
//! with the nhtio stream fields (`streamId`, `checksum`, `createdAt`, `updatedAt`) and a
//! `correlation` block that says how the call's events were linked and how sure that link is.
//! The record key on the records topic is `metadata.name`, a deterministic [`RecordId`].
//!
//! This file holds the record's types; `encode` writes a record as JSON.

mod encode;
mod provenance;

pub use provenance::{FileEvents, FileLines, InputOffsets, Origin, Provenance, TopicOffsets};

use crate::checksum::Checksum;
use crate::event::{ApprovalDecision, HookVerdict, SideEffects};
use crate::ids::{CallId, RecordId, SessionId, Source, ThreadId, TurnId};
use crate::json::Json;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// `apiVersion` of every record.
pub const API_VERSION: &str = "toolcalls.dev/v1";
/// `kind` of every record.
pub const KIND: &str = "ToolCall";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallRecord {
    /// Always [`API_VERSION`] (borrowed: a record made here costs no allocation for it).
    pub api_version: Cow<'static, str>,
    /// Always [`KIND`].
    pub kind: Cow<'static, str>,
    pub metadata: Metadata,
    /// The nhtio stream id: the native call id when the source had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<CallId>,
    /// `sha256(canonical {tool, args})`, bit-exact with @nhtio/adk; absent when args were never seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    /// Event time of the first event of the call.
    pub created_at: Timestamp,
    /// Event time of the last event merged into the record.
    pub updated_at: Timestamp,
    pub spec: Spec,
    pub status: Status,
    pub correlation: Correlation,
    /// Whether a replay may re-run the call, derived from its side effects.
    pub replay: ReplayPolicy,
    /// Producer attributes of the events merged (later events win per key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
    /// The input positions of the events merged into the record (`provenance.rs`); records
    /// written before it was added have none.
    #[serde(default, skip_serializing_if = "Provenance::is_empty")]
    pub provenance: Provenance,
    /// What redaction rules replaced before the record left the process (`spec.input/password`,
    /// `status.output`, …); the checksum is the original arguments'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// The record id, also the Kafka key.
    pub name: RecordId,
    /// Starts at 1; a later revision of the same record (e.g. a collapsed retry) supersedes it.
    pub revision: u32,
    pub source: Source,
    pub session: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnId>,
}

/// A reference by name (joch `executionRef` / `agentRef` / `toolRef`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ref {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_ref: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_ref: Option<Ref>,
    /// The tool; absent only on orphan records whose completion did not name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ref: Option<Ref>,
    /// The arguments exactly as the model gave them (verbatim JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Json>,
    #[serde(default)]
    pub side_effects: SideEffects,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_context: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalState {
    pub required: bool,
    pub status: ApprovalDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Status {
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The result exactly as the tool returned it (verbatim JSON).
    pub output: Option<Json>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_decisions: Vec<HookDecisionEntry>,
    /// Why the call ended the way it did when no completion said so (timeout, turn end, eviction…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookDecisionEntry {
    pub hook: String,
    pub decision: HookVerdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: Timestamp,
}

/// Where a call is in its life. Records on the records topic carry a terminal phase; `Pending` and
/// `Running` appear only in the query API's view of calls still in a partition's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Denied,
    Interrupted,
    TimedOut,
    Evicted,
    Orphaned,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::Pending,
        Phase::Running,
        Phase::Succeeded,
        Phase::Failed,
        Phase::Denied,
        Phase::Interrupted,
        Phase::TimedOut,
        Phase::Evicted,
        Phase::Orphaned,
    ];

    pub fn is_terminal(self) -> bool {
        !matches!(self, Phase::Pending | Phase::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Denied => "Denied",
            Phase::Interrupted => "Interrupted",
            Phase::TimedOut => "TimedOut",
            Phase::Evicted => "Evicted",
            Phase::Orphaned => "Orphaned",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a result was linked to its call (ARCHITECTURE.md §4, in order of preference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Same native or stream id.
    CallId,
    /// Same `sha256({tool,args})`; the oldest pending call with it.
    Checksum,
    /// Same tool name; first in, first out.
    ToolFifo,
    /// No hints at all; the oldest pending call of the turn.
    Oldest,
    /// Nothing was linked: a call that never got a result, or a result that never found its call.
    Unmatched,
}

impl Strategy {
    pub const ALL: [Strategy; 5] = [
        Strategy::CallId,
        Strategy::Checksum,
        Strategy::ToolFifo,
        Strategy::Oldest,
        Strategy::Unmatched,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::CallId => "call_id",
            Strategy::Checksum => "checksum",
            Strategy::ToolFifo => "tool_fifo",
            Strategy::Oldest => "oldest",
            Strategy::Unmatched => "unmatched",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Correlation {
    pub strategy: Strategy,
    /// How sure the link is, from 0 (nothing linked) to 1 (same id).
    pub confidence: f64,
    /// How many pending calls could have taken the result when it was linked (1 = no choice).
    pub candidates: u32,
    /// Input events merged into this record, duplicates included.
    pub events_merged: u32,
    /// Repeated emissions of an event already merged (at-least-once delivery, re-emitted announces).
    pub duplicates: u32,
    /// Calls collapsed into this record by a shared idempotency key (1 = no retry).
    pub attempts: u32,
    /// The key the record id was derived from: the call id, or `@<topic>:<offset>` of the first event.
    pub key: String,
}

/// Whether the call may be replayed (joch: idempotent reads replay freely, non-idempotent writes
/// need an explicit override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayPolicy {
    Free,
    RequiresOverride,
}

impl ReplayPolicy {
    /// Reads, side-effect-free calls and calls declared idempotent replay freely; everything else,
    /// including calls whose side effects are unknown, needs an override.
    pub fn derive(side_effects: &SideEffects) -> Self {
        use crate::event::SideEffectLevel::*;
        match (side_effects.level, side_effects.idempotent) {
            (_, Some(true)) => ReplayPolicy::Free,
            (Some(None | Read), _) => ReplayPolicy::Free,
            _ => ReplayPolicy::RequiresOverride,
        }
    }
}

impl ToolCallRecord {
    pub fn id(&self) -> RecordId {
        self.metadata.name
    }
}
