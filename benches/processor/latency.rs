//! Latency under live traffic: calls published at a steady rate with the current time as their
//! event time, and for each call the time from publishing its result to reading its record
//! downstream (`read_committed`, so only once its transaction committed).
//!
//! A call's record can exist only after its result was published, so the producer thread notes
//! the moment each result is handed to the producer, and the reader thread subtracts it from the
//! moment the record arrives. Both clocks are this process's monotonic clock.

use crate::kafka::{self, WAIT};
use prometheus::Registry;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcalls_model::{Event, Timestamp};
use toolcalls_producer::{PublishSettings, Publisher};

pub struct Plan {
    pub brokers: String,
    /// Input events per second (two per call).
    pub rate: u64,
    pub seconds: u64,
    pub partitions: i32,
    /// Calls of the first second are left out of the figures (connections, first fetches).
    pub warmup_seconds: u64,
    /// The processor's `commit_interval_ms`, when not its default.
    pub commit_interval_ms: Option<u64>,
}

/// The call id of call `i`; the reader finds `i` again in the record's `correlation.key`.
fn call_id(i: usize) -> String {
    format!("toolu_lat_{i:010}")
}

fn call_index(key: &str) -> Option<usize> {
    key.strip_prefix("toolu_lat_")?.parse().ok()
}

fn events(i: usize, now_ms: i64) -> [Event; 2] {
    let session = format!("lat-session-{:03}", i % 64);
    let turn = format!("turn-{}", i / 8);
    let at = |ms: i64| Timestamp::from_millis(ms).to_rfc3339();
    let announce = json!({"v": 1, "kind": "announce", "source": "claude-code", "session": session,
        "turn": turn, "time": at(now_ms), "tool": "Read", "callId": call_id(i),
        "args": {"file_path": format!("/repo/src/module_{i}.rs")}});
    let completion = json!({"v": 1, "kind": "completion", "source": "claude-code",
        "session": session, "turn": turn, "time": at(now_ms), "callId": call_id(i),
        "result": format!("{i}: fn main() {{ println!(\"hello\"); }}\n{}", "// line of source\n".repeat(12)),
        "isError": false});
    [announce, completion]
        .map(|v| Event::decode(&serde_json::to_vec(&v).expect("json")).expect("a valid v1 event"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

pub fn run(rt: &tokio::runtime::Runtime, plan: &Plan) {
    let group = kafka::unique("bench-latency");
    let inputs = [format!("{group}.announce"), format!("{group}.completion")];
    for topic in &inputs {
        kafka::create_topic(rt, &plan.brokers, topic, plan.partitions);
    }
    // The processor's defaults, graces included: this is live traffic, in event-time order.
    let mut settings = kafka::settings(&plan.brokers, &group, &inputs);
    if let Some(ms) = plan.commit_interval_ms {
        settings.commit_interval_ms = ms;
    }
    kafka::create_processor_topics(rt, &settings, plan.partitions);
    let registry = Registry::new();
    let running = rt
        .block_on(toolcalls_processor::start(
            settings.clone(),
            registry.clone(),
        ))
        .expect("starting the processor");
    let limit = Instant::now() + WAIT;
    kafka::wait_for(
        "the processor to own and restore every partition",
        Duration::from_millis(10),
        limit,
        || {
            kafka::metric(&registry, "toolcalls_ready") >= 1.0
                && kafka::metric(&registry, "toolcalls_group_partitions_assigned")
                    >= f64::from(plan.partitions)
        },
    );

    let calls = (plan.rate / 2 * plan.seconds) as usize;
    let origin = Instant::now();
    // Nanoseconds after `origin` at which call i's result was handed to the producer (0: not yet).
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..calls).map(|_| AtomicU64::new(0)).collect());
    let reader = {
        let (brokers, topic, sent) = (
            plan.brokers.clone(),
            settings.topics.records.clone(),
            sent.clone(),
        );
        let partitions = plan.partitions;
        std::thread::spawn(move || read(&brokers, &topic, partitions, &sent, origin, calls))
    };
    let publisher = Publisher::new(PublishSettings {
        brokers: plan.brokers.clone(),
        announce_topic: inputs[0].clone(),
        completion_topic: inputs[1].clone(),
        kafka: vec![],
        flush_timeout: WAIT,
    })
    .expect("publisher");
    let spacing = Duration::from_secs_f64(2.0 / plan.rate as f64);
    let mut behind = Duration::ZERO;
    for (i, slot) in sent.iter().enumerate() {
        let due = origin + spacing * i as u32;
        let now = Instant::now();
        if due > now {
            // Pacing the producer (not a wait for a condition): the rate is the point.
            std::thread::sleep(due - now);
        } else {
            behind = behind.max(now - due);
        }
        let [announce, completion] = events(i, now_ms());
        publisher
            .send(&announce, &announce.encode())
            .expect("enqueue");
        publisher
            .send(&completion, &completion.encode())
            .expect("enqueue");
        slot.store(origin.elapsed().as_nanos() as u64, Ordering::Release);
    }
    let published = origin.elapsed();
    publisher.finish().expect("every event delivered");
    let latencies = reader.join().expect("the reader thread");
    let commits = kafka::histogram(&registry, "toolcalls_output_commit_duration_seconds");
    let e2e = kafka::histogram(&registry, "toolcalls_output_end_to_end_latency_seconds");
    rt.block_on(running.stop()).expect("stopping the processor");

    let warm = (plan.rate / 2 * plan.warmup_seconds) as usize;
    let mut measured: Vec<Duration> = latencies[warm.min(calls)..]
        .iter()
        .flatten()
        .copied()
        .collect();
    measured.sort();
    let pct = |p: f64| {
        let i = ((measured.len() as f64 * p).ceil() as usize).clamp(1, measured.len()) - 1;
        measured[i].as_secs_f64() * 1000.0
    };
    println!(
        "latency: {calls} calls ({} events/s, commit interval {} ms) published in {:.2}s (at most {:.1} ms behind schedule); {} records read",
        plan.rate,
        settings.commit_interval_ms,
        published.as_secs_f64(),
        behind.as_secs_f64() * 1000.0,
        latencies.iter().flatten().count(),
    );
    if measured.is_empty() {
        println!("latency: no records after the warm-up");
        return;
    }
    let mean = measured.iter().sum::<Duration>().as_secs_f64() * 1000.0 / measured.len() as f64;
    println!(
        "latency: result published -> record read (read_committed), {} calls after {}s of warm-up: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms, mean {:.1} ms",
        measured.len(),
        plan.warmup_seconds,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0),
        mean
    );
    println!(
        "latency: {} commits, {:.1} ms each on average; the processor's own end-to-end latency (publication - event time): {:.1} ms on average over {} records",
        commits.0,
        if commits.0 > 0 { commits.1 * 1000.0 / commits.0 as f64 } else { 0.0 },
        if e2e.0 > 0 { e2e.1 * 1000.0 / e2e.0 as f64 } else { 0.0 },
        e2e.0
    );
}

/// Reads the records topic from its start until every call's record arrived (bounded by
/// [`WAIT`]); returns, per call, the time from its result's publication to its record's arrival.
fn read(
    brokers: &str,
    topic: &str,
    partitions: i32,
    sent: &[AtomicU64],
    origin: Instant,
    calls: usize,
) -> Vec<Option<Duration>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", kafka::unique("bench-latency-reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        // A reader that wants records as soon as they commit: do not let the broker hold a fetch.
        .set("fetch.wait.max.ms", "5")
        .create()
        .expect("records reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out: Vec<Option<Duration>> = vec![None; calls];
    let mut seen = 0;
    let deadline = Instant::now() + WAIT;
    while seen < calls {
        assert!(
            Instant::now() < deadline,
            "latency: only {seen} of {calls} records arrived within {WAIT:?}"
        );
        let Some(result) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let m = result.expect("reading records");
        let arrived = origin.elapsed();
        let Some(payload) = m.payload() else { continue };
        let record: serde_json::Value = serde_json::from_slice(payload).expect("a record");
        let Some(i) = record["correlation"]["key"].as_str().and_then(call_index) else {
            continue;
        };
        if i < calls && out[i].is_none() {
            let at = Duration::from_nanos(sent[i].load(Ordering::Acquire));
            out[i] = Some(arrived.saturating_sub(at));
            seen += 1;
        }
    }
    out
}
