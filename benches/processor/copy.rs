//! The baseline: a plain consume → produce copy of both input topics into one output topic, with
//! the processor's client settings (crates/processor/src/client.rs) and its batch cycle — every
//! `commit_interval` wait until every message is delivered (`toolcalls_producer::wait_delivered`, the
//! processor's flush), then either send the consumed offsets to the transaction and commit it
//! (exactly-once) or commit the offsets (at-least-once). No decoding, no state, no changelog.

use crate::kafka::{overrides, Ends};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct CopyPlan {
    pub brokers: String,
    pub inputs: [String; 2],
    pub output: String,
    pub group: String,
    pub partitions: i32,
    pub exactly_once: bool,
    pub commit_interval: Duration,
    pub ends: Ends,
}

/// What the copy saw itself.
#[derive(Debug, Default)]
pub struct CopyStats {
    pub copied: u64,
    pub batches: u64,
    /// Time spent flushing and committing.
    pub commit_time: Duration,
    /// When the last commit returned.
    pub done: Option<Instant>,
}

fn consumer(plan: &CopyPlan) -> BaseConsumer {
    // As `consumer_config` of the runtime.
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &plan.brokers)
        .set("client.id", "bench-copy-consumer")
        .set("group.id", &plan.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("isolation.level", "read_committed")
        .set("statistics.interval.ms", "5000")
        .set("fetch.queue.backoff.ms", "20")
        .set("fetch.wait.max.ms", "100")
        .set_log_level(RDKafkaLogLevel::Warning);
    for (k, v) in overrides() {
        c.set(k, v);
    }
    c.create().expect("copy consumer")
}

fn producer(plan: &CopyPlan) -> ThreadedProducer<DefaultProducerContext> {
    // As `producer_config` of the runtime (plus its `message.max.bytes`).
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &plan.brokers)
        .set("client.id", "bench-copy-producer")
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("delivery.report.only.error", "true")
        .set("transaction.timeout.ms", "60000")
        .set("message.max.bytes", (16 * 1024 * 1024).to_string())
        .set_log_level(RDKafkaLogLevel::Warning);
    if plan.exactly_once {
        c.set("transactional.id", format!("{}-copy", plan.group));
    }
    c.create().expect("copy producer")
}

/// Copies until every input partition is consumed to its end and committed, or `limit` passes.
/// `first` is set when the first message arrives.
pub fn run(
    plan: &CopyPlan,
    first: &OnceLock<Instant>,
    limit: Instant,
) -> Result<CopyStats, String> {
    let timeout = Duration::from_secs(30);
    let consumer = consumer(plan);
    let producer = producer(plan);
    if plan.exactly_once {
        producer
            .init_transactions(timeout)
            .map_err(|e| format!("init_transactions: {e}"))?;
        producer
            .begin_transaction()
            .map_err(|e| format!("begin_transaction: {e}"))?;
    }
    let topics: Vec<&str> = plan.inputs.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .map_err(|e| format!("subscribe: {e}"))?;

    // Positions by (topic index, partition), flat: no allocation or string hashing per message.
    let parts = plan.partitions as usize;
    let slot = |topic: usize, partition: i32| topic * parts + partition as usize;
    let mut ends = vec![0i64; 2 * parts];
    for (t, p, o) in &plan.ends.0 {
        let topic = plan
            .inputs
            .iter()
            .position(|i| i == t)
            .expect("an input topic");
        ends[slot(topic, *p)] = *o;
    }
    let mut next = vec![-1i64; 2 * parts];
    let mut remaining = ends.iter().filter(|e| **e > 0).count();
    let mut uncommitted = false;
    let mut stats = CopyStats::default();
    let mut last_commit = Instant::now();
    loop {
        if Instant::now() > limit {
            return Err(format!(
                "copy stopped before the end: {} messages copied",
                stats.copied
            ));
        }
        match consumer.poll(Duration::from_millis(20)) {
            Some(Ok(m)) => {
                first.get_or_init(Instant::now);
                let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&plan.output);
                if let Some(k) = m.key() {
                    record = record.key(k);
                }
                if let Some(v) = m.payload() {
                    record = record.payload(v);
                }
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            record = back;
                            // As the runtime: let librdkafka's threads drain the queue.
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err((e, _)) => return Err(format!("produce: {e}")),
                    }
                }
                stats.copied += 1;
                uncommitted = true;
                let topic = usize::from(m.topic() != plan.inputs[0]);
                let i = slot(topic, m.partition());
                let was_short = next[i] < ends[i];
                next[i] = m.offset() + 1;
                if was_short && next[i] >= ends[i] {
                    remaining -= 1;
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => return Err(format!("consume: {e}")),
        }
        let at_end = remaining == 0;
        if uncommitted && (at_end || last_commit.elapsed() >= plan.commit_interval) {
            let start = Instant::now();
            let mut offsets = TopicPartitionList::new();
            for (i, o) in next.iter().enumerate() {
                if *o >= 0 {
                    offsets
                        .add_partition_offset(
                            &plan.inputs[i / parts],
                            (i % parts) as i32,
                            Offset::Offset(*o),
                        )
                        .map_err(|e| e.to_string())?;
                }
            }
            if plan.exactly_once {
                toolcalls_producer::wait_delivered(&producer, timeout)
                    .map_err(|e| format!("flush: {e}"))?;
                let cgm = consumer
                    .group_metadata()
                    .ok_or("the consumer has no group metadata")?;
                producer
                    .send_offsets_to_transaction(&offsets, &cgm, timeout)
                    .map_err(|e| format!("send_offsets_to_transaction: {e}"))?;
                producer
                    .commit_transaction(timeout)
                    .map_err(|e| format!("commit_transaction: {e}"))?;
                producer
                    .begin_transaction()
                    .map_err(|e| format!("begin_transaction: {e}"))?;
            } else {
                toolcalls_producer::wait_delivered(&producer, timeout)
                    .map_err(|e| format!("flush: {e}"))?;
                consumer
                    .commit(&offsets, CommitMode::Sync)
                    .map_err(|e| format!("commit: {e}"))?;
            }
            stats.commit_time += start.elapsed();
            stats.batches += 1;
            uncommitted = false;
            last_commit = Instant::now();
        }
        if at_end && !uncommitted {
            stats.done = Some(Instant::now());
            break;
        }
    }
    if plan.exactly_once {
        let _ = producer.abort_transaction(timeout);
    }
    consumer.unsubscribe();
    Ok(stats)
}
