//! Fully populated events and records: every field set, so that every field is checked.

use serde_json::{json, Map, Value};
use toolcalls_model::record::{
    FileEvents, FileLines, Origin, Provenance, TopicOffsets, API_VERSION, KIND,
};
use toolcalls_model::{
    checksum_of, Announce, Approval, ApprovalDecision, ApprovalState, Completion, Correlation,
    Event, EventBody, EventKind, ExecutionEnd, ExecutionStart, HookDecision, HookDecisionEntry,
    HookVerdict, Metadata, Phase, RecordId, Ref, ReplayPolicy, SideEffectLevel, SideEffects, Spec,
    Status, Strategy, Timestamp, ToolCallRecord, TurnEnd,
};

use crate::target::{to_value, Target};

pub(crate) fn ts(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).expect("test timestamp")
}

pub(crate) fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// An event of `kind` with every field its kind has set (booleans `true`, so they are written).
/// Struct literals without `..Default::default()` make a new field a compile error here.
pub(crate) fn full_event(kind: EventKind) -> Event {
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
pub(crate) fn full_record() -> ToolCallRecord {
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
        provenance: Provenance(vec![
            Origin::Topic(TopicOffsets {
                topic: "toolcalls.announce".into(),
                partition: 3,
                offsets: vec![1200, 1201],
            }),
            Origin::Lines(FileLines {
                file: "session.jsonl".into(),
                lines: vec![7],
            }),
            Origin::Events(FileEvents {
                file: "rollout.jsonl".into(),
                events: vec![2],
            }),
        ]),
        redacted: vec!["spec.input/token".to_owned()],
    }
}

/// The fully populated value of a target, as JSON.
pub(crate) fn full_json(target: Target) -> Value {
    match target {
        Target::Event(kind) => to_value(&full_event(kind).encode()),
        Target::Record => to_value(&full_record().encode()),
    }
}

pub(crate) fn all_targets() -> Vec<Target> {
    let mut targets: Vec<Target> = EventKind::ALL.into_iter().map(Target::Event).collect();
    targets.push(Target::Record);
    targets
}
