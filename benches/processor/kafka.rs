//! Broker helpers of the processor benchmark: topics, preloading, end offsets, watching a group's
//! committed offsets, reading the processor's metrics. Every wait is bounded.

use prometheus::Registry;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use toolcalls_model::Event;
use toolcalls_processor::{Settings, TopicPlan};
use toolcalls_producer::{PublishSettings, Publisher};

/// Bound of any single wait of the benchmark.
pub const WAIT: Duration = Duration::from_secs(180);

/// librdkafka settings given to the processor (`--kafka`) and to the copy alike: a short session
/// timeout so that joining the group (about half of it on Tansu) does not dominate, then those of
/// `BENCH_KAFKA` (`key=value;key=value`), for experiments.
pub fn overrides() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vec![
        ("session.timeout.ms".into(), "6000".into()),
        ("heartbeat.interval.ms".into(), "300".into()),
    ];
    if let Ok(extra) = std::env::var("BENCH_KAFKA") {
        for kv in extra.split(';').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=') {
                Some((k, val)) => v.push((k.trim().into(), val.trim().into())),
                None => {
                    eprintln!("BENCH_KAFKA: `{kv}` is not key=value");
                    std::process::exit(2);
                }
            }
        }
    }
    v
}

pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Processor settings for one run: its own group and output topics on shared input topics.
pub fn settings(brokers: &str, group: &str, inputs: &[String; 2]) -> Settings {
    let mut s = Settings {
        brokers: brokers.to_owned(),
        group: group.to_owned(),
        instance_id: "bench".into(),
        ..Settings::default()
    };
    s.topics.announce = inputs[0].clone();
    s.topics.completion = inputs[1].clone();
    s.topics.records = format!("{group}.records");
    s.topics.dlq = format!("{group}.dlq");
    s.http_addr = "127.0.0.1:0".parse().expect("address");
    s.kafka = overrides();
    s
}

/// Creates the topics of `settings` (existing ones, such as shared inputs, are left alone).
pub fn create_processor_topics(rt: &tokio::runtime::Runtime, s: &Settings, partitions: i32) {
    let plan = TopicPlan {
        partitions,
        output_partitions: None,
        replication: 1,
    };
    rt.block_on(toolcalls_processor::create_topics(s, &plan))
        .expect("creating the processor's topics");
}

/// Creates a plain topic.
pub fn create_topic(rt: &tokio::runtime::Runtime, brokers: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = rt
        .block_on(admin.create_topics([&topic], &opts))
        .expect("creating a topic");
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => panic!("creating {name}: {code}"),
        }
    }
}

/// Publishes `events` the way `toolcalls ingest` does (keyed by session, murmur2, idempotent,
/// lz4): announces to `inputs[0]`, results to `inputs[1]`. Returns the elapsed time.
pub fn preload(brokers: &str, inputs: &[String; 2], events: &[Vec<u8>]) -> Duration {
    let start = Instant::now();
    let publisher = Publisher::new(PublishSettings {
        brokers: brokers.to_owned(),
        announce_topic: inputs[0].clone(),
        completion_topic: inputs[1].clone(),
        kafka: vec![],
        flush_timeout: WAIT,
    })
    .expect("publisher");
    for e in events {
        let event = Event::decode(e).expect("generated events are valid");
        publisher.send(&event, e).expect("enqueue");
    }
    let delivered = publisher.finish().expect("every event delivered");
    assert_eq!(delivered, events.len() as u64);
    start.elapsed()
}

/// The end offset (last offset + 1) of every input partition that holds data.
#[derive(Debug, Clone)]
pub struct Ends(pub Vec<(String, i32, i64)>);

impl Ends {
    pub fn total_partitions(&self) -> usize {
        self.0.len()
    }
}

/// Reads the input topics once from the beginning until `total` messages were seen (Tansu's
/// memory engine reports wrong high watermarks, so the ends are read, not asked for).
pub fn read_ends(brokers: &str, inputs: &[String; 2], partitions: i32, total: usize) -> Ends {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("bench-ends"))
        .set("enable.auto.commit", "false")
        .set_log_level(RDKafkaLogLevel::Warning)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for t in inputs {
        for p in 0..partitions {
            tpl.add_partition_offset(t, p, Offset::Beginning)
                .expect("partition");
        }
    }
    c.assign(&tpl).expect("assign");
    let mut last: HashMap<(String, i32), i64> = HashMap::new();
    let mut seen = 0usize;
    let deadline = Instant::now() + WAIT;
    while seen < total {
        assert!(
            Instant::now() < deadline,
            "reading the input ends: {seen} of {total} messages"
        );
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                seen += 1;
                let e = last
                    .entry((m.topic().to_owned(), m.partition()))
                    .or_default();
                *e = (*e).max(m.offset() + 1);
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => panic!("reading the inputs: {e}"),
        }
    }
    let mut ends: Vec<(String, i32, i64)> = last.into_iter().map(|((t, p), o)| (t, p, o)).collect();
    ends.sort();
    Ends(ends)
}

/// Asks the broker for a group's committed offsets (OffsetFetch, no group membership).
pub struct OffsetWatch {
    consumer: BaseConsumer,
    ends: Ends,
}

impl OffsetWatch {
    pub fn new(brokers: &str, group: &str, ends: &Ends) -> Self {
        let consumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set_log_level(RDKafkaLogLevel::Warning)
            .create()
            .expect("offset watcher");
        OffsetWatch {
            consumer,
            ends: ends.clone(),
        }
    }

    /// How many input partitions have their committed offset at the end.
    pub fn at_end(&self) -> usize {
        let mut tpl = TopicPartitionList::new();
        for (t, p, _) in &self.ends.0 {
            tpl.add_partition(t, *p);
        }
        let Ok(committed) = self.consumer.committed_offsets(tpl, Duration::from_secs(5)) else {
            return 0;
        };
        let n = self
            .ends
            .0
            .iter()
            .filter(|(t, p, end)| {
                committed
                    .find_partition(t, *p)
                    .is_some_and(|e| matches!(e.offset(), Offset::Offset(o) if o >= *end))
            })
            .count();
        // The list must go before the consumer may be dropped (ARCHITECTURE.md §8).
        drop(committed);
        n
    }

    /// Polls every `every` until every partition is committed at its end; the instant it saw it.
    pub fn wait_done(&self, every: Duration, limit: Instant) -> Instant {
        loop {
            if self.at_end() == self.ends.total_partitions() {
                return Instant::now();
            }
            assert!(
                Instant::now() < limit,
                "timed out waiting for the committed offsets to reach the ends"
            );
            std::thread::sleep(every);
        }
    }
}

/// Sum of every child of a counter or gauge family (0 when absent).
pub fn metric(registry: &Registry, name: &str) -> f64 {
    toolcalls_processor::metrics::sum(registry, name, &[])
}

/// Stops a processor started in process, failing the bench if it does not stop cleanly in 60 s.
pub fn stop(rt: &tokio::runtime::Runtime, running: toolcalls_processor::Running) {
    let stopped =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), running.stop()).await });
    match stopped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("the processor stopped with an error: {e}"),
        Err(_) => panic!("the processor did not stop within 60 s"),
    }
}

/// Count and sum of a histogram (zeros when absent).
pub fn histogram(registry: &Registry, name: &str) -> (u64, f64) {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter())
        .map(|m| {
            let h = m.get_histogram();
            (h.get_sample_count(), h.get_sample_sum())
        })
        .fold((0, 0.0), |(c, s), (c2, s2)| (c + c2, s + s2))
}

/// Polls `cond` every `every` until it holds; the instant it held. Panics after `limit`.
pub fn wait_for(
    what: &str,
    every: Duration,
    limit: Instant,
    mut cond: impl FnMut() -> bool,
) -> Instant {
    loop {
        if cond() {
            return Instant::now();
        }
        assert!(Instant::now() < limit, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
}
