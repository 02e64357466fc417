//! Facts: execution start / end, approvals and hook decisions, merged into their call or waiting
//! for it. docs/ARCHITECTURE.md, Correlation → Facts.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn execution_events_merge_by_checksum_one_per_identical_call() {
    let mut h = Harness::new();
    let args = json!({"x": 1});
    let cs = checksum_of("T", Some(&args));
    h.apply(ev("s").id("1").at(0).announce("T", args.clone()));
    h.apply(ev("s").id("2").at(1).announce("T", args.clone()));
    assert_eq!(
        h.apply(ev("s").at(10).exec_start(cs.clone())),
        Outcome::Merged
    );
    assert_eq!(
        h.apply(ev("s").at(11).exec_start(cs.clone())),
        Outcome::Merged
    );
    h.apply(ev("s").at(30).exec_end(cs.clone(), false, 20));
    h.apply(ev("s").id("1").at(31).done(json!(1)));
    let r = h.one();
    assert_eq!(r.status.started_at, Some(t(10)));
    assert_eq!(r.status.duration_ms, Some(20));
    h.apply(ev("s").id("2").at(40).done(json!(2)));
    let r = h.one();
    assert_eq!(
        r.status.started_at,
        Some(t(11)),
        "the second start belongs to the second call"
    );
}

#[test]
fn approvals_and_hook_decisions_are_merged() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("send", json!({})));
    h.apply(
        ev("s")
            .id("c")
            .at(1)
            .hook("steps/toolCallRequest", HookVerdict::Allow),
    );
    h.apply(
        ev("s")
            .id("c")
            .at(2)
            .approval(ApprovalDecision::Requested, None),
    );
    h.apply(
        ev("s")
            .id("c")
            .at(3)
            .approval(ApprovalDecision::Approved, Some("alice@example.com")),
    );
    h.apply(ev("s").id("c").at(9).done(json!({"ok": true})));
    let r = h.one();
    let approval = r.spec.approval.unwrap();
    assert!(approval.required);
    assert_eq!(approval.status, ApprovalDecision::Approved);
    assert_eq!(approval.approved_by.as_deref(), Some("alice@example.com"));
    assert_eq!(approval.requested_at, Some(t(2)));
    assert_eq!(r.status.hook_decisions.len(), 1);
    assert_eq!(
        r.status.hook_decisions[0].policy_version.as_deref(),
        Some("v3")
    );
    assert_eq!(r.correlation.events_merged, 5);
}

#[test]
fn facts_that_arrive_before_the_announce_are_kept() {
    let mut h = Harness::new();
    assert_eq!(
        h.apply(ev("s").id("c").at(1).hook("pre", HookVerdict::Allow)),
        Outcome::Pending
    );
    h.apply(ev("s").id("c").at(0).announce("x", json!({})));
    h.apply(ev("s").id("c").at(5).done(json!(0)));
    assert_eq!(h.one().status.hook_decisions.len(), 1);
}
