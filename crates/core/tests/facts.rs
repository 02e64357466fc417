//! Facts: execution start / end, approvals and hook decisions, merged into their call or waiting
//! for it. docs/ARCHITECTURE.md, Correlation → Facts.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::{Config, Outcome};
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

/// However many facts come for one call, its record (and its changelog entry) stays within what
/// a Kafka message may hold: a fact that would take the call's facts past `max_facts_bytes` is
/// refused — the processor dead-letters it — and the call goes on without it. The same for a
/// result waiting for its call, and after a restore.
#[test]
fn facts_past_a_calls_budget_are_refused() {
    let config = Config {
        max_facts_bytes: 2_000,
        ..config()
    };
    let reason = "r".repeat(600);
    let hook = |id: &str, n: i64| ev("s").id(id).at(n).hook_because(&format!("h{n}"), &reason);
    let mut h = Harness::with(config.clone());
    h.apply(ev("s").id("c").at(0).announce("T", json!({})));
    assert_eq!(h.apply(hook("c", 1)), Outcome::Merged);
    assert_eq!(h.apply(hook("c", 2)), Outcome::Merged);
    assert_eq!(h.apply(hook("c", 3)), Outcome::Rejected("call_too_large"));
    // A copy of a fact it holds is still a duplicate, and small facts still fit.
    assert_eq!(h.apply(hook("c", 2)), Outcome::Duplicate);
    assert_eq!(
        h.apply(ev("s").id("c").at(4).hook("small", HookVerdict::Allow)),
        Outcome::Merged
    );
    assert_eq!(
        h.apply(ev("s").id("c").at(5).done(json!("ok"))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    let hooks: Vec<&str> = r
        .status
        .hook_decisions
        .iter()
        .map(|d| d.hook.as_str())
        .collect();
    assert_eq!(hooks, ["h1", "h2", "small"]);

    // Facts waiting for their call, by its id.
    let mut h = Harness::with(config.clone());
    assert_eq!(h.apply(hook("w", 1)), Outcome::Pending);
    assert_eq!(h.apply(hook("w", 2)), Outcome::Pending);
    assert_eq!(h.apply(hook("w", 3)), Outcome::Rejected("call_too_large"));

    // After a restore the call's facts weigh the same.
    let mut h = Harness::with(config.clone());
    h.apply(ev("s").id("c").at(0).announce("T", json!({})));
    h.apply(hook("c", 1));
    h.apply(hook("c", 2));
    let latest: Vec<(String, Vec<u8>)> =
        h.c.take_changelog()
            .into_iter()
            .filter_map(|op| Some((op.key, op.value?)))
            .collect();
    let mut restored = toolcalls_core::Correlator::restore(config, latest).unwrap();
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    assert_eq!(
        restored.apply(hook("c", 3), pos, &mut out),
        Outcome::Rejected("call_too_large")
    );
}

/// Events that came before their announce — its result under its id, and an execution start
/// known only by its checksum — all go into the call when it comes, as they do in order.
#[test]
fn an_announce_takes_its_own_waiting_result_and_the_facts_waiting_by_checksum() {
    let args = json!({"a": 1});
    let cs = checksum_of("T", Some(&args));
    for early in [
        ev("s").id("c1").at(2_000).done(json!("ok")),
        ev("s")
            .id("c1")
            .at(500)
            .approval(ApprovalDecision::Approved, None),
    ] {
        let mut h = Harness::new();
        assert_eq!(h.apply(early), Outcome::Pending);
        assert_eq!(
            h.apply(ev("s").at(1_000).exec_start(cs.clone())),
            Outcome::Pending
        );
        h.apply(ev("s").id("c1").at(0).announce("T", args.clone()));
        h.apply(ev("s").id("c1").at(3_000).done(json!("ok")));
        h.advance(100_000);
        let r = h.one();
        assert_eq!(r.status.phase, Phase::Succeeded);
        assert_eq!(
            r.status.started_at,
            Some(t(1_000)),
            "the execution start went in"
        );
    }
}
