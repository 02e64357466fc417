//! The ToolCall record of a call or of a waiting result, when it closes (or, for the query API,
//! while it is pending).

use super::merge::fold_approval;
use super::provenance;
use super::rules::Link;
use crate::state::{Call, Done, ExecEnd, Fact, ScopeKey, WaitingResult};
use std::sync::Arc;
use toolcalls_model::{
    ApprovalState, CallId, Correlation, HookDecisionEntry, Json, Metadata, Phase, RecordId, Ref,
    ReplayPolicy, Spec, Status, Strategy, Timestamp, ToolCallRecord, TurnId,
};

/// A record's timing and error flag: the result's own figures first, then what the execution
/// events said; a duration given by neither is the time from start to completion.
struct Timing {
    started_at: Option<Timestamp>,
    completed_at: Option<Timestamp>,
    duration_ms: Option<u64>,
    is_error: bool,
}

impl Timing {
    /// The timing of a result `done` (if any), given when the call `started` and the execution
    /// `end` the observability bus reported.
    fn of(done: Option<&Done>, started: Option<Timestamp>, end: Option<&ExecEnd>) -> Timing {
        let started_at = done.and_then(|d| d.started_at).or(started);
        let completed_at = done.map(|d| d.at).or(end.map(|e| e.at));
        let duration_ms = done
            .and_then(|d| d.duration_ms)
            .or(end.and_then(|e| e.duration_ms))
            .or_else(|| Some(completed_at?.millis_since(started_at?)));
        let is_error = done.map_or(end.is_some_and(|e| e.is_error), |d| d.is_error);
        Timing {
            started_at,
            completed_at,
            duration_ms,
            is_error,
        }
    }

    /// The record's status with this timing.
    fn into_status(
        self,
        phase: Phase,
        output: Option<Json>,
        hook_decisions: Vec<HookDecisionEntry>,
        reason: Option<String>,
    ) -> Status {
        Status {
            phase,
            started_at: self.started_at,
            completed_at: self.completed_at,
            duration_ms: self.duration_ms,
            output,
            is_error: self.is_error,
            hook_decisions,
            reason,
        }
    }
}

/// A record's metadata: its first revision, in `scope`.
fn metadata(name: RecordId, scope: &ScopeKey, turn: Option<Arc<str>>) -> Metadata {
    Metadata {
        name,
        revision: 1,
        source: scope.source.clone(),
        session: scope.session.clone(),
        thread: scope.thread.clone(),
        turn: turn.map(TurnId),
    }
}

pub(super) fn record_of_call(
    mut call: Call,
    scope: &ScopeKey,
    tool: String,
    done: Option<Done>,
    phase: Phase,
    reason: Option<&str>,
    link: Link,
) -> ToolCallRecord {
    let key = call.take_record_key();
    let provenance = provenance::of_call(&call, done.as_ref());
    let extras = call.extras.map(|x| *x).unwrap_or_default();
    // A call without a start of its own started when it was announced.
    let started = extras.started_at.or(Some(call.created_at));
    let timing = Timing::of(done.as_ref(), started, extras.exec_end.as_ref());
    let side_effects = extras.side_effects.unwrap_or_default();
    let replay = ReplayPolicy::derive(&side_effects);
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.into(),
        kind: toolcalls_model::record::KIND.into(),
        metadata: metadata(call.record_id, scope, call.turn),
        stream_id: call.has_id.then(|| CallId(key.clone())),
        checksum: call.checksum.map(|d| d.checksum()),
        created_at: call.created_at,
        updated_at: call.updated_at,
        spec: Spec {
            execution_ref: extras.execution.map(|name| Ref { name }),
            agent_ref: extras.agent.map(|name| Ref { name }),
            tool_ref: Some(Ref { name: tool }),
            input: call.args,
            side_effects,
            approval: extras.approval,
            hook_context: extras.hook_context,
        },
        status: timing.into_status(
            phase,
            done.and_then(|d| d.result),
            extras.hooks,
            reason.map(str::to_owned),
        ),
        correlation: Correlation {
            strategy: link.strategy,
            confidence: link.confidence(),
            candidates: link.candidates,
            events_merged: call.events,
            duplicates: call.duplicates,
            attempts: call.attempts,
            key,
        },
        replay,
        attributes: extras.attributes,
        provenance,
        redacted: Vec::new(),
    }
}

pub(super) fn record_of_waiting(
    waiting: WaitingResult,
    scope: &ScopeKey,
    phase: Phase,
    reason: &str,
) -> ToolCallRecord {
    let provenance = provenance::of_waiting(&waiting);
    let facts = FoldedFacts::of(waiting.facts);
    let done = waiting.done;
    let timing = Timing::of(done.as_ref(), facts.started_at, facts.exec_end.as_ref());
    let key = waiting.key.into_string();
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.into(),
        kind: toolcalls_model::record::KIND.into(),
        metadata: metadata(waiting.record_id, scope, waiting.turn),
        stream_id: waiting.has_id.then(|| CallId(key.clone())),
        checksum: waiting.checksum.map(|d| d.checksum()),
        created_at: waiting.first_at,
        updated_at: waiting.updated_at,
        spec: Spec {
            execution_ref: None,
            agent_ref: None,
            tool_ref: waiting.tool.map(|name| Ref {
                name: name.into_string(),
            }),
            input: waiting.args,
            side_effects: Default::default(),
            approval: facts.approval,
            hook_context: None,
        },
        status: timing.into_status(
            phase,
            done.and_then(|d| d.result),
            facts.hooks,
            Some(reason.to_owned()),
        ),
        correlation: Correlation {
            strategy: Strategy::Unmatched,
            confidence: 0.0,
            candidates: 0,
            events_merged: waiting.events,
            duplicates: waiting.duplicates,
            attempts: 1,
            key,
        },
        replay: ReplayPolicy::RequiresOverride,
        attributes: waiting.attributes,
        provenance,
        redacted: Vec::new(),
    }
}

/// The facts of a waiting result, folded as its record shows them.
struct FoldedFacts {
    approval: Option<ApprovalState>,
    hooks: Vec<HookDecisionEntry>,
    started_at: Option<Timestamp>,
    exec_end: Option<ExecEnd>,
}

impl FoldedFacts {
    fn of(facts: Vec<Fact>) -> FoldedFacts {
        let mut folded = FoldedFacts {
            approval: None,
            hooks: Vec::new(),
            started_at: None,
            exec_end: None,
        };
        for fact in facts {
            match fact {
                Fact::ExecStart { at } => folded.started_at = Some(at),
                Fact::ExecEnd { end, started_at } => {
                    folded.exec_end = Some(end);
                    folded.started_at = folded.started_at.or(started_at);
                }
                Fact::Approval {
                    at,
                    decision,
                    by,
                    reason,
                } => fold_approval(&mut folded.approval, at, decision, by, reason),
                Fact::Hook { entry } => folded.hooks.push(entry),
            }
        }
        folded
    }
}
