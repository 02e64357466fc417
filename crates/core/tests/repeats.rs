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
    let mut restored = h.restored();
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

/// Past the dedupe window the call is forgotten, but its copy is still told by its age: late.
/// The same call made again, later, is a new call.
#[test]
fn an_idless_copy_after_the_dedupe_window_is_late_and_a_later_call_new() {
    let mut h = Harness::new();
    let call = |at| ev("s").at(at).announce("Read", json!({}));
    h.apply(call(10));
    h.apply(ev("s").at(11).done_tool("Read", json!(1)));
    h.one();
    let after = 10 + config().dedupe_window_ms as i64 + 1;
    h.advance(after);
    assert_eq!(h.apply(call(10)), Outcome::Late);
    assert_eq!(h.apply(call(after)), Outcome::Pending);
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
    let mut restored = h.restored();
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
    let mut restored = h.restored();
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    let copy = ev("s").at(10).exec_start(cs);
    assert_eq!(restored.apply(copy, pos, &mut out), Outcome::Late);
    assert!(out.records.is_empty());
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
            c: h.restored(),
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
    let old = two_calls_of_session_s(&mut h);
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

/// A session whose every call was forgotten while it was idle (its deadlines following the
/// partition's stream time) is dropped, and a note is kept of it: its events delivered again —
/// a file read again a day later — are late, not calls opened a second time under the names of
/// its records, before and after a restore, and once the session goes on.
#[test]
fn a_session_dropped_after_it_forgot_everything_takes_its_copies_as_late() {
    let window = config().dedupe_window_ms as i64;
    let mut h = Harness::new();
    let old = two_calls_of_session_s(&mut h);
    assert_eq!(h.c.forgotten_sessions(), 0);
    // Time moves on without the session: it goes idle, forgets its calls and is dropped.
    h.advance(3 * window);
    assert!(h.take().is_empty());
    assert_eq!(h.c.forgotten_sessions(), 1);

    let mut restored = h.restored();
    assert_eq!(
        restored.forgotten_sessions(),
        1,
        "the note is in the changelog"
    );
    let mut out = toolcalls_core::Effects::default();
    for (i, e) in old.iter().enumerate() {
        let pos = toolcalls_core::Position::new(0, 100 + i as i64);
        assert_eq!(restored.apply(e.clone(), pos, &mut out), Outcome::Late);
        assert_eq!(h.apply(e.clone()), Outcome::Late);
    }
    restored.advance(t(10 * window), &mut out);
    h.advance(10 * window);
    assert!(out.records.is_empty(), "{:#?}", out.records);
    assert!(h.take().is_empty());

    // The session goes on: a new call pairs, and the old copies are still late.
    let resumed = 10 * window;
    assert_eq!(
        h.apply(ev("s").id("d").at(resumed).announce("Read", json!({}))),
        Outcome::Pending
    );
    assert_eq!(h.c.forgotten_sessions(), 0, "the scope took its note back");
    for e in old {
        assert_eq!(h.apply(e), Outcome::Late);
    }
    h.apply(ev("s").id("d").at(resumed + 5).done(json!(3)));
    assert_eq!(h.one().id(), record_id_of("s", "d"));
    // Another session has a note of its own, or none.
    let other = ev("t").id("c").at(0).announce("Read", json!({"f": 1}));
    assert_eq!(h.apply(other), Outcome::Pending);
}

/// Two calls of session `s` at 0 – 15 ms, one with an id and one without, applied to `h` and
/// closed: their events.
fn two_calls_of_session_s(h: &mut Harness) -> [Event; 4] {
    let events = [
        ev("s").id("c").at(0).announce("Read", json!({"f": 1})),
        ev("s").id("c").at(5).done(json!(1)),
        ev("s").at(10).announce("Grep", json!({"p": 2})),
        ev("s").at(15).done_tool("Grep", json!(2)),
    ];
    for e in events.clone() {
        h.apply(e);
    }
    assert_eq!(h.take().len(), 2);
    events
}

/// The record id a call `id` of session `session` (source `test`) gets.
fn record_id_of(session: &str, id: &str) -> RecordId {
    let mut h = Harness::new();
    h.apply(ev(session).id(id).at(0).announce("Read", json!({})));
    h.apply(ev(session).id(id).at(1).done(json!(0)));
    h.one().id()
}

/// At most `max_forgotten_sessions` notes are kept, those of the sessions that forgot latest:
/// the note that goes is written as gone, and that session's copies open calls again.
#[test]
fn notes_of_dropped_sessions_are_bounded() {
    let window = config().dedupe_window_ms as i64;
    let mut h = Harness::with(toolcalls_core::Config {
        max_forgotten_sessions: 2,
        ..config()
    });
    let call = |session: &str, at: i64| {
        [
            ev(session).id("c").at(at).announce("Read", json!({})),
            ev(session).id("c").at(at + 5).done(json!(1)),
        ]
    };
    for (i, session) in ["a", "b", "c"].into_iter().enumerate() {
        for e in call(session, i as i64 * 1_000) {
            h.apply(e);
        }
    }
    assert_eq!(h.take().len(), 3);
    h.advance(3 * window);
    assert_eq!(h.c.forgotten_sessions(), 2);
    let mut restored = h.restored();
    assert_eq!(restored.forgotten_sessions(), 2);
    let mut out = toolcalls_core::Effects::default();
    let mut next = 100;
    let mut apply = |c: &mut toolcalls_core::Correlator, e: &Event| {
        next += 1;
        c.apply(e.clone(), toolcalls_core::Position::new(0, next), &mut out)
    };
    for c in [&mut h.c, &mut restored] {
        let [announce, _] = call("a", 0);
        assert_eq!(apply(c, &announce), Outcome::Pending, "a forgot first");
        for e in call("b", 1_000).iter().chain(&call("c", 2_000)) {
            assert_eq!(apply(c, e), Outcome::Late);
        }
    }
}

/// A fact that names only its tool has no checksum, so no repeat key: a copy of it is found by
/// the pending call that took it, and is that call's repeat however far behind the session's
/// clock it is stamped — not an event too old to tell from a copy of a forgotten call.
#[test]
fn an_old_copy_of_a_fact_its_pending_call_holds_is_a_duplicate() {
    let window = config().dedupe_window_ms as i64;
    let mut h = Harness::new();
    let approval = || {
        let mut e = ev("s").at(0).approval(ApprovalDecision::Approved, None);
        if let EventBody::Approval(a) = &mut e.body {
            a.tool = Some("cat".into());
        }
        e
    };
    assert_eq!(h.apply(approval()), Outcome::Pending);
    assert_eq!(
        h.apply(ev("s").at(100).announce("cat", json!({"x": 1}))),
        Outcome::Pending
    );
    let far = 100 + window + 10;
    assert_eq!(
        h.apply(ev("s").at(far).announce("other", json!({}))),
        Outcome::Pending
    );
    assert_eq!(h.apply(approval()), Outcome::Duplicate);
    h.apply(ev("s").at(far + 1).done_tool("cat", json!("ok")));
    let record = h.one();
    assert_eq!(listed(&record), [0, 1, 3, 4], "the copy is listed");
    assert_eq!(record.correlation.duplicates, 1);
}

/// A copy of a fact that names only its tool, coming once its call closed, is late — known by
/// the repeat key made with its tool's checksum — not a second record (`Orphaned`), before and
/// after a restore.
#[test]
fn a_late_copy_of_a_fact_that_names_only_its_tool_is_late() {
    let approval = || {
        let mut e = ev("s").at(2).approval(ApprovalDecision::Approved, None);
        if let EventBody::Approval(a) = &mut e.body {
            a.tool = Some("cat".into());
        }
        e
    };
    let mut h = Harness::new();
    h.apply(ev("s").at(1).announce("cat", json!({"x": 1})));
    assert_eq!(h.apply(approval()), Outcome::Merged);
    h.apply(ev("s").at(3).done_tool("cat", json!("ok")));
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    let mut restored = h.restored();
    assert_eq!(h.apply(approval()), Outcome::Late);
    let mut out = toolcalls_core::Effects::default();
    let pos = toolcalls_core::Position::new(0, 100);
    assert_eq!(restored.apply(approval(), pos, &mut out), Outcome::Late);
    h.advance(1_000_000);
    restored.advance(t(1_000_000), &mut out);
    assert!(h.take().is_empty());
    assert!(out.records.is_empty(), "{:#?}", out.records);
}

/// A copy of a turn event (delivered again, or its file read again) comes after calls that
/// were announced once the turn had ended: they are not of that turn, and it does not close
/// them.
#[test]
fn a_copy_of_a_turn_end_leaves_the_calls_announced_after_it() {
    for copy in [ev("s").at(0).turn_aborted(), ev("s").at(0).turn_end()] {
        let mut h = Harness::new();
        h.apply(ev("s").at(0).turn_aborted());
        h.apply(
            ev("s")
                .id("c1")
                .at(10)
                .announce("Bash", json!({"cmd": "make"})),
        );
        assert_eq!(h.apply(copy), Outcome::Applied);
        // Past the turn grace after the copy's time: a call it closed would be closed now.
        h.apply(ev("s").id("c2").at(40_000).announce("Read", json!({})));
        h.apply(ev("s").id("c2").at(41_000).done(json!("x")));
        assert_eq!(
            h.apply(ev("s").id("c1").at(50_000).done(json!("built"))),
            Outcome::Matched(Strategy::CallId)
        );
        let records = h.take();
        assert_eq!(records.len(), 2, "{records:#?}");
        assert!(records.iter().all(|r| r.status.phase == Phase::Succeeded));
    }
}

/// A retry without an id collapsed into its call by the key: its copy is a duplicate while the
/// call is pending, and late once the record is out — also after a restore — never another
/// attempt or a new revision.
#[test]
fn copies_of_a_retry_without_an_id_are_repeats_not_attempts() {
    let retry = |ms: i64| {
        ev("s").at(ms).announce_with(Announce {
            tool: "T".into(),
            args: Some(json!({"a": 1}).into()),
            side_effects: Some(SideEffects {
                idempotency_key: Some("k".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let mut h = Harness::new();
    h.apply(retry(0));
    assert_eq!(h.apply(retry(2_000)), Outcome::Collapsed);
    assert_eq!(h.apply(retry(2_000)), Outcome::Duplicate);
    h.apply(ev("s").at(3_000).done_tool("T", json!("ok")));
    let r = h.one();
    assert_eq!((r.correlation.attempts, r.correlation.duplicates), (2, 1));
    assert_eq!(h.apply(retry(2_000)), Outcome::Late);
    assert!(h.take().is_empty());
    let mut restored = Harness {
        c: h.restored(),
        ..Harness::new()
    };
    restored.next = 10;
    assert_eq!(restored.apply(retry(2_000)), Outcome::Late);
    assert!(restored.take().is_empty());

    // A copy of the retry while the call is pending survives a restore too.
    let mut h = Harness::new();
    h.apply(retry(0));
    h.apply(retry(2_000));
    let mut restored = Harness {
        c: h.restored(),
        ..Harness::new()
    };
    restored.next = 10;
    assert_eq!(restored.apply(retry(2_000)), Outcome::Duplicate);
}

/// Two approvals without an id that came before their call, naming only its tool: the second
/// replaces the first in the call's state, and a copy of the first that comes after the record
/// is still late, not an `Orphaned` record of its own.
#[test]
fn a_copy_of_a_replaced_fact_is_late() {
    let approval = |ms: i64| {
        ev("s").at(ms).event(EventBody::Approval(Approval {
            tool: Some("Read".into()),
            args: None,
            checksum: None,
            decision: ApprovalDecision::Approved,
            by: None,
            reason: None,
        }))
    };
    let mut h = Harness::new();
    h.apply(approval(1_000));
    h.apply(approval(2_000));
    h.apply(ev("s").id("c1").at(0).announce("Read", json!({"a": 2})));
    h.apply(ev("s").id("c1").at(3_000).done(json!("r")));
    let r = h.one();
    assert_eq!(r.correlation.events_merged, 4);
    assert_eq!(h.apply(approval(1_000)), Outcome::Late);
    h.advance(10_000);
    assert!(h.take().is_empty(), "no second record");
}
