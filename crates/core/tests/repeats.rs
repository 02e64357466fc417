//! Repeats: duplicates counted, late repeats never a second record, a call id reused for another
//! tool refused. docs/ARCHITECTURE.md, Correlation → Repeats and → Accounting.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn repeated_emissions_are_merged_and_counted() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    assert_eq!(
        h.apply(ev("s").id("c").at(1).announce("Read", json!({}))),
        Outcome::Duplicate
    );
    assert_eq!(
        h.apply(ev("s").id("c").at(5).done(json!(1))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.correlation.duplicates, 1);
    assert_eq!(r.correlation.events_merged, 3);
    // The same completion again (at-least-once delivery): no second record.
    assert_eq!(h.apply(ev("s").id("c").at(6).done(json!(1))), Outcome::Late);
    assert!(h.take().is_empty());
    h.advance(10_000_000);
    assert!(h.take().is_empty());
}

#[test]
fn repeated_completions_before_the_announce_are_counted_once() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(5).done(json!(1)));
    assert_eq!(
        h.apply(ev("s").id("c").at(6).done(json!(1))),
        Outcome::Duplicate
    );
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    let r = h.one();
    assert_eq!(r.correlation.duplicates, 1);
    assert_eq!(r.correlation.events_merged, 3);
}

#[test]
fn same_call_id_with_another_tool_is_rejected() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    assert_eq!(
        h.apply(ev("s").id("c").at(1).announce("Write", json!({}))),
        Outcome::Rejected("conflicting_call_id")
    );
}
