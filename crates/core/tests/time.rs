//! Stream time: the partition's (not the session's), the watermark of several input topics, and
//! the punctuation of an idle partition. docs/ARCHITECTURE.md, Correlation → Time.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::{Correlator, Position};
use toolcalls_model::*;

#[test]
fn calls_time_out_by_their_sessions_clock_and_by_punctuation() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("A", json!({})));
    // Another session's traffic moves the partition's stream time, not this session's clock.
    h.apply(ev("other").id("z").at(60_000).announce("Z", json!({})));
    assert!(h.take().is_empty());
    // The session's own later events do.
    h.apply(ev("s").id("b").at(60_000).announce("B", json!({})));
    let r = h.one();
    assert_eq!(
        (r.status.phase, r.spec.tool_ref.unwrap().name.as_str()),
        (Phase::TimedOut, "A")
    );
    // An idle partition: only the punctuation moves time, and every session follows it.
    h.advance(119_999);
    assert!(h.take().is_empty());
    h.advance(120_000);
    assert_eq!(h.take().len(), 2, "B and Z");
    assert_eq!(h.c.stream_time(), Some(t(120_000)));
    // Punctuation never moves time backwards.
    h.advance(5);
    assert_eq!(h.c.stream_time(), Some(t(120_000)));
}

/// A backfill: sessions from different months share a partition. Each keeps the deadlines of its
/// own events; none is timed out by the other's time.
#[test]
fn sessions_from_different_months_keep_their_own_deadlines() {
    let month = 30 * 24 * 3600 * 1000;
    let mut h = Harness::new();
    h.apply(ev("old").id("a").at(0).announce("A", json!({})));
    h.apply(ev("new").id("x").at(month).announce("X", json!({})));
    h.apply(ev("old").id("b").at(1_000).announce("B", json!({})));
    h.apply(ev("new").id("x").at(month + 500).done(json!(1)));
    h.apply(ev("old").id("a").at(2_000).done(json!(1)));
    h.apply(ev("old").id("b").at(3_000).done(json!(2)));
    let phases: Vec<Phase> = h.take().iter().map(|r| r.status.phase).collect();
    assert_eq!(phases, [Phase::Succeeded; 3]);
    // The old session's call without a result times out by its own clock.
    h.apply(ev("old").id("c").at(4_000).announce("C", json!({})));
    h.apply(
        ev("new")
            .id("y")
            .at(month + 120_000)
            .announce("Y", json!({})),
    );
    assert!(h.take().is_empty());
    h.apply(
        ev("old")
            .id("d")
            .at(4_000 + 60_000)
            .announce("D", json!({})),
    );
    assert_eq!(h.one().status.phase, Phase::TimedOut);
}

/// With a wall clock (the processor), a session goes idle after `session_idle` of it without
/// events; its deadlines then follow the partition's stream time.
#[test]
fn a_quiet_session_goes_idle_by_the_wall_clock() {
    let mut h = Harness::new();
    let mut out = toolcalls_core::Effects::default();
    h.c.tick(t(1_000_000), &mut out);
    h.apply(ev("s").id("a").at(0).announce("A", json!({})));
    h.apply(ev("other").id("z").at(500_000).announce("Z", json!({})));
    h.c.tick(t(1_000_000 + 29_999), &mut out);
    assert!(
        out.records.is_empty() && h.take().is_empty(),
        "still active"
    );
    h.c.tick(t(1_000_000 + 30_000), &mut out);
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.records[0].status.phase, Phase::TimedOut);
    // Its next event makes it active again: its own clock counts.
    out.records.clear();
    h.apply(ev("s").id("b").at(1_000).announce("B", json!({})));
    h.apply(ev("other").id("y").at(600_000).announce("Y", json!({})));
    let others: Vec<String> = h
        .take()
        .iter()
        .map(|r| r.spec.tool_ref.as_ref().unwrap().name.clone())
        .collect();
    assert!(!others.contains(&"B".to_owned()), "{others:?}");
}

#[test]
fn a_topic_read_ahead_does_not_time_out_calls_whose_results_are_unread() {
    // A backlog: the announce topic (0) is read far ahead of the completion topic (1).
    let mut c = Correlator::new(toolcalls_core::Config {
        input_topics: 2,
        ..config()
    });
    let mut out = toolcalls_core::Effects::default();
    c.apply(
        ev("s").id("a").at(0).announce("A", json!({})),
        Position::new(0, 0),
        &mut out,
    );
    assert_eq!(
        c.stream_time(),
        None,
        "no watermark before both topics have been seen"
    );
    for i in 1..50 {
        // An hour of other sessions' announces, far past the 60 s call timeout.
        c.apply(
            ev("o")
                .id(&format!("x{i}"))
                .at(i * 100_000)
                .announce("B", json!({})),
            Position::new(0, i),
            &mut out,
        );
    }
    c.apply(
        ev("s").id("early").at(1).done(json!(0)),
        Position::new(1, 0),
        &mut out,
    );
    assert_eq!(
        c.stream_time(),
        Some(t(1)),
        "the slower topic holds stream time back"
    );
    assert!(
        out.records
            .iter()
            .all(|r| r.status.phase != Phase::TimedOut),
        "{:?}",
        out.records
    );
    c.apply(
        ev("s").id("a").at(2_000).done(json!("ok")),
        Position::new(1, 1),
        &mut out,
    );
    let a = out
        .records
        .iter()
        .find(|r| r.stream_id.as_ref().map(CallId::as_str) == Some("a"))
        .unwrap();
    assert_eq!(a.status.phase, Phase::Succeeded);
    // A completion topic that has gone quiet: the runtime moves past it to the newest event time.
    assert_eq!(c.max_event_time(), Some(t(4_900_000)));
    c.advance(c.max_event_time().unwrap(), &mut out);
    assert!(out
        .records
        .iter()
        .any(|r| r.status.phase == Phase::TimedOut));
}

#[test]
fn the_watermark_holds_when_each_topic_is_in_time_order() {
    // Three sessions; every announce is read before any result (a backlog read from the start),
    // the results topic in event-time order across sessions, as live traffic writes it.
    let mut c = Correlator::new(toolcalls_core::Config {
        input_topics: 2,
        ..config()
    });
    let mut out = toolcalls_core::Effects::default();
    let mut announces = Vec::new();
    let mut results = Vec::new();
    for k in 0..120 {
        for s in 0..3 {
            announces.push(
                ev(&format!("s{s}"))
                    .id(&format!("c{k}"))
                    .at(k * 1000)
                    .announce("r", json!({"p": k})),
            );
            results.push(
                ev(&format!("s{s}"))
                    .id(&format!("c{k}"))
                    .at(k * 1000 + 500)
                    .done(json!(k)),
            );
        }
    }
    for (i, e) in announces.into_iter().enumerate() {
        c.apply(e, Position::new(0, i as i64), &mut out);
    }
    for (i, e) in results.into_iter().enumerate() {
        c.apply(e, Position::new(1, i as i64), &mut out);
    }
    assert_eq!(out.records.len(), 360);
    assert!(out
        .records
        .iter()
        .all(|r| r.status.phase == Phase::Succeeded));
}
