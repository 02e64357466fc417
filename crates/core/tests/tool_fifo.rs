//! Rule 3, same tool name, first in first out: docs/ARCHITECTURE.md, Correlation → Rules (3).

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn tool_name_is_fifo_when_there_is_no_checksum() {
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce("Read", json!({"p": 1})));
    h.apply(ev("s").at(1).announce("Write", json!({"p": 2})));
    h.apply(ev("s").at(2).announce("Read", json!({"p": 3})));
    assert_eq!(
        h.apply(ev("s").at(5).done_tool("Read", json!("r1"))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    let r = h.one();
    assert_eq!(
        r.spec.input.as_ref().map(|o| o.to_value()),
        Some(json!({"p": 1}))
    );
    assert_eq!(r.correlation.candidates, 2);
    h.apply(ev("s").at(6).done_tool("Read", json!("r2")));
    assert_eq!(
        h.one().spec.input.as_ref().map(|o| o.to_value()),
        Some(json!({"p": 3}))
    );
}
