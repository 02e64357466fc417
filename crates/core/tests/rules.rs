//! One test per correlation rule of ARCHITECTURE.md §4.

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::{Correlator, Outcome, Position};
use toolcalls_model::*;

#[test]
fn call_id_links_announce_and_completion() {
    let mut h = Harness::new();
    assert_eq!(
        h.apply(
            ev("s")
                .id("toolu_1")
                .at(0)
                .announce("Read", json!({"path": "a"}))
        ),
        Outcome::Pending
    );
    assert!(h.take().is_empty());
    assert_eq!(
        h.apply(ev("s").id("toolu_1").at(40).done(json!("text"))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Succeeded);
    assert_eq!(r.correlation.strategy, Strategy::CallId);
    assert_eq!(r.correlation.confidence, 1.0);
    assert_eq!(r.correlation.events_merged, 2);
    assert_eq!(r.stream_id.as_ref().map(CallId::as_str), Some("toolu_1"));
    assert_eq!(
        r.status.output.as_ref().map(|o| o.to_value()),
        Some(json!("text"))
    );
    assert_eq!(r.status.duration_ms, Some(40));
    assert_eq!(
        r.checksum,
        Some(checksum_of("Read", Some(&json!({"path": "a"}))))
    );
    assert_eq!(
        r.id(),
        RecordId::derive(&"test".into(), &"s".into(), None, "toolu_1")
    );
    assert_eq!(h.c.pending_len(), 0);
}

#[test]
fn completion_before_announce_waits_and_links_the_same_way() {
    let mut a = Harness::new();
    a.apply(
        ev("s")
            .id("c1")
            .at(0)
            .announce("Bash", json!({"cmd": "ls"})),
    );
    a.apply(ev("s").id("c1").at(10).done(json!("ok")));
    let expected = a.one();

    let mut b = Harness::new();
    assert_eq!(
        b.apply(ev("s").id("c1").at(10).done(json!("ok"))),
        Outcome::Pending
    );
    assert_eq!(
        b.apply(
            ev("s")
                .id("c1")
                .at(0)
                .announce("Bash", json!({"cmd": "ls"}))
        ),
        Outcome::Matched(Strategy::CallId)
    );
    assert_eq!(b.one(), expected);
}

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
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce("f", json!("{\"b\":1,\"a\":[1.0]}")));
    assert_eq!(
        h.apply(
            ev("s")
                .at(5)
                .done_args("f", json!({"a": [1], "b": 1}), json!(null))
        ),
        Outcome::Matched(Strategy::Checksum)
    );
}

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
fn ids_are_scoped_by_session_source_and_thread() {
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .thread("t1")
            .id("item_1")
            .at(0)
            .announce("sh", json!({"c": 1})),
    );
    h.apply(
        ev("s")
            .thread("t2")
            .id("item_1")
            .at(1)
            .announce("sh", json!({"c": 2})),
    );
    h.apply(ev("s").thread("t2").id("item_1").at(2).done(json!("two")));
    let r = h.one();
    assert_eq!(
        r.spec.input.as_ref().map(|o| o.to_value()),
        Some(json!({"c": 2}))
    );
    assert_eq!(r.metadata.thread.as_ref().unwrap().as_str(), "t2");
    assert_eq!(
        h.apply(ev("other").thread("t1").id("item_1").at(3).done(json!(0))),
        Outcome::Pending
    );
    assert_eq!(
        h.apply(
            ev("s")
                .source("else")
                .thread("t1")
                .id("item_1")
                .at(3)
                .done(json!(0))
        ),
        Outcome::Pending
    );
}

#[test]
fn idempotency_key_collapses_retries_into_one_record() {
    let mut h = Harness::new();
    let announce = |id: &str, at: i64| {
        ev("s").id(id).at(at).announce_with(Announce {
            tool: "zendesk.create_ticket".into(),
            args: Some(json!({"subject": "refund"}).into()),
            side_effects: Some(SideEffects {
                level: Some(SideEffectLevel::ExternalWrite),
                idempotent: Some(false),
                idempotency_key: Some("zendesk-create-12345".into()),
            }),
            ..Default::default()
        })
    };
    h.apply(announce("a1", 0));
    assert_eq!(h.apply(announce("a2", 100)), Outcome::Collapsed);
    assert_eq!(
        h.apply(ev("s").id("a1").at(200).done(json!({"ticketId": 77123}))),
        Outcome::Matched(Strategy::CallId)
    );
    let r = h.one();
    assert_eq!(r.correlation.attempts, 2);
    assert_eq!(r.replay, ReplayPolicy::RequiresOverride);
    // The retry's own completion is a repeat, not a second call.
    assert_eq!(
        h.apply(ev("s").id("a2").at(210).done(json!({"ticketId": 77123}))),
        Outcome::Late
    );
    // A third attempt after the record was published revises it.
    assert_eq!(h.apply(announce("a3", 5_000)), Outcome::Collapsed);
    let r2 = h.one();
    assert_eq!(r2.id(), r.id());
    assert_eq!(r2.metadata.revision, 2);
    assert_eq!(r2.correlation.attempts, 3);
    // Outside the window the key starts a new call.
    assert_eq!(h.apply(announce("a4", 50_000)), Outcome::Pending);
}

#[test]
fn execution_events_merge_by_checksum_one_per_identical_call() {
    let mut h = Harness::new();
    let args = json!({"x": 1});
    let cs = checksum_of("T", Some(&args));
    h.apply(ev("s").id("1").at(0).announce("T", args.clone()));
    h.apply(ev("s").id("2").at(1).announce("T", args.clone()));
    assert_eq!(
        h.apply(ev("s").at(10).exec_start(cs.clone())),
        Outcome::Merged
    );
    assert_eq!(
        h.apply(ev("s").at(11).exec_start(cs.clone())),
        Outcome::Merged
    );
    h.apply(ev("s").at(30).exec_end(cs.clone(), false, 20));
    h.apply(ev("s").id("1").at(31).done(json!(1)));
    let r = h.one();
    assert_eq!(r.status.started_at, Some(t(10)));
    assert_eq!(r.status.duration_ms, Some(20));
    h.apply(ev("s").id("2").at(40).done(json!(2)));
    let r = h.one();
    assert_eq!(
        r.status.started_at,
        Some(t(11)),
        "the second start belongs to the second call"
    );
}

#[test]
fn approvals_and_hook_decisions_are_merged() {
    let mut h = Harness::new();
    h.apply(ev("s").id("c").at(0).announce("send", json!({})));
    h.apply(
        ev("s")
            .id("c")
            .at(1)
            .hook("steps/toolCallRequest", HookVerdict::Allow),
    );
    h.apply(
        ev("s")
            .id("c")
            .at(2)
            .approval(ApprovalDecision::Requested, None),
    );
    h.apply(
        ev("s")
            .id("c")
            .at(3)
            .approval(ApprovalDecision::Approved, Some("alice@example.com")),
    );
    h.apply(ev("s").id("c").at(9).done(json!({"ok": true})));
    let r = h.one();
    let approval = r.spec.approval.unwrap();
    assert!(approval.required);
    assert_eq!(approval.status, ApprovalDecision::Approved);
    assert_eq!(approval.approved_by.as_deref(), Some("alice@example.com"));
    assert_eq!(approval.requested_at, Some(t(2)));
    assert_eq!(r.status.hook_decisions.len(), 1);
    assert_eq!(
        r.status.hook_decisions[0].policy_version.as_deref(),
        Some("v3")
    );
    assert_eq!(r.correlation.events_merged, 5);
}

#[test]
fn facts_that_arrive_before_the_announce_are_kept() {
    let mut h = Harness::new();
    assert_eq!(
        h.apply(ev("s").id("c").at(1).hook("pre", HookVerdict::Allow)),
        Outcome::Pending
    );
    h.apply(ev("s").id("c").at(0).announce("x", json!({})));
    h.apply(ev("s").id("c").at(5).done(json!(0)));
    assert_eq!(h.one().status.hook_decisions.len(), 1);
}

#[test]
fn denied_calls_end_denied_with_or_without_a_result() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("rm", json!({})));
    h.apply(ev("s").id("a").at(1).hook("pre", HookVerdict::Deny));
    h.apply(ev("s").id("a").at(2).error(json!("blocked by policy")));
    assert_eq!(h.one().status.phase, Phase::Denied);

    h.apply(ev("s").id("b").at(10).announce("rm", json!({})));
    h.apply(
        ev("s")
            .id("b")
            .at(11)
            .approval(ApprovalDecision::Denied, Some("bob")),
    );
    h.advance(11 + 999);
    assert!(h.take().is_empty());
    h.advance(11 + 1_000);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Denied);
    assert!(r.status.reason.is_some());
}

#[test]
fn turn_end_interrupts_pending_calls_of_the_turn_after_the_grace() {
    let mut h = Harness::new();
    h.apply(ev("s").turn("t1").id("a").at(0).announce("A", json!({})));
    h.apply(ev("s").turn("t1").id("b").at(0).announce("B", json!({})));
    h.apply(ev("s").turn("t2").id("c").at(0).announce("C", json!({})));
    assert_eq!(
        h.apply(ev("s").turn("t1").at(100).turn_end()),
        Outcome::Applied
    );
    // A result inside the grace still counts.
    h.apply(ev("s").id("a").at(600).done(json!(0)));
    assert_eq!(h.one().status.phase, Phase::Succeeded);
    h.advance(1_100);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Interrupted);
    assert_eq!(r.spec.tool_ref.unwrap().name, "B");
    assert_eq!(h.c.pending_calls(), 1, "the other turn's call is untouched");
}

#[test]
fn turn_aborted_interrupts_too_and_cancelled_results_are_interrupted() {
    let mut h = Harness::new();
    h.apply(ev("s").turn("t").id("a").at(0).announce("A", json!({})));
    h.apply(ev("s").turn("t").at(5).turn_aborted());
    h.advance(1_005);
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Interrupted);
    assert_eq!(r.status.reason.as_deref(), Some("turn aborted"));

    h.apply(ev("s").id("b").at(2_000).announce("B", json!({})));
    h.apply(ev("s").id("b").at(2_001).completion(Completion {
        cancelled: true,
        ..Default::default()
    }));
    assert_eq!(h.one().status.phase, Phase::Interrupted);
}

#[test]
fn calls_time_out_by_stream_time_and_by_punctuation() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("A", json!({})));
    // Another session's traffic moves the partition's stream time.
    h.apply(ev("other").id("z").at(60_000).announce("Z", json!({})));
    let r = h.one();
    assert_eq!(
        (r.status.phase, r.spec.tool_ref.unwrap().name.as_str()),
        (Phase::TimedOut, "A")
    );
    // An idle partition: only the punctuation moves time.
    h.advance(119_999);
    assert!(h.take().is_empty());
    h.advance(120_000);
    assert_eq!(h.one().status.phase, Phase::TimedOut);
    assert_eq!(h.c.stream_time(), Some(t(120_000)));
    // Punctuation never moves time backwards.
    h.advance(5);
    assert_eq!(h.c.stream_time(), Some(t(120_000)));
}

#[test]
fn state_cap_evicts_the_oldest_as_records() {
    let mut h = Harness::with(toolcalls_core::Config {
        max_pending: 2,
        ..config()
    });
    h.apply(ev("s").id("1").at(0).announce("A", json!({})));
    h.apply(ev("s").id("2").at(1).announce("A", json!({})));
    assert!(h.take().is_empty());
    h.apply(ev("s").id("3").at(2).announce("A", json!({})));
    let r = h.one();
    assert_eq!(r.status.phase, Phase::Evicted);
    assert_eq!(r.stream_id.unwrap().as_str(), "1");
    assert_eq!(h.c.pending_len(), 2);
    // Its result, when it comes, is not a new call.
    assert_eq!(h.apply(ev("s").id("1").at(3).done(json!(0))), Outcome::Late);
}

#[test]
fn state_cap_evicts_oldest_first_while_calls_come_and_go() {
    let mut h = Harness::with(toolcalls_core::Config {
        max_pending: 3,
        ..config()
    });
    let mut evicted = Vec::new();
    let mut note = |h: &mut Harness| {
        for r in h.take() {
            if r.status.phase == Phase::Evicted {
                evicted.push(r.stream_id.unwrap().as_str().to_owned());
            }
        }
    };
    for (i, id) in ["1", "2", "3", "4"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(i as i64).announce("A", json!({})));
    }
    note(&mut h);
    // 2 completes; then 5 fits without an eviction, and each later call evicts the oldest left.
    h.apply(ev("s").id("2").at(10).done(json!(0)));
    for (i, id) in ["5", "6", "7"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(11 + i as i64).announce("A", json!({})));
        note(&mut h);
    }
    let views: Vec<String> =
        h.c.pending_views()
            .map(|r| r.stream_id.unwrap().as_str().to_owned())
            .collect();
    for (i, id) in ["8", "9"].into_iter().enumerate() {
        h.apply(ev("s").id(id).at(20 + i as i64).announce("A", json!({})));
        note(&mut h);
    }
    assert_eq!(evicted, ["1", "3", "4", "5", "6"]);
    assert_eq!(views, ["5", "6", "7"], "oldest first");
    assert_eq!(h.c.pending_len(), 3);
}

#[test]
fn changelog_restore_continues_where_it_stopped() {
    let mut h = Harness::new();
    h.apply(
        ev("s")
            .id("a")
            .at(0)
            .announce("A", json!({"k": [1, 2.5, "x"]})),
    );
    h.apply(ev("s").at(1).announce("B", json!({})));
    h.apply(ev("s").id("z").at(2).done(json!("early")));
    h.apply(ev("s").id("c").at(3).announce("C", json!({})));
    h.apply(ev("s").id("c").at(4).done(json!(0)));
    h.take();
    let ops = h.c.take_changelog();
    assert!(ops.iter().any(|op| op.key == "meta"));
    assert!(ops.iter().all(|op| op.pos <= Position::new(0, 4)));
    // One op per entry, in key order (the partition-wide entry last), each at the position of the
    // last event that changed it: the announce and the result of c changed one entry.
    let keys: Vec<&str> = ops.iter().map(|op| op.key.as_str()).collect();
    let seqs: Vec<u64> = keys.iter().filter_map(|k| k.parse().ok()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    assert_eq!(keys.last(), Some(&"meta"));
    assert_eq!(ops.len(), seqs.len() + 1);
    let last = ops.last().unwrap().pos;
    assert_eq!(last, Position::new(0, 4), "meta: the last event");
    assert_eq!(
        ops.iter()
            .filter(|op| op.pos == Position::new(0, 4))
            .count(),
        2,
        "c's entry and meta were last changed by c's result: {ops:?}"
    );
    assert!(h.c.take_changelog().is_empty(), "taken once");
    let latest: Vec<(String, Vec<u8>)> = ops
        .into_iter()
        .filter_map(|op| Some((op.key, op.value?)))
        .collect();
    let mut restored = Correlator::restore(config(), latest).unwrap();
    assert_eq!(restored.pending_len(), h.c.pending_len());
    assert_eq!(restored.stream_time(), h.c.stream_time());
    assert_eq!(
        restored.pending_views().collect::<Vec<_>>(),
        h.c.pending_views().collect::<Vec<_>>()
    );
    // Both continue identically: a late repeat of c, a result for a, the end of time.
    let mut out = toolcalls_core::Effects::default();
    for (i, e) in [
        ev("s").id("c").at(5).done(json!(0)),
        ev("s").id("a").at(6).done(json!("A!")),
        ev("s").at(7).done_tool("B", json!("b")),
    ]
    .into_iter()
    .enumerate()
    {
        let pos = Position::new(1, i as i64);
        assert_eq!(
            restored.apply(e.clone(), pos, &mut out),
            h.c.apply(e, pos, &mut h.out)
        );
    }
    restored.advance(t(1_000_000), &mut out);
    h.advance(1_000_000);
    assert_eq!(out.records, h.take());
}

#[test]
fn an_entry_born_and_gone_between_checkpoints_writes_no_tombstone() {
    let mut h = Harness::new();
    let seqs = |ops: &[toolcalls_core::ChangelogOp]| -> Vec<(u64, bool)> {
        ops.iter()
            .filter_map(|op| Some((Correlator::changelog_key_seq(&op.key)?, op.value.is_some())))
            .collect()
    };
    // An id-less call that opens and closes before the checkpoint: nothing of it was ever
    // written, so nothing of it is written now (only the partition-wide entry).
    h.apply(ev("s").at(0).announce("A", json!({"n": 1})));
    h.apply(ev("s").at(1).done_tool("A", json!(1)));
    let ops = h.c.take_changelog();
    assert_eq!(seqs(&ops), [], "{ops:?}");
    assert_eq!(ops.len(), 1);
    // One still pending at the checkpoint is written; once it closes, its tombstone follows.
    h.apply(ev("s").at(2).announce("B", json!({"n": 2})));
    let written = seqs(&h.c.take_changelog());
    assert_eq!(written.len(), 1);
    assert!(written[0].1, "a value");
    h.apply(ev("s").at(3).done_tool("B", json!(2)));
    assert_eq!(seqs(&h.c.take_changelog()), [(written[0].0, false)]);
    // A call with an id is remembered once closed (for repeats): that entry is written.
    h.apply(ev("s").id("c").at(4).announce("C", json!({})));
    h.apply(ev("s").id("c").at(5).done(json!(0)));
    let remembered = seqs(&h.c.take_changelog());
    assert_eq!(remembered.len(), 1);
    assert!(remembered[0].1 && remembered[0].0 > written[0].0);
    assert_eq!(h.take().len(), 3);
}

#[test]
fn reserved_sequence_numbers_are_never_taken_by_new_entries() {
    // A restore leaves out entries of batches that never committed, but on some brokers their
    // values stay readable under their keys; new entries are numbered past them.
    let mut h = Harness::new();
    h.apply(ev("s").at(0).announce("A", json!({})));
    let ops = h.c.take_changelog();
    let latest: Vec<(String, Vec<u8>)> = ops
        .into_iter()
        .filter_map(|op| Some((op.key, op.value?)))
        .collect();
    let first = latest
        .iter()
        .find_map(|(k, _)| Correlator::changelog_key_seq(k))
        .unwrap();
    let mut restored = Correlator::restore(config(), latest).unwrap();
    restored.reserve_seqs(first + 100);
    // The entry numbers an announce of `tool` at `ms` writes.
    let mut out = toolcalls_core::Effects::default();
    let mut announce = |c: &mut Correlator, tool: &str, ms: i64| -> Vec<u64> {
        c.apply(
            ev("s").at(ms).announce(tool, json!({})),
            Position::new(0, ms),
            &mut out,
        );
        c.take_changelog()
            .iter()
            .filter_map(|op| Correlator::changelog_key_seq(&op.key))
            .collect()
    };
    assert_eq!(
        announce(&mut restored, "B", 1),
        [first + 100],
        "B's entry, numbered past the reserved keys"
    );
    // Lowering it again does nothing.
    restored.reserve_seqs(0);
    assert_eq!(announce(&mut restored, "C", 2), [first + 101]);
}

#[test]
fn restore_rejects_foreign_changelogs_with_a_clear_error() {
    let e = Correlator::restore(config(), [("7", b"{\"nope\":1}".to_vec())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("changelog entry `7`"), "{e}");
    assert!(Correlator::restore(config(), [("k/x", b"{}".to_vec())]).is_err());
}

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

#[test]
fn restore_order_does_not_change_which_call_holds_an_idempotency_key() {
    // A remembered closed call and a newer live call share one idempotency key; whatever order the
    // changelog hands them back in, the newer call must keep the key.
    let announce = |id: &str, at: i64| {
        ev("s").id(id).at(at).announce_with(Announce {
            tool: "send".into(),
            args: Some(json!({"to": "x"}).into()),
            side_effects: Some(SideEffects {
                idempotency_key: Some("k".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    h.apply(ev("s").id("a1").at(1).done(json!(1)));
    h.apply(announce("a2", 15_000)); // past the 10 s window: a new call
    h.take();
    let mut ops: Vec<(String, Vec<u8>)> =
        h.c.take_changelog()
            .into_iter()
            .filter_map(|op| Some((op.key, op.value?)))
            .collect();
    for order in 0..2 {
        if order == 1 {
            ops.reverse();
        }
        let mut restored = Correlator::restore(config(), ops.clone()).unwrap();
        let mut out = toolcalls_core::Effects::default();
        assert_eq!(
            restored.apply(announce("a3", 15_500), Position::new(1, 0), &mut out),
            Outcome::Collapsed
        );
        assert!(
            out.records.is_empty(),
            "collapsed into the live call, not a revision of the closed one"
        );
        restored.apply(
            ev("s").id("a2").at(16_000).done(json!(2)),
            Position::new(1, 1),
            &mut out,
        );
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].correlation.attempts, 2);
    }
}

#[test]
fn a_retry_whose_result_came_first_is_not_collapsed_away() {
    let announce = |id: &str, at: i64| {
        ev("s").id(id).at(at).announce_with(Announce {
            tool: "send".into(),
            args: Some(json!({"to": "x"}).into()),
            side_effects: Some(SideEffects {
                idempotency_key: Some("k".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let mut h = Harness::new();
    h.apply(announce("a1", 0));
    // The retry's result arrives before the retry's announce.
    assert_eq!(
        h.apply(ev("s").id("a2").at(5).done(json!("second"))),
        Outcome::Pending
    );
    assert_eq!(
        h.apply(announce("a2", 4)),
        Outcome::Matched(Strategy::CallId)
    );
    assert_eq!(
        h.one().status.output.as_ref().map(|o| o.to_value()),
        Some(json!("second"))
    );
    h.apply(ev("s").id("a1").at(6).done(json!("first")));
    assert_eq!(h.one().correlation.attempts, 1);
}

#[test]
fn a_topic_read_ahead_does_not_time_out_calls_whose_results_are_unread() {
    // A backlog: the announce topic (0) is read far ahead of the completion topic (1).
    let mut c = Correlator::new(toolcalls_core::Config {
        input_topics: 2,
        ..config()
    });
    let mut out = toolcalls_core::Effects::default();
    c.apply(
        ev("s").id("a").at(0).announce("A", json!({})),
        Position::new(0, 0),
        &mut out,
    );
    assert_eq!(
        c.stream_time(),
        None,
        "no watermark before both topics have been seen"
    );
    for i in 1..50 {
        // An hour of other sessions' announces, far past the 60 s call timeout.
        c.apply(
            ev("o")
                .id(&format!("x{i}"))
                .at(i * 100_000)
                .announce("B", json!({})),
            Position::new(0, i),
            &mut out,
        );
    }
    c.apply(
        ev("s").id("early").at(1).done(json!(0)),
        Position::new(1, 0),
        &mut out,
    );
    assert_eq!(
        c.stream_time(),
        Some(t(1)),
        "the slower topic holds stream time back"
    );
    assert!(
        out.records
            .iter()
            .all(|r| r.status.phase != Phase::TimedOut),
        "{:?}",
        out.records
    );
    c.apply(
        ev("s").id("a").at(2_000).done(json!("ok")),
        Position::new(1, 1),
        &mut out,
    );
    let a = out
        .records
        .iter()
        .find(|r| r.stream_id.as_ref().map(CallId::as_str) == Some("a"))
        .unwrap();
    assert_eq!(a.status.phase, Phase::Succeeded);
    // A completion topic that has gone quiet: the runtime moves past it to the newest event time.
    assert_eq!(c.max_event_time(), Some(t(4_900_000)));
    c.advance(c.max_event_time().unwrap(), &mut out);
    assert!(out
        .records
        .iter()
        .any(|r| r.status.phase == Phase::TimedOut));
}

#[test]
fn the_watermark_holds_when_each_topic_is_in_time_order() {
    // Three sessions; every announce is read before any result (a backlog read from the start),
    // the results topic in event-time order across sessions, as live traffic writes it.
    let mut c = Correlator::new(toolcalls_core::Config {
        input_topics: 2,
        ..config()
    });
    let mut out = toolcalls_core::Effects::default();
    let mut announces = Vec::new();
    let mut results = Vec::new();
    for k in 0..120 {
        for s in 0..3 {
            announces.push(
                ev(&format!("s{s}"))
                    .id(&format!("c{k}"))
                    .at(k * 1000)
                    .announce("r", json!({"p": k})),
            );
            results.push(
                ev(&format!("s{s}"))
                    .id(&format!("c{k}"))
                    .at(k * 1000 + 500)
                    .done(json!(k)),
            );
        }
    }
    for (i, e) in announces.into_iter().enumerate() {
        c.apply(e, Position::new(0, i as i64), &mut out);
    }
    for (i, e) in results.into_iter().enumerate() {
        c.apply(e, Position::new(1, i as i64), &mut out);
    }
    assert_eq!(out.records.len(), 360);
    assert!(out
        .records
        .iter()
        .all(|r| r.status.phase == Phase::Succeeded));
}
