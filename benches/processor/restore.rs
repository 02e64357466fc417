//! Restore rate: changelog records per second of rebuilding a partition's state.
//!
//! - **Pure**: `Correlator::restore` over the latest value of every key of a changelog written by
//!   a correlator that saw announces only (every call stays pending), and the pass that folds the
//!   changelog into its latest values the way the runtime's restore reader does.
//! - **Through the broker**: a processor consumes the same kind of announce-only input (so its
//!   changelog holds one entry per pending call), stops; a second processor of the same group
//!   restores every partition from that changelog. The bench reads the runtime's own
//!   `toolcalls_restore_records_total` and `toolcalls_restore_duration_seconds` from its registry.

use crate::kafka::{self, metric, OffsetWatch, WAIT};
use prometheus::Registry;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use toolcalls_core::{ChangelogOp, Config, Correlator, Effects, Position};
use toolcalls_model::Event;
use toolcalls_processor::Settings;

/// Correlation settings under which nothing announced closes during the benchmark.
pub fn pending_config() -> Config {
    let month = 30 * 24 * 3600 * 1000;
    Config {
        call_timeout_ms: month,
        turn_grace_ms: month,
        orphan_grace_ms: month,
        max_pending: 10_000_000,
        max_pending_bytes: usize::MAX,
        ..Config::default()
    }
}

/// Applies `announces` and collects the changelog as the runtime would write it: one
/// `take_changelog` per `batch` events (a checkpoint).
fn changelog(announces: &[Vec<u8>], batch: usize) -> (Correlator, Vec<ChangelogOp>) {
    let mut c = Correlator::new(pending_config());
    let mut fx = Effects::default();
    let mut log = Vec::new();
    for (i, e) in announces.iter().enumerate() {
        let event = Event::decode(e).expect("valid event");
        c.apply(event, Position::new(0, i as i64), &mut fx);
        assert!(fx.records.is_empty(), "announces only: nothing closes");
        if i % batch == batch - 1 {
            log.extend(c.take_changelog());
        }
    }
    log.extend(c.take_changelog());
    (c, log)
}

pub fn pure(calls: usize, rounds: usize, seed: u64) {
    let announces = crate::gen::announces(calls, seed);
    let (source, log) = changelog(&announces, 2000);
    drop(announces);
    let log_bytes: usize = log
        .iter()
        .map(|op| op.key.len() + op.value.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "restore: changelog of {} records ({:.1} MB, {:.0} B/record) from {} pending calls",
        log.len(),
        log_bytes as f64 / 1e6,
        log_bytes as f64 / log.len() as f64,
        source.pending_calls()
    );

    let mut best = [f64::INFINITY; 3];
    let mut entries_len = 0;
    for round in 0..rounds {
        // 1. Fold the log into the latest value per key, as `restore_partition` does (owned keys
        //    and values in a HashMap; tombstones remove).
        let t = Instant::now();
        let mut latest: HashMap<String, Vec<u8>> = HashMap::new();
        for op in &log {
            match &op.value {
                Some(v) => {
                    latest.insert(op.key.clone(), v.clone());
                }
                None => {
                    latest.remove(&op.key);
                }
            }
        }
        let fold = t.elapsed().as_secs_f64();
        entries_len = latest.len();

        // 3. Correlator::restore.
        let t = Instant::now();
        let restored = Correlator::restore(pending_config(), latest.iter()).expect("restore");
        let restore = t.elapsed().as_secs_f64();
        assert_eq!(restored.pending_calls(), source.pending_calls());
        assert_eq!(restored.pending_bytes(), source.pending_bytes());
        drop(restored);

        // 4. The same entries handed over in sequence order. `Correlator::restore` sorts them by
        //    sequence number itself, so this should match 3; a gap is noise.
        let mut sorted: Vec<(&String, &Vec<u8>)> = latest.iter().collect();
        sorted.sort_unstable_by_key(|(k, _)| k.parse::<u64>().unwrap_or(u64::MAX));
        let t = Instant::now();
        let restored = Correlator::restore(pending_config(), sorted).expect("restore");
        let restore_sorted = t.elapsed().as_secs_f64();
        assert_eq!(restored.pending_calls(), source.pending_calls());
        drop(restored);

        let n = latest.len() as f64;
        println!(
            "restore: round {} fold {:.0} records/s, Correlator::restore {:.0} entries/s ({:.3}s for {} entries), in seq order {:.0} entries/s",
            round + 1,
            log.len() as f64 / fold,
            n / restore,
            restore,
            latest.len(),
            n / restore_sorted
        );
        for (b, v) in best.iter_mut().zip([fold, restore, restore_sorted]) {
            *b = b.min(v);
        }
    }
    let n = entries_len as f64;
    println!(
        "restore: RESULT pure Correlator::restore {:.0} entries/s (best of {rounds}; target >= 300000; {:.0}/s in seq order); fold + restore {:.0} records/s",
        n / best[1],
        n / best[2],
        log.len() as f64 / (best[0] + best[1])
    );
}

/// One restore through the broker, as the runtime measures it.
#[derive(Debug, Clone)]
pub struct BrokerRestore {
    pub records: f64,
    pub partitions: u64,
    /// Sum of the per-partition restore durations (they run in parallel).
    pub sum_secs: f64,
    /// Assignment seen → ready.
    pub wall: Duration,
    pub pending: f64,
    pub cpu: crate::cpu::Usage,
}

pub fn broker(
    rt: &tokio::runtime::Runtime,
    brokers: &str,
    calls: usize,
    partitions: i32,
    samples: usize,
    seed: u64,
    broker_pid: Option<u32>,
) {
    empty_partition_floor(rt, brokers);
    let announces = crate::gen::announces(calls, seed);
    let base = kafka::unique("bench-rs");
    let inputs = [format!("{base}.announce"), format!("{base}.completion")];
    let group = format!("{base}-g");
    let mut settings = kafka::settings(brokers, &group, &inputs);
    settings.core = pending_config();
    kafka::create_processor_topics(rt, &settings, partitions);
    let took = kafka::preload(brokers, &inputs, &announces);
    println!(
        "restore: preloaded {} announces in {:.2}s",
        announces.len(),
        took.as_secs_f64()
    );
    let ends = kafka::read_ends(brokers, &inputs, partitions, announces.len());
    drop(announces);

    // The writer: consumes everything, so its changelog holds every pending call.
    let registry = Registry::new();
    let limit = Instant::now() + WAIT;
    let t = Instant::now();
    let writer = rt
        .block_on(toolcalls_processor::start(
            settings.clone(),
            registry.clone(),
        ))
        .expect("starting the writer");
    let watch = OffsetWatch::new(brokers, &group, &ends);
    watch.wait_done(Duration::from_millis(20), limit);
    let pending = metric(&registry, "toolcalls_state_pending_calls");
    kafka::stop(rt, writer);
    println!(
        "restore: writer processed the input in {:.2}s; {pending:.0} pending entries in its state",
        t.elapsed().as_secs_f64()
    );

    let mut results = Vec::new();
    for i in 0..samples {
        let r = restore_once(rt, &settings, partitions, broker_pid);
        println!(
            "restore: broker sample {}: {:.0} changelog records in {:.3}s wall (assignment -> ready): {:.0} records/s; {} partitions restored in parallel, {:.0} records/s per partition restore (sum of durations {:.3}s); {:.0} pending entries restored",
            i + 1,
            r.records,
            r.wall.as_secs_f64(),
            r.records / r.wall.as_secs_f64(),
            r.partitions,
            r.records / r.sum_secs,
            r.sum_secs,
            r.pending
        );
        println!("restore:         {}", r.cpu.describe(r.records as usize));
        assert_eq!(
            r.pending, pending,
            "the restored state must hold what the writer left pending"
        );
        results.push(r);
    }
    let best = results
        .iter()
        .map(|r| r.records / r.wall.as_secs_f64())
        .fold(0.0, f64::max);
    let best_per = results
        .iter()
        .map(|r| r.records / r.sum_secs)
        .fold(0.0, f64::max);
    println!(
        "restore: RESULT through the broker {best:.0} changelog records/s wall ({partitions} partitions in parallel), {best_per:.0} records/s per partition restore (best of {samples}; target >= 300000)"
    );
}

fn restore_once(
    rt: &tokio::runtime::Runtime,
    settings: &Settings,
    partitions: i32,
    broker_pid: Option<u32>,
) -> BrokerRestore {
    let registry = Registry::new();
    let limit = Instant::now() + WAIT;
    let running = rt
        .block_on(toolcalls_processor::start(
            settings.clone(),
            registry.clone(),
        ))
        .expect("starting the restorer");
    let assigned = kafka::wait_for("the assignment", Duration::from_millis(1), limit, || {
        metric(&registry, "toolcalls_group_partitions_assigned") > 0.0
    });
    let mark = crate::cpu::mark(broker_pid);
    let ready = kafka::wait_for("the restore", Duration::from_millis(1), limit, || {
        metric(&registry, "toolcalls_ready") > 0.0
            && kafka::histogram(&registry, "toolcalls_restore_duration_seconds").0
                >= partitions as u64
    });
    let usage = crate::cpu::since(&mark, broker_pid);
    let (count, sum) = kafka::histogram(&registry, "toolcalls_restore_duration_seconds");
    let r = BrokerRestore {
        cpu: usage,
        records: metric(&registry, "toolcalls_restore_records_total"),
        partitions: count,
        sum_secs: sum,
        wall: ready - assigned,
        pending: metric(&registry, "toolcalls_state_pending_calls"),
    };
    kafka::stop(rt, running);
    r
}

/// How long a fresh consumer with the runtime's restore-reader settings (crates/processor/src/client.rs
/// `restore_config`) takes to reach the end of an empty partition: the fixed cost of a restore. As
/// the runtime does it (assign at once), and with the topic's metadata fetched before the assign.
fn empty_partition_floor(rt: &tokio::runtime::Runtime, brokers: &str) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::error::KafkaError;
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
    let topic = kafka::unique("bench-empty");
    kafka::create_topic(rt, brokers, &topic, 1);
    for metadata_first in [false, true] {
        let mut times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let reader: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("group.id", kafka::unique("bench-empty-restore"))
                .set("enable.auto.commit", "false")
                .set("enable.partition.eof", "true")
                .set("isolation.level", "read_committed")
                .set("auto.offset.reset", "earliest")
                .set("fetch.wait.max.ms", "10")
                .create()
                .expect("reader");
            if metadata_first {
                reader
                    .fetch_metadata(Some(&topic), Duration::from_secs(10))
                    .expect("metadata");
            }
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&topic, 0, Offset::Beginning)
                .expect("partition");
            reader.assign(&tpl).expect("assign");
            let limit = Instant::now() + Duration::from_secs(30);
            loop {
                assert!(Instant::now() < limit, "no end of the empty partition");
                match reader.poll(Duration::from_millis(100)) {
                    Some(Err(KafkaError::PartitionEOF(_))) => break,
                    Some(Err(e)) => panic!("reading an empty partition: {e}"),
                    _ => {}
                }
            }
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        let shown: Vec<String> = times.iter().map(|t| format!("{t:.0} ms")).collect();
        println!(
            "restore: a fresh consumer with the restore reader's settings reaches the end of an empty partition in {} ({})",
            shown.join(", "),
            if metadata_first {
                "topic metadata fetched before the assign"
            } else {
                "assigned at once, as restore_partition does"
            }
        );
    }
}
