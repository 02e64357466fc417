//! The record as one line of JSON, written straight into a buffer: byte for byte what serde_json
//! writes for it (a test holds the two equal), but the field names are constants, so only the
//! values go through JSON escaping.

use super::{
    Correlation, Metadata, Origin, Provenance, ReplayPolicy, Spec, Status, ToolCallRecord,
};
use crate::ids::{CallId, ThreadId, TurnId};
use crate::json::Json;
use crate::jsonwrite::{key, Writer};
use serde_json::{Map, Value};

impl ToolCallRecord {
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
        let mut w = Writer::new(std::mem::take(out));
        self.write_json(&mut w);
        *out = w.into_inner();
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
            + self.provenance.size_hint()
    }

    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key(key!("apiVersion")).str(&self.api_version);
        o.key(key!("kind")).str(&self.kind);
        self.metadata.write_json(o.key(key!("metadata")));
        o.str_if_some(
            key!("streamId"),
            self.stream_id.as_ref().map(CallId::as_str),
        );
        if let Some(c) = &self.checksum {
            // Hex digits only.
            o.key(key!("checksum")).quoted(c.as_str());
        }
        o.key(key!("createdAt")).time(self.created_at);
        o.key(key!("updatedAt")).time(self.updated_at);
        self.spec.write_json(o.key(key!("spec")));
        self.status.write_json(o.key(key!("status")));
        self.correlation.write_json(o.key(key!("correlation")));
        o.key(key!("replay")).raw(match self.replay {
            ReplayPolicy::Free => "\"free\"",
            ReplayPolicy::RequiresOverride => "\"requires_override\"",
        });
        o.value_if_some(key!("attributes"), self.attributes.as_ref());
        if !self.provenance.is_empty() {
            self.provenance.write_json(o.key(key!("provenance")));
        }
        if !self.redacted.is_empty() {
            o.key(key!("redacted")).value(&self.redacted);
        }
        o.end();
    }
}

impl Provenance {
    fn size_hint(&self) -> usize {
        self.0
            .iter()
            .map(|o| {
                let name = match o {
                    Origin::Topic(t) => t.topic.len(),
                    Origin::Lines(f) => f.file.len(),
                    Origin::Events(f) => f.file.len(),
                    Origin::Input(_) => 0,
                };
                48 + name + 12 * o.positions().len()
            })
            .sum()
    }

    fn write_json(&self, w: &mut Writer) {
        w.raw("[");
        for (i, origin) in self.0.iter().enumerate() {
            w.raw(if i == 0 { "{" } else { ",{" });
            let positions = match origin {
                Origin::Topic(t) => {
                    w.raw("\"topic\":");
                    w.str(&t.topic);
                    w.raw(",\"partition\":");
                    w.int(i64::from(t.partition));
                    w.raw(",\"offsets\":[");
                    &t.offsets
                }
                Origin::Lines(f) => {
                    w.raw("\"file\":");
                    w.str(&f.file);
                    w.raw(",\"lines\":[");
                    &f.lines
                }
                Origin::Events(f) => {
                    w.raw("\"file\":");
                    w.str(&f.file);
                    w.raw(",\"events\":[");
                    &f.events
                }
                Origin::Input(n) => {
                    w.raw("\"input\":");
                    w.int(i64::from(n.input));
                    w.raw(",\"offsets\":[");
                    &n.offsets
                }
            };
            for (j, p) in positions.iter().enumerate() {
                if j > 0 {
                    w.raw(",");
                }
                w.int(*p);
            }
            w.raw("]}");
        }
        w.raw("]");
    }
}

impl Metadata {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        let mut uuid = uuid::Uuid::encode_buffer();
        // Hex digits and hyphens only.
        o.key(key!("name"))
            .quoted(self.name.0.hyphenated().encode_lower(&mut uuid));
        o.key(key!("revision")).uint(u64::from(self.revision));
        o.key(key!("source")).str(self.source.as_str());
        o.key(key!("session")).str(self.session.as_str());
        o.str_if_some(key!("thread"), self.thread.as_ref().map(ThreadId::as_str));
        o.str_if_some(key!("turn"), self.turn.as_ref().map(TurnId::as_str));
        o.end();
    }
}

impl Spec {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        for (key, r) in [
            (key!("executionRef"), &self.execution_ref),
            (key!("agentRef"), &self.agent_ref),
            (key!("toolRef"), &self.tool_ref),
        ] {
            if let Some(r) = r {
                let mut n = o.key(key).object();
                n.key(key!("name")).str(&r.name);
                n.end();
            }
        }
        if let Some(input) = &self.input {
            o.key(key!("input")).raw(input.as_str());
        }
        let se = &self.side_effects;
        let mut s = o.key(key!("sideEffects")).object();
        if let Some(level) = se.level {
            s.key(key!("level")).quoted(level.as_str());
        }
        if let Some(i) = se.idempotent {
            s.key(key!("idempotent")).bool(i);
        }
        s.str_if_some(key!("idempotencyKey"), se.idempotency_key.as_deref());
        s.end();
        if let Some(a) = &self.approval {
            let mut p = o.key(key!("approval")).object();
            p.key(key!("required")).bool(a.required);
            p.key(key!("status")).quoted(a.status.as_str());
            p.time_if_some(key!("requestedAt"), a.requested_at);
            p.str_if_some(key!("approvedBy"), a.approved_by.as_deref());
            p.time_if_some(key!("approvedAt"), a.approved_at);
            p.str_if_some(key!("reason"), a.reason.as_deref());
            p.end();
        }
        o.value_if_some(key!("hookContext"), self.hook_context.as_ref());
        o.end();
    }
}

impl Status {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key(key!("phase")).quoted(self.phase.as_str());
        o.time_if_some(key!("startedAt"), self.started_at);
        o.time_if_some(key!("completedAt"), self.completed_at);
        if let Some(d) = self.duration_ms {
            o.key(key!("durationMs")).uint(d);
        }
        if let Some(out) = &self.output {
            o.key(key!("output")).raw(out.as_str());
        }
        o.key(key!("isError")).bool(self.is_error);
        if !self.hook_decisions.is_empty() {
            let w = o.key(key!("hookDecisions"));
            w.raw("[");
            for (i, h) in self.hook_decisions.iter().enumerate() {
                if i > 0 {
                    w.raw(",");
                }
                let mut d = w.object();
                d.key(key!("hook")).str(&h.hook);
                d.key(key!("decision")).quoted(h.decision.as_str());
                d.str_if_some(key!("policyId"), h.policy_id.as_deref());
                d.str_if_some(key!("policyVersion"), h.policy_version.as_deref());
                d.str_if_some(key!("reason"), h.reason.as_deref());
                d.key(key!("at")).time(h.at);
                d.end();
            }
            w.raw("]");
        }
        o.str_if_some(key!("reason"), self.reason.as_deref());
        o.end();
    }
}

impl Correlation {
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key(key!("strategy")).quoted(self.strategy.as_str());
        o.key(key!("confidence")).float(self.confidence);
        o.key(key!("candidates")).uint(u64::from(self.candidates));
        o.key(key!("eventsMerged"))
            .uint(u64::from(self.events_merged));
        o.key(key!("duplicates")).uint(u64::from(self.duplicates));
        o.key(key!("attempts")).uint(u64::from(self.attempts));
        o.key(key!("key")).str(&self.key);
        o.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ApprovalDecision, HookVerdict, SideEffectLevel, SideEffects};
    use crate::ids::{CallId, RecordId, SessionId, Source, ThreadId, TurnId};
    use crate::record::{
        ApprovalState, HookDecisionEntry, Phase, Ref, Strategy, API_VERSION, KIND,
    };
    use crate::time::Timestamp;
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
                    &Source::new(s[0].as_str()),
                    &SessionId::new(s[1].as_str()),
                    None,
                    &s[2],
                ),
                revision: n[0] as u32,
                source: Source::new(s[0].as_str()),
                session: SessionId::new(s[1].as_str()),
                thread: pick(0, &s[2]).map(ThreadId::from),
                turn: pick(1, &s[3]).map(TurnId::from),
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
            provenance: provenance(s, n, bits),
            redacted: if on(31) {
                vec![format!("spec.input/{}", s[6]), "status.output".into()]
            } else {
                Vec::new()
            },
        }
    }

    /// No provenance, or one of every shape, named by the strings.
    fn provenance(s: &[String; 8], n: [u64; 4], bits: u32) -> Provenance {
        use crate::record::{FileEvents, FileLines, TopicOffsets};
        if bits & (1 << 30) == 0 {
            return Provenance::default();
        }
        let offsets = vec![0, n[0] as i64, -(n[1] as i64), i64::MAX, i64::MIN];
        let mut p = Provenance::from_positions(&mut [(0, 1), (7, n[2] as i64), (7, 0)]);
        let mut at = 0;
        p.name(|input, positions| {
            at += 1;
            match at % 3 {
                1 => Origin::Topic(TopicOffsets {
                    topic: s[input as usize].as_str().into(),
                    partition: n[3] as i32,
                    offsets: offsets.clone(),
                }),
                2 => Origin::Lines(FileLines {
                    file: s[7].as_str().into(),
                    lines: positions,
                }),
                _ => Origin::Events(FileEvents {
                    file: s[6].as_str().into(),
                    events: positions,
                }),
            }
        });
        if bits & (1 << 31) != 0 {
            p.0.extend(Provenance::from_positions(&mut [(u16::MAX, 3)]).0);
        }
        p
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
