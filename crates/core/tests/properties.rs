//! Property tests of the core against a simple model (ARCHITECTURE.md §4 invariants):
//!
//! (a) every announce ends in exactly one terminal record and every unmatched completion in one
//!     Orphaned record;
//! (b) every input event is accounted for — merged into a record, or refused/late with a reason;
//! (c) with ids present, any interleaving of announces and completions gives the same records;
//! (d) restoring from the changelog at any point and continuing gives the same records as never
//!     stopping;
//! (e) the end of the input publishes what moving stream time to the end of time does.
//!
//! Each property runs at least 1,000 cases (more with `PROPTEST_CASES`).

mod common;

use common::*;
use proptest::prelude::{
    any, prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig,
};
use proptest::strategy::Strategy as Gen;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use toolcalls_core::{replay, Config, Correlator, Effects, FinishMode, Outcome, Position};
use toolcalls_model::record::Provenance;
use toolcalls_model::{
    Announce, Completion, Event, Phase, RecordId, SideEffectLevel, SideEffects, Strategy,
    Timestamp, ToolCallRecord,
};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .max(1_000)
}

/// One generated call of a session.
#[derive(Debug, Clone)]
struct CallSpec {
    session: u8,
    turn: u8,
    tool: u8,
    args: u8,
    with_id: bool,
    announce: bool,
    completes: bool,
    is_error: bool,
    /// What the completion carries besides its id: 0 tool+args, 1 tool, 2 nothing.
    hints: u8,
    delay: u16,
    dup_announce: bool,
    dup_completion: bool,
    idem: Option<u8>,
}

fn call_spec(ids: bool) -> impl Gen<Value = CallSpec> {
    (
        (
            0u8..2,
            0u8..2,
            0u8..3,
            0u8..3,
            prop::bool::weighted(if ids { 1.0 } else { 0.6 }),
        ),
        (
            prop::bool::weighted(0.95),
            prop::bool::weighted(0.9),
            prop::bool::weighted(0.1),
            0u8..3,
            0u16..400,
        ),
        (
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.1, 0u8..2),
        ),
    )
        .prop_map(
            |(
                (session, turn, tool, args, with_id),
                (announce, completes, is_error, hints, delay),
                (dup_announce, dup_completion, idem),
            )| CallSpec {
                session,
                turn,
                tool,
                args,
                with_id,
                announce,
                completes,
                is_error,
                hints,
                delay,
                dup_announce,
                dup_completion,
                idem,
            },
        )
}

const TOOLS: [&str; 3] = ["Read", "Bash", "Edit"];

fn args_of(n: u8) -> serde_json::Value {
    match n {
        0 => json!({"path": "/a"}),
        1 => json!({"cmd": "ls -la", "n": 1.5}),
        _ => json!("{\"b\":[1,2],\"a\":\"ü\"}"),
    }
}

/// Announce and completion events of the calls, each stream in event-time order.
fn streams(calls: &[CallSpec], turn_ends: bool) -> (Vec<Event>, Vec<Event>) {
    let mut announces = Vec::new();
    let mut completions = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let at = i as i64 * 10;
        let mut base = ev(&format!("s{}", c.session)).turn(&format!("t{}", c.turn));
        if c.with_id {
            base = base.id(&format!("id{i}"));
        }
        if c.announce {
            let a = Announce {
                tool: TOOLS[c.tool as usize].into(),
                args: Some(args_of(c.args).into()),
                side_effects: c.idem.map(|k| SideEffects {
                    level: Some(SideEffectLevel::Write),
                    idempotent: Some(false),
                    idempotency_key: Some(format!("key{k}")),
                }),
                ..Default::default()
            };
            announces.push(base.clone().at(at).announce_with(a.clone()));
            if c.dup_announce {
                announces.push(base.clone().at(at + 1).announce_with(a));
            }
        }
        if c.completes {
            let tool = TOOLS[c.tool as usize].to_owned();
            let comp = Completion {
                tool: (c.hints < 2).then(|| tool.clone()),
                args: (c.hints == 0).then(|| args_of(c.args).into()),
                result: Some(json!({"i": i}).into()),
                is_error: c.is_error,
                ..Default::default()
            };
            let done_at = at + i64::from(c.delay);
            completions.push(base.clone().at(done_at).completion(comp.clone()));
            if c.dup_completion {
                completions.push(base.clone().at(done_at + 1).completion(comp));
            }
        }
    }
    completions.sort_by_key(|e| e.time);
    if turn_ends {
        // A turn_end for s0/t0 in the middle of the announce stream.
        let mid = announces.len() / 2;
        announces.insert(mid, ev("s0").turn("t0").at(mid as i64 * 10).turn_end());
    }
    (announces, completions)
}

/// Merges the two topic streams by a sequence of coin flips, as a consumer reading both would.
fn interleave(a: Vec<Event>, b: Vec<Event>, flips: &[bool]) -> Vec<Event> {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            _ => flips.get(i).copied().unwrap_or(true),
        };
        i += 1;
        out.push(if take_a {
            a.next().unwrap()
        } else {
            b.next().unwrap()
        });
    }
    out
}

/// Short deadlines, so timeouts, orphans and turn ends fire in the middle of the stream.
fn tight() -> Config {
    Config {
        call_timeout_ms: 300,
        turn_grace_ms: 50,
        orphan_grace_ms: 150,
        idempotency_window_ms: 100,
        dedupe_window_ms: 1_000_000,
        max_pending: 12,
        max_pending_bytes: 64 << 20,
        max_remembered: 1_000,
        // Small enough that notes of dropped sessions go past it.
        max_forgotten_sessions: 2,
        // Small enough that facts are refused now and then.
        max_facts_bytes: 1_000,
        session_idle_ms: 200,
        max_disorder_ms: 0,
        input_topics: 1,
    }
}

/// Deadlines longer than any generated stream: nothing fires before the end.
fn loose() -> Config {
    Config {
        call_timeout_ms: 1_000_000,
        orphan_grace_ms: 1_000_000,
        max_pending: 10_000,
        ..tight()
    }
}

/// The latest revision of every record, by id.
fn latest(records: &[ToolCallRecord]) -> BTreeMap<RecordId, &ToolCallRecord> {
    let mut m = BTreeMap::new();
    for r in records {
        let e = m.entry(r.id()).or_insert(r);
        if r.metadata.revision >= e.metadata.revision {
            *e = r;
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// (a) One terminal record per announced call, one Orphaned record per unmatched completion.
    #[test]
    fn a_every_call_ends_in_exactly_one_terminal_record(
        calls in prop::collection::vec(call_spec(false), 0..25),
        flips in prop::collection::vec(any::<bool>(), 0..80),
        ids in any::<bool>(),
    ) {
        // No duplicates or idempotency keys here, so each generated call is one call; a source
        // either has ids or has none (mixed sources are covered by (b) and (d)).
        let calls: Vec<CallSpec> = calls
            .into_iter()
            .map(|c| CallSpec { dup_announce: false, dup_completion: false, idem: None, with_id: ids, ..c })
            .collect();
        let (a, b) = streams(&calls, false);
        let run = replay(&loose(), interleave(a, b, &flips), FinishMode::Deadlines);

        let mut seen = HashSet::new();
        for r in &run.records {
            prop_assert!(r.status.phase.is_terminal());
            prop_assert!(seen.insert(r.id()), "record {} published twice", r.id());
        }
        let announced = calls.iter().filter(|c| c.announce).count();
        let completions = calls.iter().filter(|c| c.completes).count();
        let terminal = run.records.iter().filter(|r| r.status.phase != Phase::Orphaned).count();
        let orphans = run.records.iter().filter(|r| r.status.phase == Phase::Orphaned).count();
        let linked = run.records.iter().filter(|r| r.correlation.strategy != Strategy::Unmatched).count();
        prop_assert_eq!(terminal, announced, "one terminal record per announce");
        prop_assert_eq!(orphans + linked, completions, "every completion is linked or orphaned, once");
        // With ids, the id decides: calls with an id end with their own result.
        for (i, c) in calls.iter().enumerate() {
            if c.with_id && c.announce && c.completes {
                let id = RecordId::derive(&"test".into(), &format!("s{}", c.session).into(), None, &format!("id{i}"));
                let r = run.records.iter().find(|r| r.id() == id).expect("record of an id'd call");
                prop_assert_eq!(r.status.output.as_ref().map(|o| o.to_value()), Some(json!({"i": i})));
                prop_assert_eq!(r.correlation.strategy, Strategy::CallId);
            }
        }
    }

    /// (b) Every input event is accounted for: merged into a record, or late / refused.
    #[test]
    fn b_every_event_is_accounted_for(
        calls in prop::collection::vec(call_spec(false), 0..25),
        flips in prop::collection::vec(any::<bool>(), 0..80),
        tight_deadlines in any::<bool>(),
    ) {
        let (a, b) = streams(&calls, true);
        let events = interleave(a, b, &flips);
        let n = events.len();
        let config = if tight_deadlines { tight() } else { loose() };
        let run = replay(&config, events, FinishMode::Deadlines);
        prop_assert_eq!(run.outcomes.len(), n);
        let records = latest(&run.records);
        let merged: u64 = records.values().map(|r| u64::from(r.correlation.events_merged)).sum();
        let count = |f: fn(&Outcome) -> bool| run.outcomes.iter().filter(|o| f(o)).count() as u64;
        let outside = count(|o| matches!(o, Outcome::Late | Outcome::Rejected(_) | Outcome::Applied));
        prop_assert_eq!(merged + outside, n as u64, "outcomes: {:?}", run.outcomes);
        let dups: u64 = records.values().map(|r| u64::from(r.correlation.duplicates)).sum();
        prop_assert_eq!(dups, count(|o| matches!(o, Outcome::Duplicate)));
        let retries: u64 = records.values().map(|r| u64::from(r.correlation.attempts - 1)).sum();
        prop_assert_eq!(retries, count(|o| matches!(o, Outcome::Collapsed)));
        // Provenance: every event merged into a record is listed by exactly that record (its
        // latest revision), and no other event is.
        let mut claimed: HashMap<i64, RecordId> = HashMap::new();
        for r in records.values() {
            prop_assert_eq!(r.provenance.len() as u64, u64::from(r.correlation.events_merged));
            for origin in &r.provenance.0 {
                for &offset in origin.positions() {
                    prop_assert!(claimed.insert(offset, r.id()).is_none(), "position {} in two records", offset);
                }
            }
        }
        for (i, o) in run.outcomes.iter().enumerate() {
            let merged = !matches!(o, Outcome::Late | Outcome::Rejected(_) | Outcome::Applied);
            prop_assert_eq!(claimed.contains_key(&(i as i64)), merged, "position {}: {:?}", i, o);
        }
    }

    /// (c) With ids on every event, the arrival order does not change the records.
    #[test]
    fn c_with_ids_any_interleaving_gives_the_same_records(
        calls in prop::collection::vec(call_spec(true), 1..20),
        order in any::<u64>(),
    ) {
        let calls: Vec<CallSpec> = calls.into_iter().map(|c| CallSpec { dup_announce: false, dup_completion: false, idem: None, ..c }).collect();
        let (a, b) = streams(&calls, false);
        let in_order = interleave(a.clone(), b.clone(), &[]);
        let mut shuffled = in_order.clone();
        // A deterministic shuffle from the generated seed; `from[j]` is the position in order of
        // the event shuffled to `j`.
        let mut from: Vec<i64> = (0..shuffled.len() as i64).collect();
        let mut seed = order | 1;
        for i in (1..shuffled.len()).rev() {
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
            let j = (seed % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
            from.swap(i, j);
        }
        // Records by id, their provenance as positions of the events in order.
        let sorted = |events: Vec<Event>, from: &[i64]| {
            let mut r = replay(&loose(), events, FinishMode::Deadlines).records;
            for r in &mut r {
                let mut positions: Vec<(u16, i64)> = r
                    .provenance
                    .0
                    .iter()
                    .flat_map(|o| o.positions().iter().map(|&p| (0u16, from[p as usize])))
                    .collect();
                r.provenance = Provenance::from_positions(&mut positions);
            }
            r.sort_by_key(|r| r.id());
            r
        };
        let identity: Vec<i64> = (0..in_order.len() as i64).collect();
        prop_assert_eq!(sorted(in_order, &identity), sorted(shuffled, &from));
    }

    /// (d) Restore from the changelog at any point, continue, and get what never stopping gives.
    #[test]
    fn d_restore_then_continue_equals_never_stopping(
        calls in prop::collection::vec(call_spec(false), 0..25),
        flips in prop::collection::vec(any::<bool>(), 0..80),
        split in any::<prop::sample::Index>(),
        batch in 1usize..6,
        tight_deadlines in any::<bool>(),
        two_topics in any::<bool>(),
        window in prop_oneof![Just(0u64), 1u64..300],
    ) {
        let (a, b) = streams(&calls, true);
        let events = interleave(a, b, &flips);
        let mut config = if tight_deadlines { tight() } else { loose() };
        // A reorder window holds events across the stop: the changelog carries them.
        config.max_disorder_ms = window;
        // Events alternate between two input topics; with `input_topics: 2` stream time is their
        // watermark.
        config.input_topics = if two_topics { 2 } else { 1 };
        let split = if events.is_empty() { 0 } else { split.index(events.len() + 1) };
        let pos = |i: usize| Position::new((i % 2) as u16, i as i64);

        let mut never = Correlator::new(config.clone());
        let mut never_out = Effects::default();
        let mut never_outcomes = Vec::new();
        for (i, e) in events.iter().cloned().enumerate() {
            never_outcomes.push(never.apply(e, pos(i), &mut never_out));
            if i % 7 == 3 { never.advance(e_time(&events, i), &mut never_out); }
        }
        never.release_all(&mut never_out);
        never.advance(Timestamp::from_millis(i64::MAX), &mut never_out);

        // The same run, writing its changelog in batches into a compacted "topic", stopped at `split`.
        let mut first = Correlator::new(config.clone());
        let mut out = Effects::default();
        let mut outcomes = Vec::new();
        let mut topic: HashMap<String, Vec<u8>> = HashMap::new();
        // A tombstone only ever removes a value written before: an entry that opened and closed
        // between two flushes writes nothing (and the restore below shows nothing was missed).
        let flush = |c: &mut Correlator, topic: &mut HashMap<String, Vec<u8>>| {
            for op in c.take_changelog() {
                match op.value {
                    Some(v) => { topic.insert(op.key, v); }
                    None => assert!(topic.remove(&op.key).is_some(), "tombstone for `{}`, never written", op.key),
                }
            }
        };
        for (i, e) in events.iter().take(split).cloned().enumerate() {
            outcomes.push(first.apply(e, pos(i), &mut out));
            if i % 7 == 3 { first.advance(e_time(&events, i), &mut out); }
            if i % batch == 0 { flush(&mut first, &mut topic); }
            // In debug builds this also checks the running estimate against its entries.
            first.pending_bytes();
        }
        flush(&mut first, &mut topic);
        let held = |c: &Correlator| { let mut h: Vec<_> = c.held_positions().collect(); h.sort(); h };
        let stopped = (first.pending_bytes(), first.pending_views().collect::<Vec<_>>(), held(&first));
        drop(first);
        let mut second = Correlator::restore(config, topic).expect("restore");
        prop_assert_eq!(stopped, (second.pending_bytes(), second.pending_views().collect::<Vec<_>>(), held(&second)));
        for (i, e) in events.iter().cloned().enumerate().skip(split) {
            outcomes.push(second.apply(e, pos(i), &mut out));
            if i % 7 == 3 { second.advance(e_time(&events, i), &mut out); }
            second.pending_bytes();
        }
        second.release_all(&mut out);
        second.advance(Timestamp::from_millis(i64::MAX), &mut out);
        prop_assert_eq!(outcomes, never_outcomes);
        let released = |out: &Effects| out.released.iter().map(|r| (r.pos, r.outcome)).collect::<Vec<_>>();
        prop_assert_eq!(released(&out), released(&never_out));
        // The same records, in the same order within each session. Across sessions, what one
        // step closes in several idle sessions comes session by session, in an order the restore
        // does not keep (nor need to: records are keyed per call).
        let by_session = |records: Vec<ToolCallRecord>| {
            let mut records = records;
            records.sort_by(|a, b| a.metadata.session.cmp(&b.metadata.session));
            records
        };
        prop_assert_eq!(by_session(out.records), by_session(never_out.records));
    }

    /// (e) The end of the input publishes what moving stream time to the end of time does, in the
    /// same order, though it leaves remembered calls remembered instead of forgetting each.
    #[test]
    fn e_end_of_input_closes_as_the_end_of_time_does(
        calls in prop::collection::vec(call_spec(false), 0..25),
        flips in prop::collection::vec(any::<bool>(), 0..80),
        tight_deadlines in any::<bool>(),
        window in prop_oneof![Just(0u64), 1u64..300],
    ) {
        let (a, b) = streams(&calls, true);
        let events = interleave(a, b, &flips);
        let mut config = if tight_deadlines { tight() } else { loose() };
        config.max_disorder_ms = window;
        let run = |end: fn(&mut Correlator, &mut Effects)| {
            let mut c = Correlator::new(config.clone());
            let mut out = Effects::default();
            for (i, e) in events.iter().cloned().enumerate() {
                c.apply(e, Position::new(0, i as i64), &mut out);
                if i % 7 == 3 { c.advance(e_time(&events, i), &mut out); }
            }
            c.release_all(&mut out);
            let before = out.records.len();
            end(&mut c, &mut out);
            let released: Vec<_> = out.released.iter().map(|r| (r.pos, r.outcome)).collect();
            (out.records, before, released, c.pending_views().count())
        };
        let ended = run(|c, out| c.end_of_input(out));
        let advanced = run(|c, out| c.advance(Timestamp::from_millis(i64::MAX), out));
        prop_assert_eq!(ended, advanced);
    }
}

/// A punctuation time a little after event `i` (an idle partition's wall clock).
fn e_time(events: &[Event], i: usize) -> Timestamp {
    events[i].time.plus_millis(120)
}
