//! Rule 2, same checksum: docs/ARCHITECTURE.md, Correlation → Rules (2), and the checksum itself
//! (The checksum).

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::Outcome;
use toolcalls_model::*;

#[test]
fn checksum_links_id_less_calls_oldest_first() {
    let mut h = Harness::new();
    let args = json!({"q": "same"});
    h.apply(ev("s").at(0).announce("Search", args.clone()));
    h.apply(ev("s").at(1).announce("Search", args.clone()));
    h.apply(ev("s").at(2).announce("Search", json!({"q": "other"})));
    assert_eq!(
        h.apply(ev("s").at(10).done_args("Search", args.clone(), json!(1))),
        Outcome::Matched(Strategy::Checksum)
    );
    let first = h.one();
    assert_eq!(first.created_at, t(0), "identical calls pair oldest first");
    assert_eq!(first.correlation.candidates, 2);
    assert_eq!(first.correlation.confidence, 0.85);
    h.apply(ev("s").at(11).done_args("Search", args, json!(2)));
    let second = h.one();
    assert_eq!(second.created_at, t(1));
    assert_eq!(second.correlation.candidates, 1);
    assert_eq!(second.correlation.confidence, 0.95);
    assert_ne!(
        first.id(),
        second.id(),
        "id-less calls get distinct keys from their positions"
    );
}

#[test]
fn openai_style_string_args_checksum_like_objects() {
    // Arguments sent as JSON text: the producer names the checksum of the value they hold (the
    // adapters do, see docs/ADAPTERS.md); without one, a string is hashed as a string, as the
    // ADK's `Tool.executor` hashes what the tool received.
    let text = "{\"b\":1,\"a\":[1.0]}";
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce_with(Announce {
        tool: "f".into(),
        args: Some(json!(text).into()),
        checksum: Some(toolcalls_model::checksum::checksum_of_encoded("f", text)),
        ..Default::default()
    }));
    assert_eq!(
        h.apply(
            ev("s")
                .at(5)
                .done_args("f", json!({"a": [1], "b": 1}), json!(null))
        ),
        Outcome::Matched(Strategy::Checksum)
    );
    h.one();
    h.apply(ev("s").at(6).announce("g", json!(text)));
    assert_eq!(
        h.apply(ev("s").at(7).done_args("g", json!(text), json!(null))),
        Outcome::Matched(Strategy::Checksum)
    );
}

#[test]
fn a_repeat_with_arguments_files_the_call_under_their_checksum() {
    // Announced with a checksum but no arguments; a repeat brings arguments whose checksum
    // differs. The call is filed (and published) under the new checksum only, as a restore
    // would file it.
    let mut h = Harness::new();
    let claimed = checksum_of("T", Some(&json!({"q": "claimed"})));
    h.apply(ev("s").id("c1").at(0).announce_with(Announce {
        tool: "T".into(),
        checksum: Some(claimed.clone()),
        ..Default::default()
    }));
    assert_eq!(
        h.apply(ev("s").id("c1").at(1).announce("T", json!({"q": "real"}))),
        Outcome::Duplicate
    );
    let real = checksum_of("T", Some(&json!({"q": "real"})));
    assert_eq!(
        h.apply(ev("s").at(2).completion(Completion {
            checksum: Some(claimed),
            result: Some(json!(1).into()),
            ..Default::default()
        })),
        Outcome::Pending,
        "the claimed checksum no longer names the call"
    );
    assert_eq!(
        h.apply(ev("s").at(3).completion(Completion {
            checksum: Some(real.clone()),
            result: Some(json!(2).into()),
            ..Default::default()
        })),
        Outcome::Matched(Strategy::Checksum)
    );
    assert_eq!(h.one().checksum, Some(real));
}
