//! Event builders shared by the core's tests.
#![allow(dead_code)]

use serde_json::Value;
use toolcalls_core::{Config, Correlator, Effects, Outcome, Position};
use toolcalls_model::*;

pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000 + ms)
}

/// A fluent event builder: `ev("s1").id("a").at(5).announce("Read", json!({…}))`.
#[derive(Clone)]
pub struct Ev {
    pub source: &'static str,
    pub session: String,
    pub thread: Option<String>,
    pub turn: Option<String>,
    pub call_id: Option<String>,
    pub time: i64,
}

pub fn ev(session: &str) -> Ev {
    Ev {
        source: "test",
        session: session.into(),
        thread: None,
        turn: None,
        call_id: None,
        time: 0,
    }
}

impl Ev {
    pub fn id(mut self, id: &str) -> Self {
        self.call_id = Some(id.into());
        self
    }
    pub fn turn(mut self, turn: &str) -> Self {
        self.turn = Some(turn.into());
        self
    }
    pub fn thread(mut self, thread: &str) -> Self {
        self.thread = Some(thread.into());
        self
    }
    pub fn at(mut self, ms: i64) -> Self {
        self.time = ms;
        self
    }
    pub fn source(mut self, source: &'static str) -> Self {
        self.source = source;
        self
    }
    pub fn event(self, body: EventBody) -> Event {
        Event {
            source: Source::from(self.source),
            session: SessionId::from(self.session),
            thread: self.thread.map(ThreadId::from),
            turn: self.turn.map(TurnId::from),
            call_id: self.call_id.map(CallId::from),
            time: t(self.time),
            attributes: None,
            body,
        }
    }
    pub fn announce(self, tool: &str, args: Value) -> Event {
        self.event(EventBody::Announce(Announce {
            tool: tool.into(),
            args: Some(args.into()),
            ..Default::default()
        }))
    }
    pub fn announce_with(self, a: Announce) -> Event {
        self.event(EventBody::Announce(a))
    }
    /// An announce of `send` to `x` with idempotency key `key`.
    pub fn announce_keyed(self, key: &str) -> Event {
        self.announce_with(Announce {
            tool: "send".into(),
            args: Some(serde_json::json!({"to": "x"}).into()),
            side_effects: Some(SideEffects {
                idempotency_key: Some(key.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
    /// A completion with only the envelope's hints (call id, turn).
    pub fn done(self, result: Value) -> Event {
        self.event(EventBody::Completion(Completion {
            result: Some(result.into()),
            ..Default::default()
        }))
    }
    pub fn done_tool(self, tool: &str, result: Value) -> Event {
        self.event(EventBody::Completion(Completion {
            tool: Some(tool.into()),
            result: Some(result.into()),
            ..Default::default()
        }))
    }
    pub fn done_args(self, tool: &str, args: Value, result: Value) -> Event {
        self.event(EventBody::Completion(Completion {
            tool: Some(tool.into()),
            args: Some(args.into()),
            result: Some(result.into()),
            ..Default::default()
        }))
    }
    pub fn completion(self, c: Completion) -> Event {
        self.event(EventBody::Completion(c))
    }
    pub fn error(self, result: Value) -> Event {
        self.event(EventBody::Completion(Completion {
            result: Some(result.into()),
            is_error: true,
            ..Default::default()
        }))
    }
    pub fn turn_end(self) -> Event {
        self.event(EventBody::TurnEnd(TurnEnd::default()))
    }
    pub fn turn_aborted(self) -> Event {
        self.event(EventBody::TurnAborted(TurnEnd {
            reason: Some("user interrupted".into()),
        }))
    }
    pub fn exec_start(self, checksum: Checksum) -> Event {
        self.event(EventBody::ExecutionStart(ExecutionStart {
            checksum,
            tool: None,
        }))
    }
    pub fn exec_end(self, checksum: Checksum, is_error: bool, duration_ms: u64) -> Event {
        self.event(EventBody::ExecutionEnd(ExecutionEnd {
            checksum,
            tool: None,
            is_error,
            started_at: None,
            duration_ms: Some(duration_ms),
        }))
    }
    pub fn approval(self, decision: ApprovalDecision, by: Option<&str>) -> Event {
        self.event(EventBody::Approval(Approval {
            tool: None,
            args: None,
            checksum: None,
            decision,
            by: by.map(str::to_owned),
            reason: None,
        }))
    }
    /// A hook decision that gives its reason.
    pub fn hook_because(self, hook: &str, reason: &str) -> Event {
        self.event(EventBody::HookDecision(HookDecision {
            tool: None,
            args: None,
            checksum: None,
            hook: hook.into(),
            decision: HookVerdict::Allow,
            policy_id: None,
            policy_version: None,
            reason: Some(reason.into()),
        }))
    }
    pub fn hook(self, hook: &str, decision: HookVerdict) -> Event {
        self.event(EventBody::HookDecision(HookDecision {
            tool: None,
            args: None,
            checksum: None,
            hook: hook.into(),
            decision,
            policy_id: Some("p1".into()),
            policy_version: Some("v3".into()),
            reason: None,
        }))
    }
}

/// A correlator with a short, test-friendly configuration and a running position counter.
pub struct Harness {
    pub c: Correlator,
    pub out: Effects,
    pub next: i64,
}

pub fn config() -> Config {
    Config {
        call_timeout_ms: 60_000,
        turn_grace_ms: 1_000,
        orphan_grace_ms: 5_000,
        idempotency_window_ms: 10_000,
        dedupe_window_ms: 20_000,
        max_pending: 1_000,
        max_pending_bytes: 64 << 20,
        max_remembered: 1_000,
        max_forgotten_sessions: 100,
        max_facts_bytes: 4 << 20,
        session_idle_ms: 30_000,
        max_disorder_ms: 0,
        input_topics: 1,
    }
}

impl Harness {
    pub fn new() -> Self {
        Self::with(config())
    }
    pub fn with(config: Config) -> Self {
        Harness {
            c: Correlator::new(config),
            out: Effects::default(),
            next: 0,
        }
    }
    pub fn apply(&mut self, e: Event) -> Outcome {
        let pos = Position::new(0, self.next);
        self.next += 1;
        self.c.apply(e, pos, &mut self.out)
    }
    pub fn advance(&mut self, ms: i64) {
        self.c.advance(t(ms), &mut self.out);
    }
    /// A correlator restored from everything this one wrote to its changelog (the latest value
    /// of each key, as a compacted topic keeps it), with the test config.
    pub fn restored(&mut self) -> Correlator {
        let latest: Vec<(String, Vec<u8>)> = self
            .c
            .take_changelog()
            .into_iter()
            .filter_map(|op| Some((op.key, op.value?)))
            .collect();
        Correlator::restore(config(), latest).unwrap()
    }
    /// Records published since the last call.
    pub fn take(&mut self) -> Vec<ToolCallRecord> {
        std::mem::take(&mut self.out.records)
    }
    pub fn one(&mut self) -> ToolCallRecord {
        let mut r = self.take();
        assert_eq!(r.len(), 1, "expected one record, got {r:#?}");
        r.remove(0)
    }
}
