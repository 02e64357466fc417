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
