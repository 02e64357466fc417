//! The `toolcalls ingest` path: native transcripts through the adapters and the [`Publisher`] into
//! the input topics, keyed by session with the murmur2 partitioner, then through the processor.

use crate::harness::*;
use crate::scratch::Scratch;
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
    stop_in_time(running).await;
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

/// An event larger than a Kafka message may be is reported, named and left out; the events around
/// it are delivered and the run ends as with a bad line (with `--strict`, it stops there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_too_large_for_kafka_is_reported_and_left_out() {
    let s = settings("ingest-too-large");
    create_topics(&s, 1).await;
    let lines = hooks_with_a_large_result("big-session");
    let dir = Scratch::new("too-large");
    let file = dir.join("hooks.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let ingest = |strict: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_toolcalls"));
        c.env_clear()
            .args([
                "ingest",
                "--format",
                "claude-code-hooks",
                "--brokers",
                &s.brokers,
            ])
            .args(["--announce-topic", &s.topics.announce])
            .args(["--completion-topic", &s.topics.completion])
            .args(["--kafka", "message.max.bytes=2000"]);
        if strict {
            c.arg("--strict");
        }
        c.arg(&file).output().unwrap()
    };
    let out = ingest(false);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the completion event of session big-session, call toolu_big")
            && said.contains("larger than a Kafka message may be here (2000 bytes")
            && said.contains("1 events too large for a Kafka message, left out"),
        "{said}"
    );
    let delivered = read_to_end(&s.topics.announce).len() + read_to_end(&s.topics.completion).len();
    assert_eq!(delivered, 3, "every event but the large one: {said}");

    let strict = ingest(true);
    assert_eq!(
        strict.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&strict.stderr)
    );
}

/// An event the brokers refuse as larger than its topic takes (the topic's `max.message.bytes`
/// below the producer's `message.max.bytes`) is reported, named and left out, by `ingest` and by
/// `--follow`, which goes on and, restarted, does not stop on it again. Tansu does not enforce
/// a topic's `max.message.bytes`, so librdkafka's mock cluster answers the first produce request
/// with the broker's MSG_SIZE_TOO_LARGE.
#[test]
fn an_event_the_brokers_refuse_as_too_large_is_reported_and_left_out() {
    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let cluster = MockCluster::new(1).expect("mock cluster");
    for topic in ["in.announce", "in.completion"] {
        cluster.create_topic(topic, 1, 1).expect("topic");
    }
    let refuse_next_produce = || {
        cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
        )
    };
    let line = serde_json::json!({
        "session_id": "refused-session",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/a"},
        "tool_use_id": "toolu_refused",
        "timestamp": "2026-02-14T09:12:00.112Z",
    });
    let dir = Scratch::new("refused");
    let file = dir.join("hooks.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let checkpoints = dir.join("checkpoints");
    let ingest = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .env_clear()
            .args(["ingest", "--format", "claude-code-hooks"])
            .args(["--brokers", &cluster.bootstrap_servers()])
            .args(["--announce-topic", "in.announce"])
            .args(["--completion-topic", "in.completion"])
            .args(extra)
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let refusal = "the announce event of session refused-session, call toolu_refused: the Kafka brokers refused its";

    refuse_next_produce();
    let (code, said) = ingest(&[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!("{}: {refusal}", file.display())),
        "the file is named: {said}"
    );
    assert!(
        said.contains("0 events delivered to Kafka")
            && said.contains("1 events refused by the brokers as too large, left out"),
        "{said}"
    );
    refuse_next_produce();
    let (code, said) = ingest(&["--strict"]);
    assert_eq!(code, Some(2), "{said}");

    let follow = ["--follow", "--once", "--checkpoint-dir"];
    let mut follow: Vec<&str> = follow.to_vec();
    follow.push(checkpoints.to_str().unwrap());
    refuse_next_produce();
    let (code, said) = ingest(&follow);
    assert_eq!(code, Some(0), "the follower goes on: {said}");
    assert!(said.contains(refusal), "{said}");
    let (code, said) = ingest(&follow);
    assert_eq!(code, Some(0), "restarted, it does not stop on it: {said}");
    assert!(!said.contains(refusal), "said once, not sent again: {said}");

    // Following on, with its metrics: the event counted as left out, and not as sent.
    refuse_next_produce();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .env("RUST_LOG", "info")
        .args(["ingest", "--follow", "--format", "claude-code-hooks"])
        .args(["--brokers", &cluster.bootstrap_servers()])
        .args(["--announce-topic", "in.announce"])
        .args(["--completion-topic", "in.completion"])
        .args(["--metrics-addr", "127.0.0.1:0", "--poll-interval", "50ms"])
        .arg(&file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let addr = log
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let at = l.find("bound=")?;
            l[at + 6..].split_whitespace().next().map(str::to_owned)
        })
        .expect("the follower says where its metrics are");
    // Read on: a follower whose stderr is closed cannot say what it left out.
    std::thread::spawn(move || log.for_each(drop));
    let left_out = "toolcalls_producer_events_left_out_total{format=\"claude-code-hooks\",reason=\"refused_too_large\"} 1";
    let sent = "toolcalls_producer_events_sent_total{format=\"claude-code-hooks\"}";
    let mut metrics = String::new();
    wait_until("the delivery counted", || {
        metrics = curl(&format!("http://{addr}/metrics"), &[]).1;
        metrics.contains(sent)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(metrics.contains(left_out), "{metrics}");
    assert!(metrics.contains(&format!("{sent} 0")), "{metrics}");
}
