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

#[test]
fn same_call_id_with_another_tool_is_rejected_after_the_call_closed_too() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    h.apply(ev("s").id("c").at(1).done(json!(1)));
    h.one();
    // Its own announce again is a late repeat; another tool under its id is another call, which
    // that id cannot name: refused (dead-lettered), not taken for a repeat.
    assert_eq!(
        h.apply(ev("s").id("c").at(2).announce("Read", json!({}))),
        Outcome::Late
    );
    let write = || ev("s").id("c").at(3).announce("Write", json!({}));
    assert_eq!(h.apply(write()), Outcome::Rejected("conflicting_call_id"));
    // The same after a restore: the changelog keeps the key of the closed call's tool.
    let mut restored = restored_from(&mut h);
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    assert_eq!(
        restored.apply(write(), pos, &mut out),
        Outcome::Rejected("conflicting_call_id")
    );
    let read = ev("s").id("c").at(4).announce("Read", json!({}));
    assert_eq!(restored.apply(read, pos, &mut out), Outcome::Late);
    assert!(out.records.is_empty());
}

#[test]
fn an_announce_under_the_id_of_an_orphaned_result_is_checked_by_its_tool_when_it_named_one() {
    let mut h = Harness::new();
    h.apply(ev("s").id("named").at(0).done_tool("Read", json!(1)));
    h.apply(ev("s").id("bare").at(0).done(json!(1)));
    // Past the orphan grace (5 s), inside the dedupe window (20 s).
    h.advance(6_000);
    assert_eq!(h.take().len(), 2, "two Orphaned records");
    let late = |id: &str, tool: &str| ev("s").id(id).at(1).announce(tool, json!({}));
    assert_eq!(h.apply(late("named", "Read")), Outcome::Late);
    assert_eq!(
        h.apply(late("named", "Write")),
        Outcome::Rejected("conflicting_call_id")
    );
    // A result that named no tool: any announce under its id is its late call.
    assert_eq!(h.apply(late("bare", "Write")), Outcome::Late);
}

#[test]
fn a_copy_of_an_idless_announce_is_a_duplicate_while_pending_and_late_once_closed() {
    let mut h = Harness::new();
    let call = || ev("s").at(10).announce("Read", json!({"path": "a"}));
    assert_eq!(h.apply(call()), Outcome::Pending);
    assert_eq!(h.apply(call()), Outcome::Duplicate);
    assert_eq!(
        h.apply(ev("s").at(12).done_tool("Read", json!("text"))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Succeeded);
    assert_eq!(r.correlation.duplicates, 1);
    assert_eq!(r.correlation.events_merged, 3);
    // A copy delivered after the result: no new call, no TimedOut record later.
    assert_eq!(h.apply(call()), Outcome::Late);
    h.advance(10_000_000);
    assert!(h.take().is_empty());
}

#[test]
fn a_copy_of_an_idless_result_is_a_duplicate_while_waiting_and_late_once_closed() {
    let mut h = Harness::new();
    let result = || ev("s").at(12).done_tool("Read", json!("text"));
    assert_eq!(h.apply(result()), Outcome::Pending);
    assert_eq!(h.apply(result()), Outcome::Duplicate);
    h.apply(ev("s").at(10).announce("Read", json!({"path": "a"})));
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Succeeded);
    assert_eq!(r.correlation.duplicates, 1);
    // After the record: the copy takes no other call of the tool.
    h.apply(ev("s").at(13).announce("Read", json!({"path": "b"})));
    assert_eq!(h.apply(result()), Outcome::Late);
    h.apply(ev("s").at(14).done_tool("Read", json!("b's text")));
    let r = h.one();
    assert_eq!(r.spec.input, Some(Json::from(json!({"path": "b"}))));
    assert_eq!(r.status.output, Some(Json::from(json!("b's text"))));
}

#[test]
fn identical_idless_calls_at_different_times_are_different_calls() {
    let mut h = Harness::new();
    let call = |ms| ev("s").at(ms).announce("Read", json!({"path": "a"}));
    assert_eq!(h.apply(call(10)), Outcome::Pending);
    assert_eq!(h.apply(call(11)), Outcome::Pending);
    // Same time, another result: the same announce time does not make results copies.
    h.apply(ev("s").at(20).done_tool("Read", json!(1)));
    assert_eq!(
        h.apply(ev("s").at(20).done_tool("Read", json!(2))),
        Outcome::Matched(Strategy::ToolFifo)
    );
    assert_eq!(h.take().len(), 2);
    // Another scope's identical event is no copy either.
    assert_eq!(
        h.apply(ev("other").at(10).announce("Read", json!({"path": "a"}))),
        Outcome::Pending
    );
}

#[test]
fn an_idless_copy_after_the_dedupe_window_is_a_new_call() {
    let mut h = Harness::new();
    let call = || ev("s").at(10).announce("Read", json!({}));
    h.apply(call());
    h.apply(ev("s").at(11).done_tool("Read", json!(1)));
    h.one();
    h.advance(10 + config().dedupe_window_ms as i64 + 1);
    assert_eq!(h.apply(call()), Outcome::Pending);
}

#[test]
fn idless_repeats_are_known_after_a_restore() {
    let mut h = Harness::new();
    let call = || ev("s").at(10).announce("Read", json!({}));
    let result = || ev("s").at(11).done_tool("Read", json!(1));
    h.apply(call());
    h.apply(result());
    h.apply(ev("s").at(12).announce("Write", json!({})));
    h.apply(ev("s").at(13).done_tool("Grep", json!(2)));
    h.take();
    let mut restored = restored_from(&mut h);
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    assert_eq!(restored.apply(call(), pos, &mut out), Outcome::Late);
    assert_eq!(restored.apply(result(), pos, &mut out), Outcome::Late);
    let write = ev("s").at(12).announce("Write", json!({}));
    assert_eq!(restored.apply(write, pos, &mut out), Outcome::Duplicate);
    let grep = ev("s").at(13).done_tool("Grep", json!(2));
    assert_eq!(restored.apply(grep, pos, &mut out), Outcome::Duplicate);
    assert!(out.records.is_empty());
}

#[test]
fn a_copy_of_an_idless_fact_is_a_duplicate_while_pending_and_late_once_closed() {
    let mut h = Harness::new();
    let args = json!({"x": 1});
    let cs = checksum_of("T", Some(&args));
    h.apply(ev("s").id("1").at(0).announce("T", args.clone()));
    h.apply(ev("s").id("2").at(1).announce("T", args.clone()));
    let start = || ev("s").at(10).exec_start(cs.clone());
    let end = || ev("s").at(30).exec_end(cs.clone(), false, 20);
    assert_eq!(h.apply(start()), Outcome::Merged);
    // The copy goes to the call that took the original, not to the identical one lacking it.
    assert_eq!(h.apply(start()), Outcome::Duplicate);
    assert_eq!(h.apply(end()), Outcome::Merged);
    assert_eq!(h.apply(end()), Outcome::Duplicate);
    h.apply(ev("s").id("1").at(31).done(json!(1)));
    let r = h.one();
    assert_eq!(
        (r.correlation.duplicates, r.correlation.events_merged),
        (2, 6)
    );
    assert_eq!(r.status.started_at, Some(t(10)));
    // Once the call is closed, copies are late: no record of their own, ever.
    assert_eq!(h.apply(start()), Outcome::Late);
    assert_eq!(h.apply(end()), Outcome::Late);
    h.apply(ev("s").id("2").at(40).done(json!(2)));
    let r = h.one();
    assert_eq!(
        r.status.started_at,
        Some(t(1)),
        "no execution start reached the second call: it started when announced"
    );
    h.advance(1_000_000);
    assert!(h.take().is_empty());
}

#[test]
fn a_copy_of_a_fact_with_an_id_is_not_merged_twice() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    let hook = || ev("s").id("c").at(1).hook("pre", HookVerdict::Allow);
    assert_eq!(h.apply(hook()), Outcome::Merged);
    assert_eq!(h.apply(hook()), Outcome::Duplicate);
    let approval = || {
        ev("s")
            .id("c")
            .at(2)
            .approval(ApprovalDecision::Approved, Some("me"))
    };
    assert_eq!(h.apply(approval()), Outcome::Merged);
    assert_eq!(h.apply(approval()), Outcome::Duplicate);
    h.apply(ev("s").id("c").at(3).done(json!(1)));
    let r = h.one();
    assert_eq!(r.status.hook_decisions.len(), 1);
    assert_eq!(r.correlation.duplicates, 2);
    assert_eq!(h.apply(hook()), Outcome::Late);
}

#[test]
fn a_copy_of_an_idless_fact_is_late_after_a_restore() {
    let mut h = Harness::new();
    let args = json!({"x": 1});
    let cs = checksum_of("T", Some(&args));
    h.apply(ev("s").id("1").at(0).announce("T", args));
    h.apply(ev("s").at(10).exec_start(cs.clone()));
    h.apply(ev("s").id("1").at(31).done(json!(1)));
    h.one();
    let mut restored = restored_from(&mut h);
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    let copy = ev("s").at(10).exec_start(cs);
    assert_eq!(restored.apply(copy, pos, &mut out), Outcome::Late);
    assert!(out.records.is_empty());
}

/// A correlator restored from everything `h` wrote to its changelog.
fn restored_from(h: &mut Harness) -> toolcalls_core::Correlator {
    let latest: Vec<(String, Vec<u8>)> =
        h.c.take_changelog()
            .into_iter()
            .filter_map(|op| Some((op.key, op.value?)))
            .collect();
    toolcalls_core::Correlator::restore(config(), latest).unwrap()
}

/// The positions a record lists, all of input 0.
fn listed(r: &ToolCallRecord) -> Vec<i64> {
    r.provenance
        .0
        .iter()
        .flat_map(|o| o.positions().to_vec())
        .collect()
}

/// A producer that sends one event over and over: the entry counts every copy but lists only the
/// first `MAX_LISTED_REPEATS`, so neither its changelog value nor its record grows without bound.
/// The count and the bound hold across a restore; a copy that brings the arguments is listed
/// whatever the count.
#[test]
fn copies_past_the_bound_are_counted_not_listed() {
    let bound = toolcalls_core::MAX_LISTED_REPEATS as i64;
    let extra = 100;
    for idless in [false, true] {
        let mut h = Harness::new();
        let announce = |at| {
            let e = ev("s").at(at);
            let e = if idless { e } else { e.id("c") };
            e.announce("Read", json!({"f": 1}))
        };
        h.apply(announce(0));
        for _ in 0..bound + extra / 2 {
            assert_eq!(h.apply(announce(0)), Outcome::Duplicate);
        }
        let mut restored = Harness {
            c: restored_from(&mut h),
            out: Default::default(),
            next: h.next,
        };
        for _ in 0..extra / 2 {
            assert_eq!(restored.apply(announce(0)), Outcome::Duplicate);
        }
        let done = ev("s").at(5);
        let done = if idless {
            done.done_tool("Read", json!(1))
        } else {
            done.id("c").done(json!(1))
        };
        restored.apply(done);
        let r = restored.one();
        assert_eq!(
            r.correlation.duplicates as i64,
            bound + extra,
            "idless {idless}"
        );
        assert_eq!(r.correlation.events_merged as i64, bound + extra + 2);
        let result_at = restored.next - 1;
        let want: Vec<i64> = (0..=bound).chain([result_at]).collect();
        assert_eq!(listed(&r), want, "idless {idless}");
    }

    // Copies of a result that waits for its announce.
    let mut h = Harness::new();
    for _ in 0..bound + 1 + extra {
        h.apply(ev("s").id("c").at(5).done(json!(1)));
    }
    h.apply(ev("s").id("c").at(0).announce("Read", json!({})));
    let r = h.one();
    assert_eq!(r.correlation.duplicates as i64, bound + extra);
    let mut want: Vec<i64> = (0..=bound).collect();
    want.push(h.next - 1);
    assert_eq!(listed(&r), want);

    // An announce without arguments, its copies, then one that brings them: listed.
    let mut h = Harness::new();
    let bare = || {
        ev("s").id("c").at(0).announce_with(Announce {
            tool: "Read".into(),
            ..Default::default()
        })
    };
    h.apply(bare());
    for _ in 0..bound + extra {
        h.apply(bare());
    }
    h.apply(ev("s").id("c").at(0).announce("Read", json!({"f": 1})));
    let brought = h.next - 1;
    h.apply(ev("s").id("c").at(5).done(json!(1)));
    let r = h.one();
    assert!(listed(&r).contains(&brought), "{:?}", listed(&r).last());
    assert!(
        r.spec.input.is_some(),
        "the arguments the last copy brought"
    );
}

/// A session delivered again once its calls are forgotten (`dedupe_window` of its clock after
/// they closed): a copy of an announce would open a call that times out at once, a copy of a
/// result an orphan, each under the name of the record the call had. They are late instead,
/// with an id or without; an event the scope has seen nothing like at that age is late too, and
/// what is recent still pairs.
#[test]
fn copies_of_forgotten_calls_are_late_not_second_records() {
    let window = config().dedupe_window_ms as i64;
    let mut h = Harness::new();
    let old = [
        ev("s").id("c").at(0).announce("Read", json!({"f": 1})),
        ev("s").id("c").at(5).done(json!(1)),
        ev("s").at(10).announce("Grep", json!({"p": 2})),
        ev("s").at(15).done_tool("Grep", json!(2)),
    ];
    for e in old.clone() {
        h.apply(e);
    }
    assert_eq!(h.take().len(), 2);
    // The session goes on well past the window: its calls are forgotten.
    let later = 3 * window;
    h.apply(ev("s").id("d").at(later).announce("Read", json!({"f": 3})));
    h.apply(ev("s").id("d").at(later + 5).done(json!(3)));
    assert_eq!(h.take().len(), 1);
    for e in old {
        assert_eq!(h.apply(e), Outcome::Late);
    }
    let unseen = ev("s")
        .id("e")
        .at(later - window - 1)
        .announce("Read", json!({}));
    assert_eq!(h.apply(unseen), Outcome::Late);
    // Within the window of the scope's clock, an event nothing holds opens its call.
    let recent = ev("s")
        .id("f")
        .at(later - window + 10)
        .announce("Read", json!({}));
    assert_eq!(h.apply(recent), Outcome::Pending);
    h.apply(ev("s").id("f").at(later + 10).done(json!(4)));
    assert_eq!(h.take().len(), 1, "the recent call's own record");
    h.advance(10 * later);
    assert!(h.take().is_empty(), "no second record");
    // Another session has a clock of its own.
    let other = ev("t").id("c").at(0).announce("Read", json!({"f": 1}));
    assert_eq!(h.apply(other), Outcome::Pending);
}
