//! librdkafka client configuration and the contexts that route its logs to tracing, its statistics
//! to metrics and its delivery reports to counters.

use crate::config::{Guarantee, Settings};
use crate::metrics::Metrics;
use crate::telemetry::output::DeliveryFailed;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A client named `toolcalls-<instance>-<role>` of the brokers, logging warnings and worse.
fn named(settings: &Settings, role: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &settings.brokers);
    c.set(
        "client.id",
        format!("toolcalls-{}-{role}", settings.instance_id),
    );
    c.set_log_level(RDKafkaLogLevel::Warning);
    c
}

/// The user's `--kafka` pairs (which win over the defaults set before), but those `skip` refuses.
fn passthrough(c: &mut ClientConfig, settings: &Settings, skip: fn(&str) -> bool) {
    for (k, v) in &settings.kafka {
        if !skip(k) {
            c.set(k, v);
        }
    }
}

/// Settings shared by every client, then the user's `--kafka` passthrough (which wins).
pub(crate) fn base_config(settings: &Settings, role: &str) -> ClientConfig {
    let mut c = named(settings, role);
    passthrough(&mut c, settings, |_| false);
    c
}

/// The group consumer of the input topics.
pub(crate) fn consumer_config(settings: &Settings) -> ClientConfig {
    let mut c = named(settings, "consumer");
    c.set("group.id", &settings.group);
    c.set("enable.auto.commit", "false");
    c.set("enable.auto.offset.store", "false");
    c.set("auto.offset.reset", "earliest");
    c.set("partition.assignment.strategy", "cooperative-sticky");
    c.set("isolation.level", "read_committed");
    // Statistics feed the lag metrics and tell the partition tasks whether an input topic has
    // more to deliver (see `input/align.rs`).
    c.set("statistics.interval.ms", "250");
    // The consumer thread empties librdkafka's queue into the partition tasks at once, so a full
    // queue (a broker that answers a fetch with a whole partition) clears within milliseconds;
    // librdkafka's default would then leave the partitions unfetched for a second.
    c.set("fetch.queue.backoff.ms", "20");
    // librdkafka has one fetch in flight per broker. A fetch of partitions that are all at their
    // end waits this long on the broker, and partitions that become fetchable meanwhile (resumed,
    // just restored, their queue drained) wait with it: 500 ms by default.
    c.set("fetch.wait.max.ms", "100");
    // What librdkafka prefetches per partition queue (it stops fetching a partition at this
    // much; the consumer thread reads a partition only while its task keeps up): 16 MiB rather
    // than the 64 MiB default, as every partition has a queue of its own.
    c.set("queued.max.messages.kbytes", "16384");
    passthrough(&mut c, settings, |_| false);
    // Managed keys (validated not to be in the passthrough).
    c.set("group.id", &settings.group);
    c.set("enable.auto.commit", "false");
    c.set("isolation.level", "read_committed");
    c
}

/// The producer of records, changelog and dead letters.
pub(crate) fn producer_config(settings: &Settings) -> ClientConfig {
    let mut c = named(settings, "producer");
    c.set("linger.ms", "5");
    c.set("enable.idempotence", "true");
    // Records are JSON of about a kilobyte; lz4 shrinks them several times over for little CPU,
    // which the broker, the network and every reader of the topics gain.
    c.set("compression.type", "lz4");
    // Only failed deliveries matter (`ProducerCtx::delivery`): without a report per delivered
    // message, librdkafka frees it on its broker thread instead of queueing an event for ours.
    c.set("delivery.report.only.error", "true");
    c.set(
        "transaction.timeout.ms",
        settings.transaction_timeout_ms.to_string(),
    );
    // Consumer-only keys would make librdkafka warn on every start.
    passthrough(&mut c, settings, is_consumer_only);
    if settings.guarantee == Guarantee::ExactlyOnce {
        c.set("transactional.id", settings.transactional_id());
    }
    c
}

/// A plain consumer that reads one changelog partition to its end.
pub(crate) fn restore_config(settings: &Settings) -> ClientConfig {
    let mut c = named(settings, "restore");
    // It joins no group: the group's keys do not apply, nor do statistics.
    passthrough(&mut c, settings, |k| {
        matches!(
            k,
            "session.timeout.ms"
                | "heartbeat.interval.ms"
                | "partition.assignment.strategy"
                | "statistics.interval.ms"
        )
    });
    c.set("group.id", format!("{}-restore", settings.group));
    c.set("enable.auto.commit", "false");
    c.set("enable.partition.eof", "true");
    c.set("isolation.level", "read_committed");
    c.set("auto.offset.reset", "earliest");
    // The end of the changelog is found by an empty fetch: do not let the broker hold it long.
    c.set("fetch.wait.max.ms", "10");
    c
}

fn is_consumer_only(k: &str) -> bool {
    matches!(
        k,
        "session.timeout.ms"
            | "heartbeat.interval.ms"
            | "partition.assignment.strategy"
            | "auto.offset.reset"
            | "max.poll.interval.ms"
            | "fetch.min.bytes"
            | "fetch.wait.max.ms"
            | "fetch.max.bytes"
            | "max.partition.fetch.bytes"
            | "queued.min.messages"
            | "queued.max.messages.kbytes"
            | "group.instance.id"
            | "enable.partition.eof"
            | "check.crcs"
    )
}

/// Routes librdkafka logs to tracing.
pub(crate) fn log_to_tracing(level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", facility = fac, "{message}")
        }
        RDKafkaLogLevel::Warning => {
            tracing::warn!(target: "librdkafka", facility = fac, "{message}")
        }
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", facility = fac, "{message}")
        }
        RDKafkaLogLevel::Debug => {
            tracing::debug!(target: "librdkafka", facility = fac, "{message}")
        }
    }
}

/// Context of the producer: logs, and counts failed deliveries so a checkpoint can refuse to
/// commit offsets past lost output (at-least-once; transactions fail on their own).
pub(crate) struct ProducerCtx {
    pub metrics: Metrics,
    pub failed: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl ProducerCtx {
    pub fn new(metrics: Metrics) -> Self {
        ProducerCtx {
            metrics,
            failed: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    /// Failed deliveries since the last call, with the last error.
    pub fn take_failures(&self) -> Option<(u64, String)> {
        let n = self.failed.swap(0, Ordering::AcqRel);
        if n == 0 {
            return None;
        }
        let last = self
            .last_error
            .lock()
            .map(|mut e| e.take())
            .ok()
            .flatten()
            .unwrap_or_default();
        Some((n, last))
    }
}

impl ClientContext for ProducerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_tracing(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(error = %error, reason, "producer error");
    }
}

impl ProducerContext for ProducerCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            // Purged messages of an aborted transaction are not failures of their own.
            if matches!(
                e.rdkafka_error_code(),
                Some(
                    rdkafka::types::RDKafkaErrorCode::PurgeQueue
                        | rdkafka::types::RDKafkaErrorCode::PurgeInflight
                )
            ) {
                return;
            }
            self.failed.fetch_add(1, Ordering::AcqRel);
            DeliveryFailed.emit(&self.metrics);
            if let Ok(mut last) = self.last_error.lock() {
                *last = Some(e.to_string());
            }
        }
    }
}

/// The producer every partition task and the coordinator share.
pub(crate) type SharedProducer = Arc<rdkafka::producer::ThreadedProducer<ProducerCtx>>;
