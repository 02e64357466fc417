//! librdkafka client configuration and the contexts that route its logs to tracing, its statistics
//! to metrics and its delivery reports to counters.

use crate::config::{Guarantee, Settings};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::telemetry::broker::ProducerFenced;
use crate::telemetry::output::DeliveryFailed;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use rdkafka::types::RDKafkaErrorCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolcalls_producer::{BrokerWatch, Trouble};

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
    c.set(
        "socket.timeout.ms",
        request_timeout_ms(settings).to_string(),
    );
    // Consumer-only keys would make librdkafka warn on every start.
    passthrough(&mut c, settings, is_consumer_only);
    if settings.guarantee == Guarantee::ExactlyOnce {
        c.set("transactional.id", settings.transactional_id());
    }
    c
}

/// The producer's `socket.timeout.ms`: `kafka_timeout_ms`, so that a transactional call ends
/// within it. librdkafka's `send_offsets_to_transaction` does not end at its own timeout but when
/// its request does (librdkafka issue 5456), and with its default (the transaction timeout, 60 s)
/// a broker that stopped answering held a commit, and the abort that follows, for a minute.
/// librdkafka wants it at least 100 ms below the transaction timeout, and within 10 ms … 300 s.
fn request_timeout_ms(settings: &Settings) -> u64 {
    settings
        .kafka_timeout_ms
        .min(settings.transaction_timeout_ms.saturating_sub(100))
        .clamp(10, 300_000)
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

/// Routes librdkafka logs to tracing. A broker connection that fails (facility `FAIL`) is also
/// reported through the error callback, which the [`BrokerWatch`] says at its own rate: its log
/// line is only a debug line.
pub(crate) fn log_to_tracing(level: RDKafkaLogLevel, fac: &str, message: &str) {
    if fac == "FAIL" {
        tracing::debug!(target: "librdkafka", facility = fac, "{message}");
        return;
    }
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

/// Whether an error code says a transactional producer was fenced (another producer took its
/// transactional id, or the broker bumped its epoch).
pub(crate) fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

/// Context of the producer: logs, tells the broker watch of connectivity errors, says a fenced
/// producer, and counts failed deliveries so a checkpoint can refuse to commit offsets past lost
/// output (at-least-once; transactions fail on their own).
pub(crate) struct ProducerCtx {
    pub metrics: Metrics,
    pub failed: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    pub watch: Arc<BrokerWatch>,
    /// The transactional id, when exactly-once.
    pub transactional_id: Option<String>,
    /// The fencing was said (it is said once).
    fenced: AtomicBool,
}

impl ProducerCtx {
    pub fn new(
        metrics: Metrics,
        watch: Arc<BrokerWatch>,
        transactional_id: Option<String>,
    ) -> Self {
        ProducerCtx {
            metrics,
            failed: AtomicU64::new(0),
            last_error: Mutex::new(None),
            watch,
            transactional_id,
            fenced: AtomicBool::new(false),
        }
    }

    /// The producer was fenced (`detail` says how it showed): said and counted once.
    pub fn fenced(&self, detail: &str) {
        if self.fenced.swap(true, Ordering::AcqRel) {
            return;
        }
        ProducerFenced {
            transactional_id: self.transactional_id.as_deref().unwrap_or("-"),
            detail,
        }
        .emit(&self.metrics);
    }

    /// Whether the producer was fenced: its transactional id is another producer's now.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// Says `error` if it shows the producer fenced.
    pub fn check_fenced(&self, error: &KafkaError) {
        let fenced = match error {
            KafkaError::Transaction(e) => is_fencing(e.code()),
            other => other.rdkafka_error_code().is_some_and(is_fencing),
        };
        if fenced {
            self.fenced(&error.to_string());
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
        if self.watch.client_error(&error, reason) {
            return;
        }
        // A fatal error of a transactional producer is most often its fencing; librdkafka names
        // it in the reason ("… fenced …", "… epoch …").
        let lower = reason.to_ascii_lowercase();
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal)
            && (lower.contains("fenced") || lower.contains("epoch"))
        {
            self.fenced(reason);
            return;
        }
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
            self.check_fenced(e);
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

/// Context of the start-up probe: connectivity errors go to the watch.
struct ProbeCtx {
    watch: Arc<BrokerWatch>,
}

impl ClientContext for ProbeCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_tracing(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if !self.watch.client_error(&error, reason) {
            tracing::debug!(error = %error, reason, "kafka error while probing the brokers");
        }
    }
}

impl ConsumerContext for ProbeCtx {}

/// How long one metadata request of [`wait_for_brokers`] waits.
const PROBE_ATTEMPT: Duration = Duration::from_secs(1);
/// How long the brokers may stay silent — no answer, no error — before that is said as their
/// trouble (a dropped SYN takes librdkafka 30 s to report).
const PROBE_SILENCE: Duration = Duration::from_secs(3);

/// Waits (blocking) until a broker answers a metadata request, telling `watch` what keeps them
/// out of reach meanwhile (it says so at once and then at its rate). Gives up at `deadline`, with
/// the trouble and what to check; `None` waits as long as it takes.
pub fn wait_for_brokers(
    settings: &Settings,
    watch: &Arc<BrokerWatch>,
    deadline: Option<Instant>,
) -> Result<(), Error> {
    BrokerProbe::new(settings, watch)?.wait(deadline)
}

/// A metadata client that asks the brokers until one answers: [`wait_for_brokers`], kept for
/// repeated waits (one client, so its start-up warnings are said once).
pub(crate) struct BrokerProbe {
    client: BaseConsumer<ProbeCtx>,
    watch: Arc<BrokerWatch>,
    topic: String,
    brokers: String,
    /// When it was made: brokers silent this long past [`PROBE_SILENCE`] are said to be.
    made: Instant,
}

impl BrokerProbe {
    pub fn new(settings: &Settings, watch: &Arc<BrokerWatch>) -> Result<Self, Error> {
        let client = base_config(settings, "probe")
            .create_with_context(ProbeCtx {
                watch: watch.clone(),
            })
            .map_err(|e| Error::kafka("creating the metadata client", e))?;
        Ok(BrokerProbe {
            client,
            watch: watch.clone(),
            topic: settings.topics.announce.clone(),
            brokers: settings.brokers.clone(),
            made: Instant::now(),
        })
    }

    /// Waits (blocking) until a broker answers, at most until `deadline`.
    pub fn wait(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let watch = &self.watch;
        let start = Instant::now();
        loop {
            let answer = self.client.fetch_metadata(Some(&self.topic), PROBE_ATTEMPT);
            // The error callbacks of what happened meanwhile (a call serves one event).
            for _ in 0..64 {
                let _ = self.client.poll(Duration::ZERO);
            }
            if answer.is_ok() {
                watch.reachable();
                return Ok(());
            }
            // A connection error says at once why; without one (no answer at all), the silence
            // is said once it lasts.
            if watch.is_reachable()
                && (watch.last_error().is_some() || self.made.elapsed() >= PROBE_SILENCE)
            {
                watch.unanswered(&format!(
                    "no broker answered within {}s (librdkafka is still trying to connect)",
                    PROBE_SILENCE.as_secs()
                ));
            } else {
                watch.tick();
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let (trouble, reason) = watch.trouble().map_or_else(
                    || (Trouble::Unreachable, "no broker answered".to_owned()),
                    |(t, r, _)| (t, r),
                );
                return Err(Error::Unreachable {
                    trouble,
                    brokers: self.brokers.clone(),
                    reason,
                    waited: start.elapsed(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer_timeout(settings: &Settings) -> Option<String> {
        producer_config(settings)
            .get("socket.timeout.ms")
            .map(str::to_owned)
    }

    #[test]
    fn the_producers_requests_end_within_the_kafka_timeout() {
        let mut s = Settings {
            kafka_timeout_ms: 2_000,
            ..Settings::default()
        };
        assert_eq!(producer_timeout(&s).as_deref(), Some("2000"));
        // Below the transaction timeout, as librdkafka requires, and within its range.
        s.kafka_timeout_ms = 600_000;
        s.transaction_timeout_ms = 60_000;
        assert_eq!(producer_timeout(&s).as_deref(), Some("59900"));
        s.transaction_timeout_ms = 900_000;
        assert_eq!(producer_timeout(&s).as_deref(), Some("300000"));
        s.kafka_timeout_ms = 0;
        assert_eq!(producer_timeout(&s).as_deref(), Some("10"));
        // The user's --kafka wins.
        s.kafka = vec![("socket.timeout.ms".into(), "45000".into())];
        assert_eq!(producer_timeout(&s).as_deref(), Some("45000"));
    }
}
