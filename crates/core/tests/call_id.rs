//! Rule 1, same call id, and the scope an id is compared in: docs/ARCHITECTURE.md, Correlation →
//! Rules (1) and → Scope.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn call_id_links_announce_and_completion() {
    let mut h = Harness::new();
    assert_eq!(
        h.apply(
            ev("s")
                .id("toolu_1")
                .at(0)
                .announce("Read", json!({"path": "a"}))
        ),
        Outcome::Pending
    );
    assert!(h.take().is_empty());
    assert_eq!(
        h.apply(ev("s").id("toolu_1").at(40).done(json!("text"))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Succeeded);
    assert_eq!(r.correlation.strategy, Strategy::CallId);
    assert_eq!(r.correlation.confidence, 1.0);
    assert_eq!(r.correlation.events_merged, 2);
    assert_eq!(r.stream_id.as_ref().map(CallId::as_str), Some("toolu_1"));
    assert_eq!(
        r.status.output.as_ref().map(|o| o.to_value()),
        Some(json!("text"))
    );
    assert_eq!(r.status.duration_ms, Some(40));
    assert_eq!(
        r.checksum,
        Some(checksum_of("Read", Some(&json!({"path": "a"}))))
    );
    assert_eq!(
        r.id(),
        RecordId::derive(&"test".into(), &"s".into(), None, "toolu_1")
    );
    assert_eq!(h.c.pending_len(), 0);
}

#[test]
fn completion_before_announce_waits_and_links_the_same_way() {
    let mut a = Harness::new();
    a.apply(
        ev("s")
            .id("c1")
            .at(0)
            .announce("Bash", json!({"cmd": "ls"})),
    );
    a.apply(ev("s").id("c1").at(10).done(json!("ok")));
    let expected = a.one();

    let mut b = Harness::new();
    assert_eq!(
        b.apply(ev("s").id("c1").at(10).done(json!("ok"))),
        Outcome::Pending
    );
    assert_eq!(
        b.apply(
            ev("s")
                .id("c1")
                .at(0)
                .announce("Bash", json!({"cmd": "ls"}))
        ),
        Outcome::Matched(Strategy::CallId)
    );
    assert_eq!(b.one(), expected);
}

#[test]
fn ids_are_scoped_by_session_source_and_thread() {
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .thread("t1")
            .id("item_1")
            .at(0)
            .announce("sh", json!({"c": 1})),
    );
    h.apply(
        ev("s")
            .thread("t2")
            .id("item_1")
            .at(1)
            .announce("sh", json!({"c": 2})),
    );
    h.apply(ev("s").thread("t2").id("item_1").at(2).done(json!("two")));
    let r = h.one();
    assert_eq!(
        r.spec.input.as_ref().map(|o| o.to_value()),
        Some(json!({"c": 2}))
    );
    assert_eq!(r.metadata.thread.as_ref().unwrap().as_str(), "t2");
    assert_eq!(
        h.apply(ev("other").thread("t1").id("item_1").at(3).done(json!(0))),
        Outcome::Pending
    );
    assert_eq!(
        h.apply(
            ev("s")
                .source("else")
                .thread("t1")
                .id("item_1")
                .at(3)
                .done(json!(0))
        ),
        Outcome::Pending
    );
}
