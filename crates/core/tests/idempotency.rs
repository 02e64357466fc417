//! Idempotency keys: retries collapse into the first call, or revise its published record.
//! docs/ARCHITECTURE.md, Correlation → Idempotency keys.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn idempotency_key_collapses_retries_into_one_record() {
    let mut h = Harness::new();
    let announce = |id: &str, at: i64| {
        ev("s").id(id).at(at).announce_with(Announce {
            tool: "zendesk.create_ticket".into(),
            args: Some(json!({"subject": "refund"}).into()),
            side_effects: Some(SideEffects {
                level: Some(SideEffectLevel::ExternalWrite),
                idempotent: Some(false),
                idempotency_key: Some("zendesk-create-12345".into()),
            }),
            ..Default::default()
        })
    };
    h.apply(announce("a1", 0));
    assert_eq!(h.apply(announce("a2", 100)), Outcome::Collapsed);
    assert_eq!(
        h.apply(ev("s").id("a1").at(200).done(json!({"ticketId": 77123}))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.correlation.attempts, 2);
    assert_eq!(r.replay, ReplayPolicy::RequiresOverride);
    // The retry's own completion is a repeat, not a second call.
    assert_eq!(
        h.apply(ev("s").id("a2").at(210).done(json!({"ticketId": 77123}))),
        Outcome::Late
    );
    // A third attempt after the record was published revises it.
    assert_eq!(h.apply(announce("a3", 5_000)), Outcome::Collapsed);
    let r2 = h.one();
    assert_eq!(r2.id(), r.id());
    assert_eq!(r2.metadata.revision, 2);
    assert_eq!(r2.correlation.attempts, 3);
    // Outside the window the key starts a new call.
    assert_eq!(h.apply(announce("a4", 50_000)), Outcome::Pending);
}

#[test]
fn a_retry_whose_result_came_first_is_not_collapsed_away() {
    let announce = |id: &str, at: i64| ev("s").id(id).at(at).announce_keyed("k");
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    // The retry's result arrives before the retry's announce.
    assert_eq!(
        h.apply(ev("s").id("a2").at(5).done(json!("second"))),
        Outcome::Pending
    );
    assert_eq!(
        h.apply(announce("a2", 4)),
        Outcome::Matched(Strategy::CallId)
    );
    assert_eq!(
        h.one().status.output.as_ref().map(|o| o.to_value()),
        Some(json!("second"))
    );
    h.apply(ev("s").id("a1").at(6).done(json!("first")));
    assert_eq!(h.one().correlation.attempts, 1);
}
