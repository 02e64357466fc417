//! What the audit reads of a record: its name, scope, revision, key, tool, phase, the facts its
//! content holds and its provenance.

use super::identity::{fact_held_hash, scope_of};
use toolcalls_core::MAX_LISTED_REPEATS;
use toolcalls_model::record::Provenance;
use toolcalls_model::{Phase, RecordId};

/// What the audit reads of a record: its id, revision and provenance.
#[derive(serde::Deserialize)]
pub(super) struct RecordHead {
    pub(super) metadata: MetadataHead,
    pub(super) spec: Option<SpecHead>,
    pub(super) status: Option<StatusHead>,
    pub(super) correlation: Option<CorrelationHead>,
    #[serde(default)]
    pub(super) provenance: Provenance,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StatusHead {
    pub(super) phase: Phase,
    #[serde(default)]
    pub(super) hook_decisions: Vec<toolcalls_model::HookDecisionEntry>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SpecHead {
    pub(super) tool_ref: Option<ToolRefHead>,
    pub(super) approval: Option<toolcalls_model::ApprovalState>,
    pub(super) side_effects: Option<SideEffectsHead>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SideEffectsHead {
    pub(super) idempotency_key: Option<String>,
}

#[derive(serde::Deserialize)]
pub(super) struct ToolRefHead {
    pub(super) name: String,
}

#[derive(serde::Deserialize)]
pub(super) struct CorrelationHead {
    #[serde(default)]
    pub(super) attempts: u32,
    #[serde(default)]
    pub(super) duplicates: u32,
    pub(super) key: Option<String>,
}

/// How many of a record's `duplicates` copies it may not list.
pub(super) fn unlisted(duplicates: u32) -> u32 {
    duplicates.saturating_sub(MAX_LISTED_REPEATS)
}

/// Whether a record in `phase` merged a result.
pub(super) fn has_result(phase: Phase) -> bool {
    matches!(phase, Phase::Succeeded | Phase::Failed)
}

#[derive(serde::Deserialize)]
pub(super) struct MetadataHead {
    pub(super) name: RecordId,
    pub(super) revision: u32,
    pub(super) source: Option<String>,
    pub(super) session: Option<String>,
    pub(super) thread: Option<String>,
}

impl MetadataHead {
    /// [`scope_of`] the record, when it names its source and session (a record always does).
    pub(super) fn scope(&self) -> Option<u64> {
        let (source, session) = (self.source.as_deref()?, self.session.as_deref()?);
        Some(scope_of(source, session, self.thread.as_deref()))
    }
}

/// The input number of a record key `@<input>:<offset>` (a call opened without an id).
pub(super) fn key_input_number(key: &str) -> Option<u16> {
    let (number, offset) = key.strip_prefix('@')?.split_once(':')?;
    offset.parse::<i64>().ok()?;
    number.parse().ok()
}

/// The facts a record's content holds ([`fact_held_hash`]): its hook decisions, its approval's
/// request and its decision.
pub(super) fn facts_held(spec: Option<&SpecHead>, status: Option<&StatusHead>) -> Vec<u64> {
    let mut held: Vec<u64> = status
        .iter()
        .flat_map(|s| &s.hook_decisions)
        .map(|e| fact_held_hash(Some(e), None))
        .collect();
    if let Some(a) = spec.and_then(|s| s.approval.as_ref()) {
        if let Some(at) = a.requested_at {
            held.push(fact_held_hash(None, Some(("requested", at.millis()))));
        }
        if let Some(at) = a.approved_at {
            held.push(fact_held_hash(None, Some((a.status.as_str(), at.millis()))));
        }
    }
    held
}
