//! The ToolCall record: what the processor publishes, one per call.
//!
//! Shaped after the joch.dev `ToolCall` resource (`apiVersion`, `kind`, `metadata`, `spec`, `status`)
//! with the nhtio stream fields (`streamId`, `checksum`, `createdAt`, `updatedAt`) and a
//! `correlation` block that says how the call's events were linked and how sure that link is.
//! The record key on the records topic is `metadata.name`, a deterministic [`RecordId`].

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

    /// The record as one line of JSON: byte for byte what `serde_json::to_vec` writes for it (a
    /// test holds the two equal), written straight into a buffer sized up front — the field names
    /// are constants, so only the values go through JSON escaping.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// [`encode`](Self::encode), appended to `out` (so a caller can reuse one buffer).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.size_hint());
        let mut w = Writer(std::mem::take(out), TimeTexts::default());
        self.write_json(&mut w);
        *out = w.0;
    }

    /// About the length of the encoded record (a little more, so the buffer does not grow).
    fn size_hint(&self) -> usize {
        let opt = |s: Option<&str>| s.map_or(0, str::len);
        let m = &self.metadata;
        let spec = &self.spec;
        let status = &self.status;
        let map = |m: Option<&Map<String, Value>>| m.map_or(0, |m| 64 + 64 * m.len());
        640 + m.source.0.len()
            + m.session.0.len()
            + opt(m.thread.as_ref().map(|t| t.as_str()))
            + opt(m.turn.as_ref().map(|t| t.as_str()))
            + opt(self.stream_id.as_ref().map(|c| c.as_str()))
            + opt(self.checksum.as_ref().map(|c| c.as_str()))
            + opt(spec.execution_ref.as_ref().map(|r| r.name.as_str()))
            + opt(spec.agent_ref.as_ref().map(|r| r.name.as_str()))
            + opt(spec.tool_ref.as_ref().map(|r| r.name.as_str()))
            + opt(spec.input.as_ref().map(Json::as_str)) * 9 / 8
            + opt(spec.side_effects.idempotency_key.as_deref())
            + spec.approval.as_ref().map_or(0, |_| 256)
            + map(spec.hook_context.as_ref())
            + opt(status.output.as_ref().map(Json::as_str)) * 9 / 8
            + status.hook_decisions.len() * 256
            + opt(status.reason.as_deref())
            + self.correlation.key.len()
            + map(self.attributes.as_ref())
    }

    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key("apiVersion").str(&self.api_version);
        o.key("kind").str(&self.kind);
        self.metadata.write_json(o.key("metadata"));
        if let Some(id) = &self.stream_id {
            o.key("streamId").str(id.as_str());
        }
        if let Some(c) = &self.checksum {
            // Hex digits only.
            o.key("checksum").quoted(c.as_str());
        }
        o.key("createdAt").time(self.created_at);
        o.key("updatedAt").time(self.updated_at);
        self.spec.write_json(o.key("spec"));
        self.status.write_json(o.key("status"));
        self.correlation.write_json(o.key("correlation"));
        o.key("replay").raw(match self.replay {
            ReplayPolicy::Free => "\"free\"",
            ReplayPolicy::RequiresOverride => "\"requires_override\"",
        });
        if let Some(a) = &self.attributes {
            o.key("attributes").value(a);
        }
        o.end();
    }
}

impl Metadata {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        let mut uuid = uuid::Uuid::encode_buffer();
        // Hex digits and hyphens only.
        o.key("name")
            .quoted(self.name.0.hyphenated().encode_lower(&mut uuid));
        o.key("revision").value(&self.revision);
        o.key("source").str(self.source.as_str());
        o.key("session").str(self.session.as_str());
        if let Some(t) = &self.thread {
            o.key("thread").str(t.as_str());
        }
        if let Some(t) = &self.turn {
            o.key("turn").str(t.as_str());
        }
        o.end();
    }
}

impl Spec {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        for (key, r) in [
            ("executionRef", &self.execution_ref),
            ("agentRef", &self.agent_ref),
            ("toolRef", &self.tool_ref),
        ] {
            if let Some(r) = r {
                let mut n = o.key(key).object();
                n.key("name").str(&r.name);
                n.end();
            }
        }
        if let Some(input) = &self.input {
            o.key("input").raw(input.as_str());
        }
        let se = &self.side_effects;
        let mut s = o.key("sideEffects").object();
        if let Some(level) = se.level {
            s.key("level").quoted(level.as_str());
        }
        if let Some(i) = se.idempotent {
            s.key("idempotent").bool(i);
        }
        if let Some(k) = &se.idempotency_key {
            s.key("idempotencyKey").str(k);
        }
        s.end();
        if let Some(a) = &self.approval {
            let mut p = o.key("approval").object();
            p.key("required").bool(a.required);
            p.key("status").quoted(a.status.as_str());
            if let Some(t) = a.requested_at {
                p.key("requestedAt").time(t);
            }
            if let Some(by) = &a.approved_by {
                p.key("approvedBy").str(by);
            }
            if let Some(t) = a.approved_at {
                p.key("approvedAt").time(t);
            }
            if let Some(r) = &a.reason {
                p.key("reason").str(r);
            }
            p.end();
        }
        if let Some(h) = &self.hook_context {
            o.key("hookContext").value(h);
        }
        o.end();
    }
}

impl Status {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key("phase").quoted(self.phase.as_str());
        if let Some(t) = self.started_at {
            o.key("startedAt").time(t);
        }
        if let Some(t) = self.completed_at {
            o.key("completedAt").time(t);
        }
        if let Some(d) = self.duration_ms {
            o.key("durationMs").value(&d);
        }
        if let Some(out) = &self.output {
            o.key("output").raw(out.as_str());
        }
        o.key("isError").bool(self.is_error);
        if !self.hook_decisions.is_empty() {
            let w = o.key("hookDecisions");
            w.raw("[");
            for (i, h) in self.hook_decisions.iter().enumerate() {
                if i > 0 {
                    w.raw(",");
                }
                let mut d = w.object();
                d.key("hook").str(&h.hook);
                d.key("decision").quoted(h.decision.as_str());
                if let Some(p) = &h.policy_id {
                    d.key("policyId").str(p);
                }
                if let Some(p) = &h.policy_version {
                    d.key("policyVersion").str(p);
                }
                if let Some(r) = &h.reason {
                    d.key("reason").str(r);
                }
                d.key("at").time(h.at);
                d.end();
            }
            w.raw("]");
        }
        if let Some(r) = &self.reason {
            o.key("reason").str(r);
        }
        o.end();
    }
}

impl Correlation {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key("strategy").quoted(self.strategy.as_str());
        o.key("confidence").value(&self.confidence);
        o.key("candidates").value(&self.candidates);
        o.key("eventsMerged").value(&self.events_merged);
        o.key("duplicates").value(&self.duplicates);
        o.key("attempts").value(&self.attempts);
        o.key("key").str(&self.key);
        o.end();
    }
}

/// Compact JSON output, as serde_json's `to_vec` writes it.
/// The output, and the texts of the last two times written.
struct Writer(Vec<u8>, TimeTexts);

/// The last two times a record wrote, with their texts: a record's times repeat (`startedAt` is
/// usually `createdAt`, `completedAt` usually `updatedAt`, written in the order created, updated,
/// started, completed).
#[derive(Default)]
struct TimeTexts {
    slots: [Option<(Timestamp, [u8; 24])>; 2],
    next: usize,
}

impl Writer {
    /// Bytes that are already JSON.
    fn raw(&mut self, json: &str) {
        self.0.extend_from_slice(json.as_bytes());
    }

    /// A string that needs no escaping (an enum's name), in quotes.
    #[inline]
    fn quoted(&mut self, s: &str) {
        self.0.push(b'"');
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(b'"');
    }

    /// A string, escaped as serde_json escapes it.
    fn str(&mut self, s: &str) {
        if crate::canonical::needs_escape(s.as_bytes()) {
            self.value(s);
        } else {
            self.quoted(s);
        }
    }

    fn bool(&mut self, b: bool) {
        self.raw(if b { "true" } else { "false" });
    }

    fn time(&mut self, t: Timestamp) {
        let cached = self.1.slots.iter().flatten().find(|(at, _)| *at == t);
        let text = match cached {
            Some((_, text)) => *text,
            None => {
                let mut buf = [0u8; 24];
                if t.write_rfc3339(&mut buf).is_none() {
                    self.value(&t);
                    return;
                }
                let cache = &mut self.1;
                cache.slots[cache.next] = Some((t, buf));
                cache.next = (cache.next + 1) % cache.slots.len();
                buf
            }
        };
        // Digits and separators only: nothing to escape.
        self.0.push(b'"');
        self.0.extend_from_slice(&text);
        self.0.push(b'"');
    }

    /// Anything else, through serde_json itself.
    fn value<T: Serialize + ?Sized>(&mut self, v: &T) {
        serde_json::to_writer(&mut self.0, v).expect("record values always serialize");
    }

    fn object(&mut self) -> Object<'_> {
        self.0.push(b'{');
        Object {
            w: self,
            first: true,
        }
    }
}

/// An object being written: [`Object::key`] adds the separator and the (constant) key.
struct Object<'a> {
    w: &'a mut Writer,
    first: bool,
}

impl Object<'_> {
    #[inline]
    fn key(&mut self, key: &'static str) -> &mut Writer {
        if !self.first {
            self.w.0.push(b',');
        }
        self.first = false;
        self.w.quoted(key);
        self.w.0.push(b':');
        self.w
    }

    fn end(self) {
        self.w.0.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SideEffectLevel;
    use proptest::prelude::{any, prop_assert_eq, proptest};
    use serde_json::json;

    fn text(s: &str) -> String {
        s.to_owned()
    }

    fn record(s: &[String; 8], n: [u64; 4], bits: u32, confidence: f64) -> ToolCallRecord {
        let on = |i: u32| bits & (1 << i) != 0;
        let pick = |i: u32, v: &String| on(i).then(|| v.clone());
        let map = |v: &String| -> Map<String, Value> {
            let mut m = Map::new();
            m.insert(v.clone(), json!([v, 1.5, null, {"k": v}]));
            m.insert(text("n"), json!(12345678901234567u64));
            m
        };
        let ts = |ms: u64| Timestamp::from_millis(ms as i64 - 1_000_000);
        ToolCallRecord {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            metadata: Metadata {
                name: RecordId::derive(
                    &Source(s[0].clone()),
                    &SessionId(s[1].clone()),
                    None,
                    &s[2],
                ),
                revision: n[0] as u32,
                source: Source(s[0].clone()),
                session: SessionId(s[1].clone()),
                thread: pick(0, &s[2]).map(ThreadId),
                turn: pick(1, &s[3]).map(TurnId),
            },
            stream_id: pick(2, &s[4]).map(CallId),
            checksum: on(3).then(|| crate::checksum::checksum_of(&s[0], None)),
            created_at: ts(n[1]),
            updated_at: ts(n[2]),
            spec: Spec {
                execution_ref: pick(4, &s[5]).map(|name| Ref { name }),
                agent_ref: pick(5, &s[6]).map(|name| Ref { name }),
                tool_ref: pick(6, &s[7]).map(|name| Ref { name }),
                input: on(7).then(|| Json::from(json!({"a": s[0], "b": [1, 2.5e300]}))),
                side_effects: SideEffects {
                    level: on(8).then_some(
                        [
                            SideEffectLevel::None,
                            SideEffectLevel::Read,
                            SideEffectLevel::Write,
                            SideEffectLevel::ExternalWrite,
                            SideEffectLevel::Destructive,
                        ][n[3] as usize % 5],
                    ),
                    idempotent: on(9).then_some(on(10)),
                    idempotency_key: pick(11, &s[1]),
                },
                approval: on(12).then(|| ApprovalState {
                    required: on(13),
                    status: [
                        ApprovalDecision::Requested,
                        ApprovalDecision::Approved,
                        ApprovalDecision::Denied,
                    ][n[0] as usize % 3],
                    requested_at: on(14).then(|| ts(n[1])),
                    approved_by: pick(15, &s[2]),
                    approved_at: on(16).then(|| ts(n[2])),
                    reason: pick(17, &s[3]),
                }),
                hook_context: on(18).then(|| map(&s[4])),
            },
            status: Status {
                phase: Phase::ALL[n[1] as usize % Phase::ALL.len()],
                started_at: on(19).then(|| ts(n[2])),
                completed_at: on(20).then(|| ts(n[3])),
                duration_ms: on(21).then_some(n[3]),
                output: on(22).then(|| {
                    Json::parse(&format!(" {} ", serde_json::to_string(&s[5]).unwrap())).unwrap()
                }),
                is_error: on(23),
                hook_decisions: (0..(n[2] % 3))
                    .map(|i| HookDecisionEntry {
                        hook: s[6].clone(),
                        decision: [HookVerdict::Allow, HookVerdict::Deny, HookVerdict::Modify]
                            [i as usize],
                        policy_id: pick(24, &s[7]),
                        policy_version: pick(25, &s[0]),
                        reason: pick(26, &s[1]),
                        at: ts(n[0]),
                    })
                    .collect(),
                reason: pick(27, &s[2]),
            },
            correlation: Correlation {
                strategy: Strategy::ALL[n[2] as usize % Strategy::ALL.len()],
                confidence,
                candidates: n[1] as u32,
                events_merged: n[2] as u32,
                duplicates: n[3] as u32,
                attempts: n[0] as u32,
                key: s[3].clone(),
            },
            replay: if on(28) {
                ReplayPolicy::Free
            } else {
                ReplayPolicy::RequiresOverride
            },
            attributes: on(29).then(|| map(&s[5])),
        }
    }

    #[test]
    fn encode_writes_what_serde_writes() {
        let strings = [
            "claude-code",
            "session \"1\" \\ back",
            "line\nbreak\ttab\u{0}nul\u{1f}\u{7f}",
            "ünïcödé \u{2028} \u{2029} 😀",
            "",
            "toolu_01",
            "/",
            "</script>",
        ]
        .map(text);
        for bits in [0, u32::MAX, 0x5555_5555, 0xaaaa_aaaa] {
            for confidence in [1.0, 0.95, 0.3, 0.0, 1e-7, f64::NAN, f64::INFINITY] {
                let r = record(&strings, [3, 1_700_000_000_000, 7, 99], bits, confidence);
                let serde = serde_json::to_vec(&r).unwrap();
                assert_eq!(
                    String::from_utf8(r.encode()).unwrap(),
                    String::from_utf8(serde.clone()).unwrap()
                );
                let mut appended = b"prefix".to_vec();
                r.encode_into(&mut appended);
                assert_eq!(appended[..6], *b"prefix");
                assert_eq!(appended[6..], serde);
            }
        }
    }

    proptest! {
        #[test]
        fn encode_writes_what_serde_writes_for_any_record(
            s in proptest::array::uniform8(any::<String>()),
            n in proptest::array::uniform4(0u64..u64::MAX / 4),
            bits in any::<u32>(),
            confidence in any::<f64>(),
        ) {
            let r = record(&s, n, bits, confidence);
            prop_assert_eq!(r.encode(), serde_json::to_vec(&r).unwrap());
        }
    }
}
