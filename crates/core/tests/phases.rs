//! Phases and the deadlines that set them: denials, turn ends, aborted turns, cancelled results.
//! docs/ARCHITECTURE.md, Correlation → Phases.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn denied_calls_end_denied_with_or_without_a_result() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("rm", json!({})));
    h.apply(ev("s").id("a").at(1).hook("pre", HookVerdict::Deny));
    h.apply(ev("s").id("a").at(2).error(json!("blocked by policy")));
    assert_eq!(h.one().status.phase, Phase::Denied);

    h.apply(ev("s").id("b").at(10).announce("rm", json!({})));
    h.apply(
        ev("s")
            .id("b")
            .at(11)
            .approval(ApprovalDecision::Denied, Some("bob")),
    );
    h.advance(11 + 999);
    assert!(h.take().is_empty());
    h.advance(11 + 1_000);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Denied);
    assert!(r.status.reason.is_some());
}

#[test]
fn turn_end_interrupts_pending_calls_of_the_turn_after_the_grace() {
    let mut h = Harness::new();
    h.apply(ev("s").turn("t1").id("a").at(0).announce("A", json!({})));
    h.apply(ev("s").turn("t1").id("b").at(0).announce("B", json!({})));
    h.apply(ev("s").turn("t2").id("c").at(0).announce("C", json!({})));
    assert_eq!(
        h.apply(ev("s").turn("t1").at(100).turn_end()),
        Outcome::Applied
    );
    // A result inside the grace still counts.
    h.apply(ev("s").id("a").at(600).done(json!(0)));
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    h.advance(1_100);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Interrupted);
    assert_eq!(r.spec.tool_ref.unwrap().name, "B");
    assert_eq!(h.c.pending_calls(), 1, "the other turn's call is untouched");
}

#[test]
fn turn_aborted_interrupts_too_and_cancelled_results_are_interrupted() {
    let mut h = Harness::new();
    h.apply(ev("s").turn("t").id("a").at(0).announce("A", json!({})));
    h.apply(ev("s").turn("t").at(5).turn_aborted());
    h.advance(1_005);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Interrupted);
    assert_eq!(r.status.reason.as_deref(), Some("turn aborted"));

    h.apply(ev("s").id("b").at(2_000).announce("B", json!({})));
    h.apply(ev("s").id("b").at(2_001).completion(Completion {
        cancelled: true,
        ..Default::default()
    }));
    assert_eq!(h.one().status.phase, Phase::Interrupted);
}
