//! Rule 4, no hint at all → the oldest pending call: docs/ARCHITECTURE.md, Correlation → Rules (4).

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn oldest_only_for_completions_without_any_hint() {
    let mut h = Harness::new();
    h.apply(ev("s").turn("t1").at(0).announce("A", json!({})));
    h.apply(ev("s").turn("t2").at(1).announce("B", json!({})));
    // A hint that matches nothing must not fall through to "oldest".
    assert_eq!(
        h.apply(ev("s").at(2).done_tool("C", json!(0))),
        Outcome::Pending
    );
    // No hint at all, in turn t2: the oldest pending call of that turn.
    assert_eq!(
        h.apply(ev("s").turn("t2").at(3).done(json!(1))),
        Outcome::Matched(Strategy::Oldest)
    );
    let r = h.one();
    assert_eq!(r.spec.tool_ref.unwrap().name, "B");
    assert_eq!(r.correlation.confidence, 0.5);
}
