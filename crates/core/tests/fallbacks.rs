//! The limits of the fallbacks (rules 2–4): never two different ids, but an event with an id may
//! take an id-less one. docs/ARCHITECTURE.md, Correlation → Rules.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn fallbacks_never_pair_two_different_ids() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("Read", json!({"p": 1})));
    assert_eq!(
        h.apply(
            ev("s")
                .id("b")
                .at(1)
                .done_args("Read", json!({"p": 1}), json!(0))
        ),
        Outcome::Pending
    );
    assert!(h.take().is_empty());
    h.advance(10_000); // past the orphan grace
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Orphaned);
    assert_eq!(r.stream_id.as_ref().map(CallId::as_str), Some("b"));
}

#[test]
fn id_less_completion_may_take_a_call_with_an_id_by_checksum() {
    // Hook payloads without tool_use_id still find the transcript's call.
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .id("toolu_9")
            .at(0)
            .announce("Edit", json!({"f": "x"})),
    );
    assert_eq!(
        h.apply(
            ev("s")
                .at(3)
                .done_args("Edit", json!({"f": "x"}), json!("ok"))
        ),
        Outcome::Matched(Strategy::Checksum)
    );
    assert_eq!(h.one().stream_id.unwrap().as_str(), "toolu_9");
}

#[test]
fn a_result_with_an_id_waits_for_its_own_announce_where_calls_carry_ids() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("Read", json!({"path": "a"})));
    h.apply(ev("s").id("a").at(1).done(json!("a")));
    h.one();
    // An id-less call of the tool is pending; the early result of call `b` carries an id.
    h.apply(ev("s").at(2).announce("Read", json!({"path": "x"})));
    assert_eq!(
        h.apply(ev("s").id("b").at(4).done_tool("Read", json!("b"))),
        Outcome::Pending
    );
    assert_eq!(
        h.apply(ev("s").id("b").at(3).announce("Read", json!({"path": "b"}))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.stream_id.as_ref().map(CallId::as_str), Some("b"));
    assert_eq!(r.status.output, Some(Json::from(json!("b"))));
    // The id-less call gets its own result.
    assert_eq!(
        h.apply(ev("s").at(5).done_tool("Read", json!("x"))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    assert_eq!(h.one().status.output, Some(Json::from(json!("x"))));
}

#[test]
fn an_idless_call_does_not_take_a_result_waiting_for_its_own_announce() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("Read", json!({})));
    h.apply(ev("s").id("b").at(4).done_tool("Read", json!("b")));
    assert_eq!(
        h.apply(ev("s").at(2).announce("Read", json!({"path": "x"}))),
        Outcome::Pending
    );
    assert!(h.take().is_empty());
}

#[test]
fn once_its_grace_runs_out_a_result_with_an_id_takes_an_idless_call() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("Read", json!({})));
    h.apply(ev("s").at(2).announce("Read", json!({"path": "x"})));
    h.apply(ev("s").id("b").at(4).done_tool("Read", json!("x")));
    assert!(h.take().is_empty());
    h.advance(4 + config().orphan_grace_ms as i64);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Succeeded);
    assert_eq!(r.correlation.strategy, Strategy::ToolFifo);
    assert_eq!(r.spec.input, Some(Json::from(json!({"path": "x"}))));
}

#[test]
fn where_no_call_carries_an_id_a_result_with_one_takes_a_call_by_the_fallbacks() {
    let mut h = Harness::new();
    h.apply(ev("s").at(2).announce("Read", json!({"path": "x"})));
    assert_eq!(
        h.apply(ev("s").id("gen-1").at(4).done_tool("Read", json!("x"))),
        Outcome::Matched(Strategy::ToolFifo)
    );
}
