//! Rule 5 and symmetric matching: a result with no call waits, a new announce finds it, and one
//! never found is published `Orphaned`. docs/ARCHITECTURE.md, Correlation → Rules (5).

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn unmatched_completion_becomes_one_orphan_after_the_grace() {
    let mut h = Harness::new();
    h.apply(ev("s").id("x").at(0).done_tool("Read", json!("r")));
    h.advance(4_999);
    assert!(h.take().is_empty(), "still inside the orphan grace");
    h.advance(5_000);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Orphaned);
    assert_eq!(r.correlation.strategy, Strategy::Unmatched);
    assert_eq!(
        r.status.output.as_ref().map(|o| o.to_value()),
        Some(json!("r"))
    );
    // A late announce with the same id is accounted for, and does not open a second record.
    assert_eq!(
        h.apply(ev("s").id("x").at(6_000).announce("Read", json!({}))),
        Outcome::Late
    );
    h.advance(1_000_000);
    assert!(h.take().is_empty());
}

#[test]
fn symmetric_announce_finds_buffered_completion_by_checksum_and_tool() {
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .at(5)
            .done_args("Grep", json!({"re": "x"}), json!("hit")),
    );
    h.apply(ev("s").at(6).done_tool("Ls", json!("files")));
    assert_eq!(
        h.apply(ev("s").at(0).announce("Ls", json!({}))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    assert_eq!(
        h.one().status.output.as_ref().map(|o| o.to_value()),
        Some(json!("files"))
    );
    assert_eq!(
        h.apply(ev("s").at(1).announce("Grep", json!({"re": "x"}))),
        Outcome::Matched(Strategy::Checksum)
    );
    assert_eq!(
        h.one().status.output.as_ref().map(|o| o.to_value()),
        Some(json!("hit"))
    );
}
