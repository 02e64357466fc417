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

/// A retry exists because an attempt failed. Its own result, when it says something else, is
/// the call's outcome: the record's next revision says it, also once the first attempt's record
/// was out. An earlier attempt's result coming after a later one's changes nothing.
#[test]
fn a_retry_that_succeeds_after_a_failure_revises_the_record() {
    let announce = |id: &str, at: i64| ev("s").id(id).at(at).announce_keyed("k");
    let failed = |id: &str, at: i64| ev("s").id(id).at(at).error(json!("timeout"));
    let done = |id: &str, at: i64| ev("s").id(id).at(at).done(json!("ok"));

    // The first attempt fails and its record goes out; then the retry.
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    h.apply(failed("a1", 10));
    let first = h.one();
    assert_eq!(first.status.phase, Phase::Failed);
    assert_eq!(h.apply(announce("a2", 20)), Outcome::Collapsed);
    assert_eq!(h.one().correlation.attempts, 2);
    assert_eq!(h.apply(done("a2", 30)), Outcome::Matched(Strategy::CallId));
    let revised = h.one();
    assert_eq!(revised.id(), first.id());
    assert_eq!(revised.metadata.revision, 3);
    assert_eq!(revised.status.phase, Phase::Succeeded);
    assert_eq!(
        revised.status.output.as_ref().map(|o| o.as_str()),
        Some("\"ok\"")
    );
    assert!(!revised.status.is_error);
    assert_eq!(revised.correlation.attempts, 2);
    assert_eq!(revised.correlation.events_merged, 4);
    // Copies of either result, and the first attempt's, are late now.
    assert_eq!(h.apply(done("a2", 30)), Outcome::Late);
    assert_eq!(h.apply(failed("a1", 10)), Outcome::Late);
    assert!(h.take().is_empty());

    // The retry comes while the first attempt is pending; the failure closes the call first.
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    assert_eq!(h.apply(announce("a2", 5)), Outcome::Collapsed);
    h.apply(failed("a1", 10));
    assert_eq!(h.one().status.phase, Phase::Failed);
    assert_eq!(h.apply(done("a2", 30)), Outcome::Matched(Strategy::CallId));
    assert_eq!(h.one().status.phase, Phase::Succeeded);

    // A retry's failure after an attempt succeeded does not undo the success.
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    h.apply(done("a1", 10));
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    assert_eq!(h.apply(announce("a2", 20)), Outcome::Collapsed);
    h.one();
    assert_eq!(h.apply(failed("a2", 30)), Outcome::Late);
    assert!(h.take().is_empty());

    // The retry's success comes first; the first attempt's failure after it is late.
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    h.apply(announce("a2", 5));
    h.apply(done("a2", 10));
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    assert_eq!(h.apply(failed("a1", 20)), Outcome::Late);
    assert!(h.take().is_empty());
}

/// The same after a restore: the changelog keeps which attempt the record answers.
#[test]
fn which_attempt_a_record_answers_survives_a_restore() {
    let announce = |id: &str, at: i64| ev("s").id(id).at(at).announce_keyed("k");
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    h.apply(announce("a2", 5));
    // The retry's failure answers first; the first attempt is still to answer.
    h.apply(ev("s").id("a2").at(10).error(json!("timeout")));
    h.one();
    let mut restored = h.restored();
    let mut out = toolcalls_core::Effects::default();
    let pos = |offset| toolcalls_core::Position::new(1, offset);
    // An earlier attempt's result after a later one's is late, also after the restore.
    let first = ev("s").id("a1").at(20).done(json!("ok"));
    assert_eq!(restored.apply(first, pos(100), &mut out), Outcome::Late);
    let third = ev("s").id("a3").at(30).announce_keyed("k");
    assert_eq!(
        restored.apply(third, pos(101), &mut out),
        Outcome::Collapsed
    );
    let third_done = ev("s").id("a3").at(40).done(json!("ok"));
    assert_eq!(
        restored.apply(third_done, pos(102), &mut out),
        Outcome::Matched(Strategy::CallId)
    );
    let last = out.records.pop().unwrap();
    assert_eq!(last.status.phase, Phase::Succeeded);
    assert_eq!(last.correlation.attempts, 3);
}

/// A retry without a call id, published as a new revision of a closed call, is known by its
/// repeat key from then on: its copies are late, not one more attempt and revision each — after
/// a restore too.
#[test]
fn copies_of_an_idless_retry_after_its_revision_are_late() {
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce_keyed("K"));
    h.apply(ev("s").at(1).done_tool("send", json!("ok")));
    assert_eq!(h.one().metadata.revision, 1);
    let retry = || ev("s").at(5).announce_keyed("K");
    assert_eq!(h.apply(retry()), Outcome::Collapsed);
    let revised = h.one();
    assert_eq!(
        (revised.metadata.revision, revised.correlation.attempts),
        (2, 2)
    );
    let mut restored = h.restored();
    let mut out = toolcalls_core::Effects::default();
    for i in 0..3 {
        assert_eq!(h.apply(retry()), Outcome::Late, "copy {i}");
        let pos = toolcalls_core::Position::new(0, 100 + i);
        assert_eq!(restored.apply(retry(), pos, &mut out), Outcome::Late);
    }
    assert!(h.take().is_empty());
    assert!(out.records.is_empty(), "{:#?}", out.records);
}

/// A call whose first attempt was announced without an id: its retry's id names the second
/// attempt, so the retry's success after the first attempt's failure revises the record, and a
/// copy of that success is late.
#[test]
fn a_retry_of_a_first_attempt_without_an_id_revises_the_record() {
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce_keyed("K"));
    h.apply(ev("s").at(1).error(json!("fail")));
    assert_eq!(h.one().status.phase, Phase::Failed);
    assert_eq!(
        h.apply(ev("s").id("x").at(5).announce_keyed("K")),
        Outcome::Collapsed
    );
    assert_eq!(h.one().metadata.revision, 2);
    let success = || ev("s").id("x").at(6).done(json!("ok"));
    assert!(
        matches!(h.apply(success()), Outcome::Matched(_) | Outcome::Merged),
        "revised"
    );
    let revised = h.one();
    assert_eq!(
        (revised.metadata.revision, revised.status.phase),
        (3, Phase::Succeeded)
    );
    assert_eq!(h.apply(success()), Outcome::Late);
    assert!(h.take().is_empty());
}

/// A first attempt announced without an id that takes its id from a result which came first:
/// that result answered the attempt the id now names, so another result under the same id is
/// late, as it is for a call announced with its id — before a restore and after it.
#[test]
fn a_second_result_under_an_id_the_first_attempt_took_is_late() {
    let mut h = Harness::new();
    let failure = ev("s")
        .id("x")
        .at(1)
        .event(EventBody::Completion(Completion {
            tool: Some("send".into()),
            result: Some(json!("fail").into()),
            is_error: true,
            ..Default::default()
        }));
    assert_eq!(h.apply(failure), Outcome::Pending);
    assert!(matches!(
        h.apply(ev("s").at(2).announce_keyed("K")),
        Outcome::Matched(_)
    ));
    let record = h.one();
    assert_eq!(
        (record.status.phase, record.metadata.revision),
        (Phase::Failed, 1)
    );
    let other = || ev("s").id("x").at(3).done(json!("ok"));
    let mut restored = h.restored();
    let mut out = toolcalls_core::Effects::default();
    assert_eq!(h.apply(other()), Outcome::Late);
    let pos = toolcalls_core::Position::new(0, 100);
    assert_eq!(restored.apply(other(), pos, &mut out), Outcome::Late);
    assert!(h.take().is_empty());
    assert!(out.records.is_empty(), "{:#?}", out.records);
    // A retry's own success still revises the failure.
    assert_eq!(
        h.apply(ev("s").id("y").at(5).announce_keyed("K")),
        Outcome::Collapsed
    );
    assert_eq!(h.one().metadata.revision, 2);
    h.apply(ev("s").id("y").at(6).done(json!("ok")));
    let revised = h.one();
    assert_eq!(
        (revised.metadata.revision, revised.status.phase),
        (3, Phase::Succeeded)
    );
}
