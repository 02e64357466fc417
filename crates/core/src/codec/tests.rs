//! Entries through the codec: round trips, the golden bytes, and values that are cut, corrupt
//! or foreign.

use super::format::{TAG_META, VERSION};
use super::{decode, encode};
use crate::correlator::RESTORED_SEQ_LIMIT;
use crate::state::{
    Call, Closed, DeadlineCause, Digest, Done, Entry, EntryRef, ExecEnd, Extras, Fact, Idempotent,
    Live, Meta, PackedPos, ScopeKey, WaitingResult,
};
use crate::Position;
use serde_json::json;
use toolcalls_model::{
    checksum_of, ApprovalDecision, ApprovalState, CallId, HookDecisionEntry, HookVerdict, Json,
    RecordId, SessionId, SideEffects, Source, ThreadId, Timestamp,
};

fn scope(thread: bool) -> ScopeKey {
    ScopeKey {
        source: Source::from("claude-code"),
        session: SessionId::from("sess-ü"),
        thread: thread.then(|| ThreadId::from("t1")),
    }
}

fn t(ms: i64) -> Timestamp {
    Timestamp(ms)
}

fn bare_call() -> Call {
    Call {
        scope: 0,
        tool: 0,
        key: "@0:17".into(),
        has_id: false,
        record_id: RecordId(uuid::Uuid::from_u128(7)),
        turn: None,
        args: None,
        checksum: None,
        created_at: t(1_763_800_000_000),
        updated_at: t(1_763_800_000_000),
        deadline: t(1_763_800_600_000),
        cause: DeadlineCause::Timeout,
        denied: false,
        events: 1,
        duplicates: 0,
        attempts: 1,
        pos: PackedPos::new(Position::new(0, 17)).unwrap(),
        extras: None,
    }
}

fn full_call() -> Call {
    let args = Json::parse(r#"{"path": "a.rs", "n": 12345678901234567890}"#).unwrap();
    let extras = Extras {
        aliases: vec![CallId::from("retry-1")],
        side_effects: Some(SideEffects {
            level: None,
            idempotent: Some(true),
            idempotency_key: Some("k-1".into()),
        }),
        agent: Some("main".into()),
        execution: Some("sandbox".into()),
        hook_context: Some(json!({"cwd": "/w"}).as_object().unwrap().clone()),
        started_at: Some(t(5)),
        exec_end: Some(ExecEnd {
            at: t(9),
            is_error: true,
            duration_ms: Some(4),
        }),
        approval: Some(ApprovalState {
            required: true,
            status: ApprovalDecision::Approved,
            requested_at: Some(t(2)),
            approved_by: Some("ops".into()),
            approved_at: Some(t(3)),
            reason: None,
        }),
        hooks: vec![HookDecisionEntry {
            hook: "PreToolUse".into(),
            decision: HookVerdict::Allow,
            policy_id: None,
            policy_version: None,
            reason: Some("fine".into()),
            at: t(1),
        }],
        attributes: Some(json!({"x": [1, 2]}).as_object().unwrap().clone()),
        repeats: Vec::new(),
        positions: vec![Position::new(1, 5), Position::new(0, i64::MAX)],
    };
    Call {
        key: "toolu_01ABC".into(),
        has_id: true,
        turn: Some("turn-3".into()),
        checksum: Some(Digest::of(&checksum_of("Read", Some(&args.to_value())))),
        args: Some(args),
        updated_at: t(1_763_799_999_000),
        deadline: t(i64::MAX),
        cause: DeadlineCause::TurnAborted,
        denied: true,
        events: 4,
        duplicates: 2,
        attempts: 3,
        extras: Some(Box::new(extras)),
        ..bare_call()
    }
}

fn waiting(done: bool, extras: bool) -> WaitingResult {
    WaitingResult {
        scope: 0,
        key: "call_9".into(),
        has_id: true,
        record_id: RecordId(uuid::Uuid::from_u128(u128::MAX)),
        turn: Some("turn".into()),
        tool: Some("shell".into()),
        args: Some(Json::parse("[]").unwrap()),
        checksum: Some(Digest([3; 32])),
        done: done.then(|| Done {
            at: t(-5),
            result: Some(Json::parse(r#""ok\n""#).unwrap()),
            is_error: true,
            cancelled: true,
            started_at: Some(t(-9)),
            duration_ms: Some(u64::MAX),
            pos: Position::new(1, 99),
        }),
        facts: if extras {
            vec![
                Fact::ExecStart { at: t(1) },
                Fact::Approval {
                    at: t(2),
                    decision: ApprovalDecision::Denied,
                    by: None,
                    reason: Some("no".into()),
                },
            ]
        } else {
            Vec::new()
        },
        positions: if extras {
            vec![Position::new(0, 3), Position::new(u16::MAX, -1)]
        } else {
            Vec::new()
        },
        first_at: t(0),
        updated_at: t(10),
        events: 2,
        duplicates: 1,
        deadline: t(60_000),
        attributes: extras.then(|| json!({"a": 1}).as_object().unwrap().clone()),
    }
}

fn call_round_trip(s: &ScopeKey, call: &Call) -> Vec<u8> {
    let bytes = encode(&EntryRef::Call {
        scope: s,
        tool: "Read",
        call,
    });
    match decode(&bytes).unwrap() {
        Entry::Call {
            scope,
            tool,
            call: back,
        } => {
            assert_eq!(&scope, s);
            assert_eq!(&*tool, "Read");
            assert_eq!(*back, Live::Call(call.clone()));
        }
        _ => panic!("not a call"),
    }
    bytes
}

#[test]
fn calls_round_trip() {
    let bare = call_round_trip(&scope(false), &bare_call());
    let full = call_round_trip(&scope(true), &full_call());
    // A bare call is a few dozen bytes (its JSON would be several hundred).
    assert!(bare.len() < 70, "{}", bare.len());
    assert!(full.len() > bare.len());
    // The repeat keys a call keeps of the events its state cannot give again.
    let mut kept = full_call();
    kept.keep_repeat(7);
    kept.keep_repeat(u64::MAX);
    call_round_trip(&scope(true), &kept);
}

#[test]
fn waiting_results_round_trip() {
    for (done, extras) in [(false, false), (true, false), (false, true), (true, true)] {
        let w = waiting(done, extras);
        let bytes = encode(&EntryRef::Waiting {
            scope: &scope(done),
            waiting: &w,
        });
        match decode(&bytes).unwrap() {
            Entry::Waiting { scope: s, waiting } => {
                assert_eq!(s, scope(done));
                assert_eq!(*waiting, w);
            }
            _ => panic!("not a waiting result"),
        }
    }
}

#[test]
fn closed_calls_and_meta_round_trip() {
    let record = {
        // Any record will do: the one a closed idempotent call keeps is published JSON.
        let mut c = crate::Correlator::without_changelog(crate::Config::default());
        let mut out = crate::Effects::default();
        let e = toolcalls_model::Event::decode(
            br#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"c","time":"2026-01-01T00:00:00Z","tool":"t"}"#,
        )
        .unwrap();
        c.apply(e, crate::Position::default(), &mut out);
        c.close_all(toolcalls_model::Phase::Interrupted, "end", &mut out);
        out.records.pop().unwrap()
    };
    for closed in [
        Closed {
            scope: 0,
            expires: t(77),
            ids: smallvec::smallvec![],
            announced_with_id: false,
            tool: 0,
            repeats: Box::default(),
            idem: None,
        },
        Closed {
            scope: 0,
            expires: t(77),
            ids: smallvec::smallvec![],
            announced_with_id: false,
            tool: 1,
            repeats: Box::new([0, u64::MAX, 0x0123_4567_89ab_cdef]),
            idem: None,
        },
        Closed {
            scope: 0,
            expires: t(-1),
            ids: smallvec::smallvec![CallId::from("a"), CallId::from("b")],
            announced_with_id: true,
            tool: u16::MAX,
            repeats: Box::new([7]),
            idem: Some(Box::new(Idempotent {
                key: "k".into(),
                record: record.clone(),
                answered: 2,
            })),
        },
    ] {
        let bytes = encode(&EntryRef::Closed {
            scope: &scope(true),
            closed: &closed,
        });
        match decode(&bytes).unwrap() {
            Entry::Closed {
                scope: s,
                closed: c,
            } => {
                assert_eq!(s, scope(true));
                assert_eq!(*c, closed);
            }
            _ => panic!("not a closed call"),
        }
    }
    for meta in [
        Meta {
            stream_time: None,
            topic_time: vec![],
            next_seq: 0,
        },
        Meta {
            stream_time: Some(t(3)),
            topic_time: vec![Some(t(4)), None],
            next_seq: RESTORED_SEQ_LIMIT,
        },
    ] {
        match decode(&encode(&EntryRef::Meta(&meta))).unwrap() {
            Entry::Meta(m) => assert_eq!(m, meta),
            _ => panic!("not meta"),
        }
    }
}

/// Every fixture above, encoded: the bytes are a format (a restore reads what an older build
/// wrote), so they must not change. `TOOLCALLS_BLESS=1` rewrites `tests/golden/codec.txt`
/// after a deliberate format change (and a new [`VERSION`]).
#[test]
fn fixtures_encode_to_the_golden_bytes() {
    let mut values = Vec::new();
    for (s, call) in [(scope(false), bare_call()), (scope(true), full_call())] {
        values.push(encode(&EntryRef::Call {
            scope: &s,
            tool: "Read",
            call: &call,
        }));
    }
    for (done, extras) in [(false, false), (true, false), (false, true), (true, true)] {
        values.push(encode(&EntryRef::Waiting {
            scope: &scope(done),
            waiting: &waiting(done, extras),
        }));
    }
    let closed = Closed {
        scope: 0,
        expires: t(-1),
        ids: smallvec::smallvec![CallId::from("a"), CallId::from("b")],
        announced_with_id: false,
        tool: 0,
        repeats: Box::default(),
        idem: None,
    };
    values.push(encode(&EntryRef::Closed {
        scope: &scope(true),
        closed: &closed,
    }));
    // A closed call without an id, remembered by the repeat keys of its events.
    let closed = Closed {
        scope: 0,
        expires: t(-1),
        ids: smallvec::smallvec![],
        announced_with_id: false,
        tool: 0,
        repeats: Box::new([0x0123_4567_89ab_cdef, 42]),
        idem: None,
    };
    values.push(encode(&EntryRef::Closed {
        scope: &scope(false),
        closed: &closed,
    }));
    // A closed call that keeps the key of its tool's name (an entry without one, as above, was
    // written before it did, and reads as a call whose tool is not known).
    let closed = Closed {
        scope: 0,
        expires: t(-1),
        ids: smallvec::smallvec![CallId::from("a")],
        announced_with_id: true,
        tool: 0xcdef,
        repeats: Box::default(),
        idem: None,
    };
    values.push(encode(&EntryRef::Closed {
        scope: &scope(false),
        closed: &closed,
    }));
    values.push(encode(&EntryRef::Meta(&Meta {
        stream_time: Some(t(3)),
        topic_time: vec![Some(t(4)), None],
        next_seq: u64::MAX,
    })));
    let text: String = values
        .iter()
        .map(|v| v.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/codec.txt");
    if std::env::var_os("TOOLCALLS_BLESS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(path).unwrap();
    assert_eq!(text, golden, "the encoding changed");
}

#[test]
fn a_next_entry_number_past_what_this_program_writes_is_refused() {
    for next_seq in [RESTORED_SEQ_LIMIT + 1, 1 << 62, u64::MAX] {
        let value = encode(&EntryRef::Meta(&Meta {
            stream_time: None,
            topic_time: vec![],
            next_seq,
        }));
        match decode(&value) {
            Err(e) => assert_eq!(e.field, "next_seq", "{e}"),
            Ok(_) => panic!("next_seq {next_seq} taken"),
        }
    }
}

#[test]
fn a_tool_key_of_zero_or_past_16_bits_is_refused() {
    let closed = |tool| Closed {
        scope: 0,
        expires: t(5),
        ids: smallvec::smallvec![CallId::from("a")],
        announced_with_id: true,
        tool,
        repeats: Box::default(),
        idem: None,
    };
    let s = scope(false);
    let value = |tool| {
        encode(&EntryRef::Closed {
            scope: &s,
            closed: &closed(tool),
        })
    };
    // Keys 1 and 2 are one varint byte each, and the only byte where the two values differ.
    let (v, two) = (value(1), value(2));
    assert_eq!(v.len(), two.len());
    let at = (0..v.len())
        .find(|&i| v[i] != two[i])
        .expect("the key's byte");
    assert_eq!((v[at], two[at]), (1, 2));
    let mut zero = v.clone();
    zero[at] = 0;
    assert_eq!(decode(&zero).err().unwrap().field, "tool");
    let mut wide = v.clone();
    wide.splice(at..=at, [0x80, 0x80, 0x04]); // 2^16 as a varint
    assert_eq!(decode(&wide).err().unwrap().field, "tool");
}

#[test]
fn every_cut_and_every_bad_byte_is_an_error_not_a_panic() {
    let s = scope(true);
    let values = [
        encode(&EntryRef::Call {
            scope: &s,
            tool: "Read",
            call: &full_call(),
        }),
        encode(&EntryRef::Waiting {
            scope: &s,
            waiting: &waiting(true, true),
        }),
    ];
    for v in &values {
        for cut in 0..v.len() {
            assert!(decode(&v[..cut]).is_err(), "cut at {cut} decoded");
        }
        let mut long = v.clone();
        long.push(0);
        assert_eq!(
            decode(&long).err().unwrap().problem,
            "bytes after the last field"
        );
        // Flipping any byte either fails cleanly or decodes to something; it never panics.
        for i in 0..v.len() {
            let mut bad = v.clone();
            bad[i] ^= 0x5a;
            let _ = decode(&bad);
        }
    }
}

#[test]
fn foreign_values_say_what_they_are() {
    let e = decode(br#"{"call":{}}"#).err().unwrap();
    assert!(e.problem.contains("JSON entry"), "{e}");
    assert_eq!(
        decode(b"\x07").err().unwrap().problem,
        "unknown encoding version"
    );
    // An entry of the format before entries kept their events' input positions.
    let e = decode(&[0xB1, 1, 0]).err().unwrap();
    assert!(e.problem.contains("previous format (0xB1)"), "{e}");
    assert_eq!(
        decode(&[VERSION, 9]).err().unwrap().problem,
        "unknown entry kind"
    );
    let mut flags = vec![VERSION, TAG_META];
    flags.push(0x40);
    assert_eq!(decode(&flags).err().unwrap().problem, "unknown flag bits");
    // Arguments that are not JSON are refused, not kept.
    let mut call = bare_call();
    call.args = Some(Json::parse("1").unwrap());
    let mut v = encode(&EntryRef::Call {
        scope: &s_plain(),
        tool: "t",
        call: &call,
    });
    let at = v.iter().rposition(|&b| b == b'1').unwrap();
    v[at] = b'x';
    assert_eq!(decode(&v).err().unwrap().field, "args");
}

fn s_plain() -> ScopeKey {
    scope(false)
}

/// A remembered idempotent call written before entries kept which attempt their record answers
/// reads as one whose every attempt was answered: any later result is late for it, as it was.
#[test]
fn an_idempotent_entry_written_without_its_answered_attempt_answers_every_attempt() {
    let mut out = crate::Effects::default();
    let mut c = crate::Correlator::without_changelog(crate::Config::default());
    let e = toolcalls_model::Event::decode(
        br#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"c","time":"2026-01-01T00:00:00Z","tool":"t"}"#,
    )
    .unwrap();
    c.apply(e, crate::Position::default(), &mut out);
    c.close_all(toolcalls_model::Phase::Interrupted, "end", &mut out);
    let closed = Closed {
        scope: 0,
        expires: t(9),
        ids: smallvec::smallvec![CallId::from("a")],
        announced_with_id: true,
        tool: 0,
        repeats: Box::default(),
        idem: Some(Box::new(Idempotent {
            key: "k".into(),
            record: out.records.pop().unwrap(),
            answered: 0,
        })),
    };
    let now = encode(&EntryRef::Closed {
        scope: &scope(false),
        closed: &closed,
    });
    // The flags are the varint after the version and tag bytes; the answered attempt, 0, is the
    // value's last byte.
    let (flags, len) = varint(&now[2..]);
    assert_eq!(now.last(), Some(&0));
    let mut legacy = now[..2].to_vec();
    legacy.extend(varint_bytes(flags & !(1 << 16)));
    legacy.extend(&now[2 + len..now.len() - 1]);
    match decode(&legacy).unwrap() {
        Entry::Closed { closed: c, .. } => {
            let idem = c.idem.as_ref().expect("its idempotency key");
            assert_eq!(idem.answered, Idempotent::EVERY_ATTEMPT);
            assert_eq!(idem.record, closed.idem.as_ref().unwrap().record);
        }
        _ => panic!("not a closed call"),
    }
}

fn varint(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("a cut varint")
}

fn varint_bytes(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
