//! The changelog: what `take_changelog` writes, `restore`, `reserve_seqs` and `restate`
//! (docs/ARCHITECTURE.md, Correlation → State and restore).

mod common;

use common::*;
use serde_json::json;
use toolcalls_core::{ChangelogOp, Correlator, Outcome, Position};
use toolcalls_model::*;

/// The changelog's bytes are a format: a restore reads what an older build of this program wrote.
/// A scripted run that makes every kind of entry (calls with and without ids and extras, waiting
/// results with and without a result and facts, remembered calls with and without a record, the
/// partition-wide entry with two input topics, every deadline cause) must write exactly the bytes
/// in `tests/golden/changelog.txt`. Set `TOOLCALLS_BLESS=1` to rewrite the file after a deliberate
/// format change (and a new version byte).
#[test]
fn the_changelog_bytes_do_not_change() {
    let mut h = Harness::new();
    let mut text = String::new();
    let checkpoint = |h: &mut Harness, text: &mut String| {
        text.push_str("--\n");
        for ChangelogOp { key, value, pos } in h.c.take_changelog() {
            let value = value.map_or_else(|| "-".to_owned(), |v| hex(&v));
            text.push_str(&format!("{key} {}:{} {value}\n", pos.topic, pos.offset));
        }
    };
    let attributes = |v: serde_json::Value| v.as_object().cloned();
    let ls = || json!({"cmd": "ls"});

    // A call with an id, a turn and every extra.
    let mut announce = ev("g")
        .thread("t1")
        .turn("r1")
        .id("a1")
        .at(0)
        .announce_with(Announce {
            tool: "Read".into(),
            args: Some(json!({"path": "x", "n": 12345678901234567890u64}).into()),
            side_effects: Some(SideEffects {
                level: Some(SideEffectLevel::ExternalWrite),
                idempotent: Some(false),
                idempotency_key: Some("k1".into()),
            }),
            agent: Some("ag".into()),
            execution: Some("ex".into()),
            hook_context: attributes(json!({"h": 1})),
            ..Default::default()
        });
    announce.attributes = attributes(json!({"at": "v"}));
    h.apply(announce);
    // An id-less call.
    h.apply(ev("g").thread("t1").turn("r1").at(1).announce("Bash", ls()));
    // A result before its announce, then a fact about the same call.
    h.apply(ev("g").thread("t1").id("w1").at(2).completion(Completion {
        tool: Some("Edit".into()),
        args: Some(json!({"f": "a.rs"}).into()),
        result: Some(json!({"ok": true}).into()),
        is_error: true,
        started_at: Some(t(1)),
        duration_ms: Some(7),
        ..Default::default()
    }));
    h.apply(
        ev("g")
            .thread("t1")
            .id("w1")
            .at(3)
            .approval(ApprovalDecision::Requested, None),
    );
    // Facts only, waiting for their call.
    h.apply(
        ev("g")
            .thread("t1")
            .id("w2")
            .at(4)
            .hook("PreToolUse", HookVerdict::Deny),
    );
    // Execution start by checksum, and a denial by call id.
    h.apply(
        ev("g")
            .thread("t1")
            .at(5)
            .exec_start(checksum_of("Bash", Some(&ls()))),
    );
    h.apply(
        ev("g")
            .thread("t1")
            .id("a1")
            .at(6)
            .approval(ApprovalDecision::Denied, Some("ops")),
    );
    checkpoint(&mut h, &mut text);

    // A turn ends; the denied call closes with its result and is remembered with its record; a
    // retry collapses into it.
    h.apply(ev("g").thread("t1").turn("r1").at(7).turn_end());
    h.apply(ev("g").thread("t1").id("a1").at(8).done(json!("late")));
    h.apply(ev("g").thread("t1").id("a2").at(9).announce_with(Announce {
        tool: "Read".into(),
        side_effects: Some(SideEffects {
            idempotency_key: Some("k1".into()),
            ..Default::default()
        }),
        ..Default::default()
    }));
    // Another scope: a turn aborted.
    h.apply(ev("g").turn("r2").id("b1").at(10).announce("T", json!([])));
    h.apply(ev("g").turn("r2").at(11).turn_aborted());
    h.apply(
        ev("g")
            .thread("t1")
            .at(12)
            .exec_end(checksum_of("Bash", Some(&ls())), false, 3),
    );
    checkpoint(&mut h, &mut text);

    // A second input topic, then time moves past every deadline and every remembered id.
    h.c.apply(
        ev("g").id("c1").at(13).announce("U", json!({})),
        Position::new(1, 0),
        &mut h.out,
    );
    h.advance(2_000);
    checkpoint(&mut h, &mut text);
    h.advance(100_000);
    checkpoint(&mut h, &mut text);

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/changelog.txt");
    if std::env::var_os("TOOLCALLS_BLESS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(path).unwrap();
    assert_eq!(text, golden, "the changelog's bytes changed");
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
    // Besides the entries and meta: the session's clock, under a key of its own.
    let scopes = keys.iter().filter(|k| k.starts_with('s')).count();
    assert_eq!(scopes, 1, "{keys:?}");
    assert_eq!(ops.len(), seqs.len() + scopes + 1);
    let last = ops.last().unwrap().pos;
    assert_eq!(last, Position::new(0, 4), "meta: the last event");
    assert_eq!(
        ops.iter()
            .filter(|op| op.pos == Position::new(0, 4))
            .count(),
        3,
        "c's entry, the session's clock and meta were last changed by c's result: {ops:?}"
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
    // A result waiting for its call, taken by the call before the checkpoint: the waiting entry
    // was never written, so nothing of it is written now — only the call, remembered once closed
    // (by the repeat keys of its id-less events), and the partition-wide entry.
    h.apply(ev("s").at(1).done_tool("A", json!(1)));
    h.apply(ev("s").at(0).announce("A", json!({"n": 1})));
    let ops = h.c.take_changelog();
    let first = seqs(&ops);
    assert_eq!(first.len(), 1, "{ops:?}");
    assert!(first[0].1, "a value");
    assert_eq!(
        ops.len(),
        3,
        "the call, the session's clock and meta: {ops:?}"
    );
    // One still pending at the checkpoint is written; once it closes, its tombstone follows,
    // once it is forgotten.
    h.apply(ev("s").at(2).announce("B", json!({"n": 2})));
    let written = seqs(&h.c.take_changelog());
    assert_eq!(written.len(), 1);
    assert!(written[0].1, "a value");
    h.apply(ev("s").at(3).done_tool("B", json!(2)));
    assert_eq!(seqs(&h.c.take_changelog()), [(written[0].0, true)]);
    h.advance(config().dedupe_window_ms as i64 + 10);
    let forgotten = seqs(&h.c.take_changelog());
    assert!(forgotten.contains(&(written[0].0, false)), "{forgotten:?}");
    // A call with an id is remembered once closed (for repeats): that entry is written.
    h.apply(ev("s").id("c").at(4).announce("C", json!({})));
    h.apply(ev("s").id("c").at(5).done(json!(0)));
    let remembered = seqs(&h.c.take_changelog());
    assert_eq!(remembered.len(), 1);
    assert!(remembered[0].1 && remembered[0].0 > written[0].0);
    assert_eq!(h.take().len(), 3);
    // A call that opens and closes between checkpoints and is forgotten before the next one
    // leaves nothing: its key was never written.
    h.apply(ev("s").id("d").at(6).announce("D", json!({})));
    h.apply(ev("s").id("d").at(7).done(json!(0)));
    h.advance(10 * config().dedupe_window_ms as i64);
    let ops = h.c.take_changelog();
    assert!(
        seqs(&ops).iter().all(|&(seq, _)| seq <= remembered[0].0),
        "{ops:?}"
    );
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
    // Entry numbers this program writes stay far below 2^47 (the id tables mark closed calls with
    // that bit and tag ids with the bits above): a key at or past 2^46 is refused as foreign, not
    // read as another entry, so that numbering on from the largest key cannot reach the bit.
    for key in [
        "70368744177664",
        "s70368744177664",
        "140737488355328",
        "2305843009213693952",
        "18446744073709551615",
    ] {
        let e = Correlator::restore(config(), [(key, b"{}".to_vec())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a state key"), "{key}: {e}");
        assert_eq!(Correlator::changelog_key_seq(key), None, "{key}");
    }
    assert_eq!(
        Correlator::changelog_key_seq("70368744177663"),
        Some((1 << 46) - 1)
    );
    // The same for the next entry number the partition-wide entry carries.
    let meta = |next_seq: u64| {
        let mut value = vec![0xB2, 4, 0];
        let mut v = next_seq;
        while v >= 0x80 {
            value.push((v as u8) | 0x80);
            v >>= 7;
        }
        value.extend([v as u8, 0]);
        value
    };
    let restored = Correlator::restore(config(), [("meta", meta(1 << 46))]);
    assert!(restored.is_ok(), "{:?}", restored.err());
    for next_seq in [(1 << 46) + 1, u64::MAX] {
        let e = Correlator::restore(config(), [("meta", meta(next_seq))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`next_seq`"), "{next_seq}: {e}");
    }
}

#[test]
fn restore_order_does_not_change_which_call_holds_an_idempotency_key() {
    // A remembered closed call and a newer live call share one idempotency key; whatever order the
    // changelog hands them back in, the newer call must keep the key.
    let announce = |id: &str, at: i64| ev("s").id(id).at(at).announce_keyed("k");
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An id-less call's record key is `@topic:offset` of its announce — in its record, in the
/// changelog, and in the record of the call restored from it (the key is held as the position
/// while the call is pending).
#[test]
fn an_idless_calls_key_is_its_announce_position_through_a_restore() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("Read", json!({"p": 1})));
    h.apply(ev("s").at(1).announce("Bash", json!({"cmd": "ls"})));
    let latest: Vec<(String, Vec<u8>)> =
        h.c.take_changelog()
            .into_iter()
            .filter_map(|op| Some((op.key, op.value?)))
            .collect();
    let mut restored = Correlator::restore(config(), latest).unwrap();
    let done = ev("s").at(2).done_tool("Bash", json!("x"));
    let mut out = toolcalls_core::Effects::default();
    restored.apply(done.clone(), Position::new(0, 2), &mut out);
    h.apply(done);
    let record = h.one();
    assert_eq!(record.correlation.key, "@0:1");
    assert_eq!(record.stream_id, None);
    assert_eq!(out.records, vec![record]);
}

/// Each kind of entry comes under its kind of key, and one number names one entry: a changelog
/// that puts a call under a scope's key, a scope under an entry's, or entries under both `N` and
/// `sN` is refused (two entries under one number would each take the other's place in the tables).
#[test]
fn restore_refuses_entries_under_the_wrong_kind_of_key() {
    let mut h = Harness::new();
    h.apply(ev("s").id("a").at(0).announce("A", json!({})));
    let ops = h.c.take_changelog();
    let value = |scope: bool| {
        ops.iter()
            .find(|op| op.key != "meta" && op.key.starts_with('s') == scope)
            .and_then(|op| op.value.clone())
            .expect("a call and its scope in the changelog")
    };
    let (call, scope) = (value(false), value(true));
    let refused = |entries: Vec<(&str, Vec<u8>)>| {
        Correlator::restore(config(), entries)
            .err()
            .map(|e| e.to_string())
    };
    assert!(refused(vec![("0", call.clone()), ("s1", scope.clone())]).is_none());
    let e = refused(vec![("s0", call.clone())]).expect("a call under a scope's key");
    assert!(e.contains("`s0` is not a state key"), "{e}");
    let e = refused(vec![("1", scope.clone())]).expect("a scope under an entry's key");
    assert!(e.contains("`1` is not a state key"), "{e}");
    let e = refused(vec![("5", call), ("s5", scope)]).expect("two entries numbered 5");
    assert!(e.contains("`5` and `s5` both name entry 5"), "{e}");
}
