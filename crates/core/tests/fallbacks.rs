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
