//! The producer: v1 events onto the processor's input topics (what `toolcalls ingest` does without
//! `--out`), and [`wait_delivered`], the flush every Kafka producer of the project waits with.
//!
//! Every event is keyed by its session, so a whole session lands on one partition of each input
//! topic. Results (`completion`, `execution_end`) go to the completion topic, everything else to
//! the announce topic — the convention of docs/OPERATIONS.md. The producer is idempotent
//! (`enable.idempotence`), so a retried send is not written twice, and uses the `murmur2_random`
//! partitioner, the Java client's, unless `--kafka partitioner=…` says otherwise: every producer of
//! the input topics must use the same one.

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolcalls_model::{Event, EventKind};

/// Waits until every message handed to `producer` is delivered or has failed, for at most
/// `timeout` (then `KafkaError::Flush(OperationTimedOut)`).
///
/// rdkafka's `Producer::flush` waits for the next event on the producer's queue in steps of up
/// to 100 ms. With `delivery.report.only.error=true` (and with the `ThreadedProducer`'s own
/// thread serving that queue) no event comes, so every flush took at least 100 ms, however fast
/// the broker answered: that was nearly all of a commit's time. Here one flush that does not
/// wait makes librdkafka send what it holds at once (ignoring `linger.ms`), then the count of
/// undelivered messages is checked every millisecond.
pub fn wait_delivered<P, C>(producer: &P, timeout: Duration) -> KafkaResult<()>
where
    P: Producer<C>,
    C: ProducerContext,
{
    let deadline = Instant::now() + timeout;
    match producer.flush(Duration::ZERO) {
        Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut)) => {}
        done => return done,
    }
    while producer.in_flight_count() > 0 {
        if Instant::now() >= deadline {
            return Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Where and how to publish.
#[derive(Debug, Clone)]
pub struct PublishSettings {
    pub brokers: String,
    pub announce_topic: String,
    pub completion_topic: String,
    /// librdkafka properties, applied after the defaults (they win).
    pub kafka: Vec<(String, String)>,
    /// Bound on the final flush.
    pub flush_timeout: Duration,
}

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("cannot create the Kafka producer ({0}); check --brokers and the --kafka settings")]
    Create(KafkaError),
    #[error("Kafka refused an event ({0})")]
    Send(KafkaError),
    #[error("{failed} events were not delivered; the first error: {first} — check that the topics exist (`toolcalls topics create`) and the broker is reachable")]
    Delivery { failed: u64, first: String },
    #[error("events were still in flight after {0:?}; the broker is slow or unreachable — nothing is lost on the broker side, re-run to publish the rest (records are deduplicated by call id)")]
    Flush(Duration),
}

#[derive(Default)]
struct Deliveries {
    delivered: AtomicU64,
    failed: AtomicU64,
    first: Mutex<Option<String>>,
}

struct Context(Arc<Deliveries>);

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.0.first.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// A producer of v1 events onto the input topics.
pub struct Publisher {
    producer: ThreadedProducer<Context>,
    deliveries: Arc<Deliveries>,
    settings: PublishSettings,
}

impl Publisher {
    pub fn new(settings: PublishSettings) -> Result<Self, PublishError> {
        let deliveries = Arc::new(Deliveries::default());
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &settings.brokers)
            .set("client.id", "toolcalls-ingest")
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            .set_log_level(RDKafkaLogLevel::Warning);
        for (k, v) in &settings.kafka {
            c.set(k, v);
        }
        let producer = c
            .create_with_context(Context(deliveries.clone()))
            .map_err(PublishError::Create)?;
        Ok(Publisher {
            producer,
            deliveries,
            settings,
        })
    }

    /// The input topic an event belongs on.
    pub fn topic_for(&self, event: &Event) -> &str {
        match event.kind() {
            EventKind::Completion | EventKind::ExecutionEnd => &self.settings.completion_topic,
            _ => &self.settings.announce_topic,
        }
    }

    /// Enqueues one event (`payload` is its encoding), waiting while librdkafka's queue is full.
    pub fn send(&self, event: &Event, payload: &[u8]) -> Result<(), PublishError> {
        let topic = self.topic_for(event).to_owned();
        let key = event.session.as_str().as_bytes();
        let mut record = BaseRecord::to(&topic).key(key).payload(payload);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    // The producer's own thread drains the queue; give it a moment.
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(PublishError::Send(e)),
            }
        }
    }

    /// Waits until every event is delivered; fails when any was not.
    pub fn finish(&self) -> Result<u64, PublishError> {
        wait_delivered(&self.producer, self.settings.flush_timeout)
            .map_err(|_| PublishError::Flush(self.settings.flush_timeout))?;
        let failed = self.deliveries.failed.load(Ordering::Relaxed);
        if failed > 0 {
            let first = self
                .deliveries
                .first
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_default();
            return Err(PublishError::Delivery { failed, first });
        }
        Ok(self.deliveries.delivered.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::producer::DefaultProducerContext;
    use rdkafka::producer::PurgeConfig;

    #[test]
    fn wait_delivered_gives_up_at_its_timeout_when_no_broker_answers() {
        // Port 1 on the loopback: nothing listens, so the message can never be delivered.
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("delivery.report.only.error", "true")
            .set_log_level(RDKafkaLogLevel::Emerg)
            .create()
            .expect("producer");
        producer
            .send(BaseRecord::<str, str>::to("nowhere").payload("x"))
            .map_err(|(e, _)| e)
            .expect("enqueue");
        let got = wait_delivered(&producer, Duration::from_millis(200));
        assert!(
            matches!(
                got,
                Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
            ),
            "{got:?}"
        );
        assert_eq!(producer.in_flight_count(), 1);
        producer.purge(PurgeConfig::default().queue().inflight());
    }
}
