//! Every class of bad input lands in the dead-letter topic with the right reason and source
//! headers, while good traffic keeps flowing.

use crate::harness::*;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_core::{replay, FinishMode};

fn announce(session: &str, time: &str, extra: &str) -> String {
    format!(
        r#"{{"v":1,"kind":"announce","source":"test","session":"{session}","callId":"c1","time":"{time}","tool":"t"{extra}}}"#
    )
}

/// (expected reason, key, payload)
type Case = (&'static str, &'static [u8], Option<Vec<u8>>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_dead_lettered_with_reasons_and_good_input_flows() {
    let mut s = settings("dlq");
    s.max_message_bytes = 200 * 1024;
    create_topics(&s, 2).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");

    let deep = format!(
        r#"{{"v":1,"kind":"announce","source":"test","session":"k","time":"2026-01-01T00:00:00Z","tool":"t","args":{}1{}}}"#,
        // Deeper than the 4,096 levels arguments may nest (toolcalls_model::json::MAX_DEPTH).
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let big = announce(
        "k",
        "2026-01-01T00:00:00Z",
        &format!(r#","args":"{}""#, "x".repeat(300 * 1024)),
    );
    // (reason, key, payload)
    let cases: Vec<Case> = vec![
        ("not_json", b"k", Some(b"hello, world".to_vec())),
        ("invalid_field", b"k", Some(announce("k", "2026-01-01T00:00:00Z", "").replace(r#""tool":"t""#, r#""tool":42"#).into_bytes())),
        ("missing_field", b"k", Some(br#"{"v":1,"kind":"announce","source":"test","time":"2026-01-01T00:00:00Z","tool":"t"}"#.to_vec())),
        ("unsupported_version", b"k", Some(announce("k", "2026-01-01T00:00:00Z", "").replace(r#""v":1"#, r#""v":2"#).into_bytes())),
        ("too_large", b"k", Some(big.into_bytes())),
        ("invalid_utf8", b"k", Some(vec![b'{', 0xff, 0xfe, b'}'])),
        ("far_future", b"k", Some(announce("k", "2999-01-01T00:00:00Z", "").into_bytes())),
        ("key_mismatch", b"other-session", Some(announce("k", "2026-01-01T00:00:00Z", "").into_bytes())),
        ("too_deep", b"k", Some(deep.into_bytes())),
        ("empty", b"k", Some(Vec::new())),
        ("empty", b"k", None),
        ("unknown_kind", b"k", Some(br#"{"v":1,"kind":"explode","source":"test","session":"k","time":"2026-01-01T00:00:00Z"}"#.to_vec())),
        ("field_not_allowed", b"k", Some(br#"{"v":1,"kind":"completion","source":"test","session":"k","callId":"c1","time":"2026-01-01T00:00:00Z","sideEffects":{}}"#.to_vec())),
        ("empty_field", b"", Some(announce("", "2026-01-01T00:00:00Z", "").into_bytes())),
    ];

    // Good traffic before, between and after the bad messages.
    let parsed = parse(
        Format::ClaudeCode,
        "two.jsonl",
        &fixture("claude-code/agentcmd-full-session-two.jsonl"),
        &Options::default(),
    );
    let events = parsed.events;
    let expected = replay(&s.core, events.clone(), FinishMode::Keep);
    let half = events.len() / 2;
    produce_events(&s, &events[..half]);
    for (i, (_, key, payload)) in cases.iter().enumerate() {
        let topic = if i % 2 == 0 {
            &s.topics.announce
        } else {
            &s.topics.completion
        };
        produce_raw(topic, Some(key), payload.as_deref());
    }
    produce_events(&s, &events[half..]);

    let dlq = read_at_least(&s.topics.dlq, cases.len()).await;
    let mut got: Vec<&str> = dlq
        .iter()
        .map(|m| m.headers["toolcalls.reason"].as_str())
        .collect();
    let mut want: Vec<&str> = cases.iter().map(|c| c.0).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    let classes: std::collections::BTreeSet<&str> = want.iter().copied().collect();
    assert!(classes.len() >= 10);
    for m in &dlq {
        let topic = &m.headers["toolcalls.source.topic"];
        assert!(
            topic == &s.topics.announce || topic == &s.topics.completion,
            "{:?}",
            m.headers
        );
        assert!(
            m.headers["toolcalls.source.partition"]
                .parse::<i32>()
                .is_ok(),
            "{:?}",
            m.headers
        );
        assert!(
            m.headers["toolcalls.source.offset"].parse::<i64>().is_ok(),
            "{:?}",
            m.headers
        );
        assert!(!m.headers["toolcalls.error"].is_empty());
    }
    let oversize = dlq
        .iter()
        .find(|m| m.headers["toolcalls.reason"] == "too_large")
        .unwrap();
    assert_eq!(
        oversize.payload.as_ref().unwrap().len(),
        64 * 1024,
        "oversize payloads are cut"
    );

    let want_records = phases(&expected.records);
    let records = read_at_least(&s.topics.records, want_records.len()).await;
    let got_records = phases_by_key(&records);
    assert_eq!(got_records, want_records);

    let (_, metrics) = http_get(running.http_addr, "/metrics").await;
    assert!(
        metrics.contains("toolcalls_dlq_messages_total{reason=\"far_future\"} 1"),
        "{metrics}"
    );
    stop_in_time(running).await;
}

/// With redaction rules, what goes to the dead-letter topic is redacted too: a refused event's
/// arguments and result (pointers and patterns, as for a record), a message that is no JSON
/// (patterns over its text), and the error header, which may quote the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_redacted_by_the_rules() {
    let mut s = settings("dlq-redact");
    s.redact.pointers = vec!["/password".into()];
    s.redact.patterns = vec!["sk-live-[A-Za-z0-9]+".into()];
    create_topics(&s, 1).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let time = "2026-01-01T00:00:00Z";
    // Refused for `isError` of the wrong type; serde's message quotes the value, a secret.
    let wrong_type = format!(
        r#"{{"v":1,"kind":"completion","source":"test","session":"k","callId":"c1","time":"{time}","isError":"sk-live-quoted1","args":{{"password":"hunter2","token":"sk-live-abc123"}},"result":{{"password":"p4ss"}}}}"#
    );
    let not_json = b"oops sk-live-xyz789 not json".to_vec();
    produce_raw(
        &s.topics.completion,
        Some(b"k"),
        Some(wrong_type.as_bytes()),
    );
    produce_raw(&s.topics.completion, Some(b"k"), Some(&not_json));
    let dlq = read_at_least(&s.topics.dlq, 2).await;
    assert_eq!(dlq.len(), 2);
    for m in &dlq {
        let payload = String::from_utf8_lossy(m.payload.as_deref().unwrap()).into_owned();
        let error = &m.headers["toolcalls.error"];
        for secret in [
            "hunter2",
            "p4ss",
            "sk-live-abc123",
            "sk-live-quoted1",
            "sk-live-xyz789",
        ] {
            assert!(
                !payload.contains(secret) && !error.contains(secret),
                "{secret} in the dead letter: {payload} / {error}"
            );
        }
        assert!(payload.contains("[REDACTED]"), "{payload}");
    }
    let event = dlq
        .iter()
        .find(|m| m.headers["toolcalls.reason"] == "invalid_field")
        .expect("the refused event");
    assert!(
        event.headers["toolcalls.error"].contains("[REDACTED]"),
        "{:?}",
        event.headers
    );
    let v: serde_json::Value = serde_json::from_slice(event.payload.as_deref().unwrap()).unwrap();
    assert_eq!(v["args"]["password"], "[REDACTED]");
    assert_eq!(v["result"]["password"], "[REDACTED]");
    assert_eq!(v["callId"], "c1", "the rest as it came");
    stop_in_time(running).await;
}

/// One call's facts cannot grow its record past what the records and changelog topics take:
/// with the default settings, hook decisions of 900 KB each (every one a valid input message)
/// fill the call's facts budget (4 MiB), the ones past it are dead-lettered `call_too_large`,
/// and the partition goes on — its other sessions' records come, and so does the call's own.
/// Before the budget, the call's changelog entry outgrew 16 MiB and every batch of the
/// partition was aborted, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_facts_outgrow_a_record_keeps_its_partition_flowing() {
    let s = settings("dlq-facts");
    create_topics(&s, 1).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let time = |ms: u32| format!("2026-01-01T00:00:00.{ms:03}Z");
    let reason = "r".repeat(900_000);
    let mut announces = vec![announce("big", &time(0), r#","args":{}"#)];
    let mut completions = Vec::new();
    for n in 1..=6 {
        announces.push(format!(
            r#"{{"v":1,"kind":"hook_decision","source":"test","session":"big","callId":"c1","time":"{}","hook":"h{n}","decision":"allow","reason":"{reason}"}}"#,
            time(n)
        ));
    }
    completions.push(format!(
        r#"{{"v":1,"kind":"completion","source":"test","session":"big","callId":"c1","time":"{}","result":"ok"}}"#,
        time(10)
    ));
    for session in ["small-1", "small-2"] {
        announces.push(announce(session, &time(20), r#","args":{}"#));
        completions.push(format!(
            r#"{{"v":1,"kind":"completion","source":"test","session":"{session}","callId":"c1","time":"{}","result":"ok"}}"#,
            time(21)
        ));
    }
    for (topic, lines) in [
        (&s.topics.announce, &announces),
        (&s.topics.completion, &completions),
    ] {
        for line in lines {
            let event = toolcalls_model::Event::decode(line.as_bytes()).expect("a valid event");
            produce_raw(
                topic,
                Some(event.session.as_str().as_bytes()),
                Some(line.as_bytes()),
            );
        }
    }
    let records = read_at_least(&s.topics.records, 3).await;
    let big = records
        .iter()
        .map(Msg::json)
        .find(|r| r["metadata"]["session"] == "big")
        .expect("the big call's record");
    assert_eq!(big["status"]["phase"], "Succeeded");
    let hooks = big["status"]["hookDecisions"].as_array().unwrap().len();
    assert_eq!(hooks, 4, "4 of 900 KB fit in 4 MiB");
    let dlq = read_at_least(&s.topics.dlq, 2).await;
    assert_eq!(dlq.len(), 2);
    for m in &dlq {
        assert_eq!(m.headers["toolcalls.reason"], "call_too_large");
        assert!(
            m.headers["toolcalls.error"].contains("--max-facts-bytes"),
            "{:?}",
            m.headers
        );
    }
    stop_in_time(running).await;
}
