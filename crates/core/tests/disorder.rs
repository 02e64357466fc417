//! The reorder window (`max_disorder_ms`): docs/ARCHITECTURE.md, Correlation → Disorder.

mod common;

use common::*;
use serde_json::json;
use std::collections::HashMap;
use toolcalls_core::{Config, Correlator, Effects, Outcome, Position};
use toolcalls_model::*;

fn windowed(ms: u64) -> Harness {
    Harness::with(Config {
        max_disorder_ms: ms,
        ..config()
    })
}

/// What the window applied since the last call: (input offset, outcome).
fn released(h: &mut Harness) -> Vec<(i64, Outcome)> {
    h.out
        .released
        .drain(..)
        .map(|r| (r.pos.offset, r.outcome))
        .collect()
}

fn output(r: &ToolCallRecord) -> serde_json::Value {
    r.status
        .output
        .as_ref()
        .map(Json::to_value)
        .unwrap_or_default()
}

#[test]
fn results_that_overtake_their_calls_are_put_back_in_event_order() {
    // Two id-less calls of one tool; the second's result arrives first. In arrival order tool
    // FIFO gives it to the first call; in event order each result finds its own call.
    let arrivals = |h: &mut Harness| {
        let mut outcomes = vec![
            h.apply(ev("s").at(0).announce("Read", json!({"f": 1}))),
            h.apply(ev("s").at(10).announce("Read", json!({"f": 2}))),
            h.apply(ev("s").at(30).done_tool("Read", json!("two"))),
            h.apply(ev("s").at(20).done_tool("Read", json!("one"))),
        ];
        outcomes.push(h.apply(ev("s").at(5_000).turn_end()));
        outcomes
    };

    let mut plain = Harness::new();
    arrivals(&mut plain);
    let mispaired = plain.take();
    assert_eq!(
        output(&mispaired[0]),
        json!("two"),
        "arrival order pairs the first call with the second result"
    );

    let mut h = windowed(100);
    let outcomes = arrivals(&mut h);
    assert_eq!(
        outcomes[..4],
        [Outcome::Held; 4],
        "all within the window of the newest"
    );
    // The turn end at 5 s releases them, oldest first.
    assert_eq!(
        released(&mut h),
        vec![
            (0, Outcome::Pending),
            (1, Outcome::Pending),
            (3, Outcome::Matched(Strategy::ToolFifo)),
            (2, Outcome::Matched(Strategy::ToolFifo)),
        ]
    );
    let records = h.take();
    assert_eq!(records.len(), 2);
    for r in &records {
        let want = if r.spec.input.as_ref().map(Json::to_value) == Some(json!({"f": 1})) {
            "one"
        } else {
            "two"
        };
        assert_eq!(output(r), json!(want), "{r:#?}");
    }
}

#[test]
fn an_event_is_held_until_its_session_shows_one_a_window_later() {
    let mut h = windowed(100);
    assert_eq!(
        h.apply(ev("s").at(0).announce("Read", json!(1))),
        Outcome::Held
    );
    // Another session's time does not release it.
    assert_eq!(
        h.apply(ev("other").at(1_000).announce("Read", json!(1))),
        Outcome::Held
    );
    assert!(released(&mut h).is_empty());
    // Within the window: still held.
    assert_eq!(
        h.apply(ev("s").at(99).done_tool("Read", json!("r"))),
        Outcome::Held
    );
    assert!(released(&mut h).is_empty());
    assert_eq!(h.c.held_len(), 3);
    // 100 ms after the announce: it goes, the result at 99 not yet.
    assert_eq!(h.apply(ev("s").at(100).turn_end()), Outcome::Held);
    assert_eq!(released(&mut h), vec![(0, Outcome::Pending)]);
    assert_eq!(h.c.held_len(), 3);
}

#[test]
fn an_event_later_than_the_window_is_applied_as_it_comes() {
    let mut h = windowed(100);
    h.apply(ev("s").at(0).announce("Read", json!(1)));
    h.apply(ev("s").at(500).announce("Write", json!(1)));
    assert_eq!(released(&mut h), vec![(0, Outcome::Pending)]);
    // 400 ms behind the newest event of its session: beyond the window, applied at once (it
    // cannot be put in order any more, and holding it would not help).
    assert_eq!(
        h.apply(ev("s").at(100).done_tool("Read", json!("r"))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    assert_eq!(h.take().len(), 1);
}

#[test]
fn the_wall_clock_releases_what_waited_the_window() {
    let mut h = windowed(2_000);
    h.c.tick(t(1_000_000), &mut h.out);
    h.apply(ev("s").at(0).announce("Read", json!(1)));
    h.apply(ev("s").at(5).done_tool("Read", json!("r")));
    h.c.tick(t(1_001_999), &mut h.out);
    assert!(
        released(&mut h).is_empty(),
        "not yet the window's length of wall clock"
    );
    h.c.tick(t(1_002_000), &mut h.out);
    assert_eq!(
        released(&mut h),
        vec![
            (0, Outcome::Pending),
            (1, Outcome::Matched(Strategy::ToolFifo))
        ]
    );
    assert_eq!(h.take().len(), 1);
    assert_eq!(h.c.held_len(), 0);
}

#[test]
fn the_end_of_input_releases_everything_in_event_order() {
    let mut h = windowed(60_000);
    h.apply(ev("b").at(20).done_tool("Read", json!("rb")));
    h.apply(ev("a").at(10).announce("Read", json!(1)));
    h.apply(ev("b").at(5).announce("Read", json!(2)));
    h.apply(ev("a").at(30).done_tool("Read", json!("ra")));
    assert!(released(&mut h).is_empty());
    h.c.release_all(&mut h.out);
    assert_eq!(
        released(&mut h),
        vec![
            (2, Outcome::Pending),
            (1, Outcome::Pending),
            (0, Outcome::Matched(Strategy::ToolFifo)),
            (3, Outcome::Matched(Strategy::ToolFifo)),
        ]
    );
    assert_eq!(h.take().len(), 2);
}

#[test]
fn held_events_survive_a_restore() {
    let config = Config {
        max_disorder_ms: 1_000,
        ..config()
    };
    let mut c = Correlator::new(config.clone());
    let mut out = Effects::default();
    let e = |at: i64, kind: &str| match kind {
        "call" => ev("s").at(at).announce("Read", json!({"f": at})),
        _ => ev("s").at(at).done_tool("Read", json!(at)),
    };
    c.tick(t(0), &mut out);
    assert_eq!(
        c.apply(e(100, "result"), Position::new(1, 7), &mut out),
        Outcome::Held
    );
    assert_eq!(
        c.apply(e(50, "call"), Position::new(0, 3), &mut out),
        Outcome::Held
    );
    let mut topic: HashMap<String, Vec<u8>> = HashMap::new();
    for op in c.take_changelog() {
        if let Some(v) = op.value {
            topic.insert(op.key, v);
        }
    }
    let mut restored = Correlator::restore(config, topic).expect("restore");
    let mut positions: Vec<_> = restored.held_positions().collect();
    positions.sort();
    assert_eq!(positions, [Position::new(0, 3), Position::new(1, 7)]);
    // The scope's arrival time came back too: an event a window after the newest releases both.
    let mut out = Effects::default();
    restored.apply(e(1_100, "call"), Position::new(0, 4), &mut out);
    let got: Vec<_> = out.released.iter().map(|r| (r.pos, r.outcome)).collect();
    assert_eq!(
        got,
        [
            (Position::new(0, 3), Outcome::Pending),
            (Position::new(1, 7), Outcome::Matched(Strategy::ToolFifo))
        ]
    );
    let record = &out.records[0];
    // Provenance names the held events' own positions.
    let provenance = serde_json::to_value(&record.provenance).unwrap();
    assert_eq!(
        provenance,
        json!([{"input": 0, "offsets": [3]}, {"input": 1, "offsets": [7]}])
    );
}
