//! The state cap: over `max_pending` the oldest pending entries close as `Evicted`.
//! docs/ARCHITECTURE.md, Correlation → Phases.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn state_cap_evicts_the_oldest_as_records() {
    let mut h = Harness::with(toolcalls_core::Config {
        max_pending: 2,
        ..config()
    });
    h.apply(ev("s").id("1").at(0).announce("A", json!({})));
    h.apply(ev("s").id("2").at(1).announce("A", json!({})));
    assert!(h.take().is_empty());
    h.apply(ev("s").id("3").at(2).announce("A", json!({})));
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Evicted);
    assert_eq!(r.stream_id.unwrap().as_str(), "1");
    assert_eq!(h.c.pending_len(), 2);
    // Its result, when it comes, is not a new call.
    assert_eq!(h.apply(ev("s").id("1").at(3).done(json!(0))), Outcome::Late);
}

#[test]
fn state_cap_evicts_oldest_first_while_calls_come_and_go() {
    let mut h = Harness::with(toolcalls_core::Config {
        max_pending: 3,
        ..config()
    });
    let mut evicted = Vec::new();
    let mut note = |h: &mut Harness| {
        for r in h.take() {
            if r.status.phase == Phase::Evicted {
                evicted.push(r.stream_id.unwrap().as_str().to_owned());
            }
        }
    };
    for (i, id) in ["1", "2", "3", "4"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(i as i64).announce("A", json!({})));
    }
    note(&mut h);
    // 2 completes; then 5 fits without an eviction, and each later call evicts the oldest left.
    h.apply(ev("s").id("2").at(10).done(json!(0)));
    for (i, id) in ["5", "6", "7"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(11 + i as i64).announce("A", json!({})));
        note(&mut h);
    }
    let views: Vec<String> =
        h.c.pending_views()
            .map(|r| r.stream_id.unwrap().as_str().to_owned())
            .collect();
    for (i, id) in ["8", "9"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(20 + i as i64).announce("A", json!({})));
        note(&mut h);
    }
    assert_eq!(evicted, ["1", "3", "4", "5", "6"]);
    assert_eq!(views, ["5", "6", "7"], "oldest first");
    assert_eq!(h.c.pending_len(), 3);
}

#[test]
fn the_byte_cap_evicts_the_oldest_when_large_arguments_flood_in() {
    let cap = 200_000;
    let mut h = Harness::with(toolcalls_core::Config {
        max_pending_bytes: cap,
        ..config()
    });
    let big = "x".repeat(10_000);
    let mut evicted = Vec::new();
    for i in 0..100 {
        let id = format!("c{i}");
        h.apply(
            ev("s")
                .id(&id)
                .at(i)
                .announce("Write", json!({"text": big})),
        );
        assert!(
            h.c.pending_bytes() <= cap,
            "{} over {cap}",
            h.c.pending_bytes()
        );
        for r in h.take() {
            assert_eq!(r.status.phase, Phase::Evicted);
            assert!(r
                .status
                .reason
                .as_deref()
                .unwrap()
                .contains("max_pending_bytes"));
            evicted.push(r.stream_id.unwrap().as_str().to_owned());
        }
    }
    // Oldest first, and the rest of the traffic flows: the newest calls still complete.
    assert_eq!(evicted[..3], ["c0", "c1", "c2"]);
    assert!(evicted.len() > 80, "{}", evicted.len());
    assert_eq!(
        h.apply(ev("s").id("c99").at(200).done(json!(0))),
        Outcome::Matched(Strategy::CallId)
    );
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    assert_eq!(
        h.apply(ev("s").id("c0").at(201).done(json!(0))),
        Outcome::Late
    );
}
