//! The `toolcalls ingest` path: native transcripts through the adapters and the [`Publisher`] into
//! the input topics, keyed by session with the murmur2 partitioner, then through the processor.

use crate::harness::*;
use std::collections::BTreeMap;
use std::time::Duration;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_core::{replay, FinishMode};
use toolcalls_producer::{PublishSettings, Publisher};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_transcripts_become_the_records_the_core_gives() {
    let s = settings("ingest");
    create_topics(&s, 3).await;
    // Two real sessions of two frameworks, interleaved as two producers would send them.
    let mut events = Vec::new();
    for (format, path) in [
        (
            Format::ClaudeCode,
            "claude-code/agentcmd-full-session-two.jsonl",
        ),
        (
            Format::GeminiCli,
            "gemini-cli/agentcmd-session-981c87cb.json",
        ),
    ] {
        let parsed = parse(format, path, &fixture(path), &Options::default());
        assert!(parsed.errors.is_empty(), "{path}: {:?}", parsed.errors);
        events.extend(parsed.events);
    }
    let sessions: std::collections::BTreeSet<_> =
        events.iter().map(|e| e.session.clone()).collect();
    assert_eq!(sessions.len(), 2);

    let publisher = tokio::task::spawn_blocking({
        let s = s.clone();
        let events = events.clone();
        move || {
            let p = Publisher::new(PublishSettings {
                brokers: s.brokers.clone(),
                announce_topic: s.topics.announce.clone(),
                completion_topic: s.topics.completion.clone(),
                kafka: Vec::new(),
                flush_timeout: Duration::from_secs(30),
            })
            .expect("publisher");
            for e in &events {
                p.send(e, &e.encode()).expect("send");
            }
            p.finish().expect("every event delivered")
        }
    });
    assert_eq!(publisher.await.unwrap(), events.len() as u64);

    // Every session sits on one partition of each input topic.
    for topic in [&s.topics.announce, &s.topics.completion] {
        let mut partitions: BTreeMap<String, std::collections::BTreeSet<i32>> = BTreeMap::new();
        for m in read_to_end(topic) {
            partitions
                .entry(m.key_str())
                .or_default()
                .insert(m.partition);
        }
        assert_eq!(partitions.len(), 2, "both sessions have events on {topic}");
        for (session, parts) in partitions {
            assert_eq!(
                parts.len(),
                1,
                "session {session} spread over {parts:?} of {topic}"
            );
        }
    }

    let expected = replay(&s.core, events, FinishMode::Keep);
    let want = phases(&expected.records);
    assert_eq!(want.len(), 10 + 13);

    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let records = read_at_least(&s.topics.records, want.len()).await;
    let got = phases_by_key(&records);
    assert_eq!(got, want);
    tokio::time::timeout(Duration::from_secs(60), running.stop())
        .await
        .expect("shutdown in time")
        .expect("clean shutdown");
}

#[test]
fn delivery_failures_are_reported_not_swallowed() {
    // A broker address where nothing listens: the flush must fail with a message, not hang or
    // claim success.
    let p = Publisher::new(PublishSettings {
        brokers: format!("127.0.0.1:{}", free_port()),
        announce_topic: "nowhere.announce".into(),
        completion_topic: "nowhere.completion".into(),
        kafka: vec![("message.timeout.ms".into(), "1500".into())],
        flush_timeout: Duration::from_secs(20),
    })
    .expect("publisher");
    let (events, _) = synth("undeliverable", 1, 2);
    for e in &events {
        p.send(e, &e.encode()).expect("enqueue");
    }
    let e = p
        .finish()
        .expect_err("nothing can be delivered")
        .to_string();
    assert!(
        e.contains("not delivered") && e.contains("toolcalls topics create"),
        "{e}"
    );
}
