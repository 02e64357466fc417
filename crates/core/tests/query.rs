//! The query API: pending calls and waiting results as records (`get`, `pending_in_session`,
//! `pending_views`, the memory estimate).

mod common;

use common::*;
use serde_json::json;
use toolcalls_model::*;

#[test]
fn query_views_show_pending_and_running_calls() {
    let mut h = Harness::new();
    let args = json!({"a": 1});
    h.apply(ev("s").id("a").at(0).announce("A", args.clone()));
    h.apply(ev("s").at(1).exec_start(checksum_of("A", Some(&args))));
    h.apply(ev("s").id("b").at(2).announce("B", json!({})));
    h.apply(ev("t").id("c").at(2).announce("C", json!({})));
    let views = h.c.pending_in_session(&"s".into());
    assert_eq!(
        views.iter().map(|r| r.status.phase).collect::<Vec<_>>(),
        vec![Phase::Running, Phase::Pending]
    );
    let id = RecordId::derive(&"test".into(), &"s".into(), None, "b");
    assert_eq!(h.c.get(&id).unwrap().spec.tool_ref.unwrap().name, "B");
    assert!(h.c.pending_bytes() > 0);
    assert_eq!(h.c.oldest_pending(), Some(t(0)));
}

#[test]
fn a_call_that_takes_over_its_waiting_events_is_found_by_record_id() {
    // The approval waits under the call's id, so it and the call share a record id; the call
    // that absorbs it stays findable (the index entry that goes is the waiting group's).
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .id("c1")
            .at(0)
            .approval(ApprovalDecision::Requested, None),
    );
    h.apply(
        ev("s")
            .id("c1")
            .at(1)
            .announce("Bash", json!({"cmd": "ls"})),
    );
    let id = RecordId::derive(&"test".into(), &"s".into(), None, "c1");
    let view = h.c.get(&id).expect("the pending call");
    assert_eq!(view.spec.tool_ref.unwrap().name, "Bash");
    assert!(view.spec.approval.is_some());
}
