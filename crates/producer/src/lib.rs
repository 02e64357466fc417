//! The producer: v1 events onto the processor's input topics (what `toolcalls ingest` does without
//! `--out`), and [`wait_delivered`], the flush every Kafka producer of the project waits with.
//!
//! Every event is keyed by its session, so a whole session lands on one partition of each input
//! topic. Results (`completion`, `execution_end`) go to the completion topic, everything else to
//! the announce topic — the convention of docs/OPERATIONS.md. The producer is idempotent
//! (`enable.idempotence`), so a retried send is not written twice, and uses the `murmur2_random`
//! partitioner, the Java client's, unless `--kafka partitioner=…` says otherwise: every producer of
//! the input topics must use the same one.
//!
//! Nothing waits without bound: an event not delivered within the delivery timeout
//! ([`PublishSettings::flush_timeout`], librdkafka's `message.timeout.ms`) fails, and
//! [`Publisher::check_topics`] gives up on brokers that do not answer within it. Meanwhile a
//! [`BrokerWatch`] says which brokers cannot be reached and why, at a modest rate ([`reach`]).

pub mod partitioner;
pub mod reach;
pub mod refused;

pub use partitioner::partition_of;
pub use reach::{BrokerWatch, Notice, Trouble, REPEAT_EVERY};
pub use refused::Refused;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use std::io::Write as _;
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
    /// The delivery timeout: how long an event may take to be delivered (librdkafka's
    /// `message.timeout.ms`, unless `kafka` sets it), and how long [`Publisher::check_topics`]
    /// waits for the brokers.
    pub flush_timeout: Duration,
}

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("cannot create the Kafka producer ({0}); check --brokers and the --kafka settings")]
    Create(KafkaError),
    #[error("{0}")]
    Property(String),
    #[error("Kafka refused an event ({0})")]
    Send(KafkaError),
    #[error("an event of {bytes} bytes is larger than a Kafka message may be here ({max} bytes: librdkafka's message.max.bytes; raise it with --kafka message.max.bytes=N, and the topics' max.message.bytes with it); it was left out")]
    TooLarge { bytes: usize, max: usize },
    #[error("gave up after {waited:?} (the delivery timeout, --delivery-timeout): {}", trouble_words(*trouble, brokers, reason))]
    Unreachable {
        trouble: Trouble,
        brokers: String,
        reason: String,
        waited: Duration,
    },
    #[error("topic `{topic}` does not exist on the Kafka brokers at {brokers}; check --announce-topic and --completion-topic (`[topics]` in the config file), or create the processor's topics with `toolcalls topics create`")]
    MissingTopic { topic: String, brokers: String },
    #[error("topic `{topic}` is not available ({reason}) within the delivery timeout; check the topic on the brokers")]
    TopicUnavailable { topic: String, reason: String },
    #[error("{failed} events were not delivered; the first error: {first}{why} — check that the topics exist (`toolcalls topics create`) and the brokers are reachable, then re-run (records are deduplicated by call id)")]
    Delivery {
        failed: u64,
        first: String,
        /// What the brokers' trouble was, when there was one (`; the Kafka brokers …`).
        why: String,
    },
    #[error("events were still in flight after {0:?}; the broker is slow or unreachable — nothing is lost on the broker side, re-run to publish the rest (records are deduplicated by call id)")]
    Flush(Duration),
}

fn trouble_words(trouble: Trouble, brokers: &str, reason: &str) -> String {
    format!(
        "{} at {brokers}: {reason}; {}",
        trouble.what(),
        trouble.advice()
    )
}

#[derive(Default)]
struct Deliveries {
    delivered: AtomicU64,
    failed: AtomicU64,
    first: Mutex<Option<String>>,
    /// Left out, not failed: see [`Refused`].
    refused: Mutex<Vec<Refused>>,
}

struct Context {
    deliveries: Arc<Deliveries>,
    watch: Arc<BrokerWatch>,
}

impl ClientContext for Context {
    fn error(&self, error: KafkaError, reason: &str) {
        // Connectivity and authentication errors go to the watch, which says them at its rate;
        // the rest are rare and said as they come.
        if !self.watch.client_error(&error, reason) {
            // Not `eprintln!`: a closed stderr must not panic librdkafka's thread.
            let _ = writeln!(std::io::stderr(), "kafka: {error}: {reason}");
        }
    }
}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.deliveries.delivered.fetch_add(1, Ordering::Relaxed);
                self.watch.reachable();
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), m)) => {
                let refused = Refused {
                    payload: m.payload().unwrap_or_default().to_vec(),
                    topic: m.topic().to_owned(),
                };
                let mut all = self
                    .deliveries
                    .refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                all.push(refused);
            }
            Err((e, _)) => {
                self.deliveries.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self
                    .deliveries
                    .first
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// A producer of v1 events onto the input topics.
pub struct Publisher {
    producer: ThreadedProducer<Context>,
    deliveries: Arc<Deliveries>,
    watch: Arc<BrokerWatch>,
    settings: PublishSettings,
}

/// The most bytes a v2 record's framing takes around its key and value, which librdkafka adds to
/// them when it checks a message against `message.max.bytes` (`RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD`:
/// the varints of length, timestamp delta, offset delta, key and value lengths and header count
/// at their widest, and the attributes byte).
pub const MESSAGE_OVERHEAD: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;

/// How long one metadata request of [`Publisher::check_topics`] waits.
const METADATA_ATTEMPT: Duration = Duration::from_secs(1);
/// How long brokers may stay silent — no answer, no error — before that is said as a trouble of
/// its own (a dropped SYN takes librdkafka 30 s to report).
const SILENCE: Duration = Duration::from_secs(3);

impl PublishSettings {
    /// The largest message (key and payload) the producer takes: librdkafka's
    /// `message.max.bytes`, as `kafka` sets it or by default.
    pub fn max_message_bytes(&self) -> usize {
        const LIBRDKAFKA_DEFAULT: usize = 1_000_000;
        self.kafka
            .iter()
            .rev()
            .find(|(k, _)| k == "message.max.bytes")
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(LIBRDKAFKA_DEFAULT)
    }

    /// Whether an event with this key and payload is one the producer takes; else the error
    /// that says so. librdkafka counts a message as its key, its value and the most a record's
    /// framing can take ([`MESSAGE_OVERHEAD`]), and refuses it past `message.max.bytes`.
    pub fn check_size(&self, key: &[u8], payload: &[u8]) -> Result<(), PublishError> {
        let bytes = key.len() + payload.len() + MESSAGE_OVERHEAD;
        let max = self.max_message_bytes();
        if bytes > max {
            return Err(PublishError::TooLarge { bytes, max });
        }
        Ok(())
    }

    /// The librdkafka configuration every producer of the input topics uses (`ingest`,
    /// `receive`): keyed by session with `murmur2_random`, idempotent, the delivery timeout as
    /// `message.timeout.ms`, no topic auto-creation; then the `--kafka` properties.
    pub fn client_config(&self, client_id: &str) -> ClientConfig {
        let timeout_ms = self.flush_timeout.as_millis().clamp(1, i32::MAX as u128);
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("client.id", client_id)
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            // Events are not kept for five minutes (librdkafka's default) when the brokers
            // cannot be reached: the delivery timeout bounds them.
            .set("message.timeout.ms", timeout_ms.to_string())
            // A mistyped topic name must not create a topic on a broker that would.
            .set("allow.auto.create.topics", "false")
            .set_log_level(RDKafkaLogLevel::Warning);
        for (k, v) in &self.kafka {
            c.set(k, v);
        }
        c
    }
}

/// Refuses `--kafka` properties that would have an event reported delivered before every
/// in-sync replica has it: the producers say "delivered" (ingest's count, a follower's
/// checkpoint, the receiver's 2xx) only for what the brokers keep, which the idempotent
/// producer's `acks=all` gives.
pub fn keeps_acknowledged_delivery(properties: &[(String, String)]) -> Result<(), String> {
    for (key, value) in properties {
        let value = value.trim().to_ascii_lowercase();
        let weakens = match key.as_str() {
            "enable.idempotence" => value != "true",
            "acks" | "request.required.acks" => !matches!(value.as_str(), "all" | "-1"),
            _ => false,
        };
        if weakens {
            return Err(format!(
                "--kafka {key}={value}: the producers of toolcalls report an event delivered only once every in-sync replica has it (an idempotent producer, acks=all); leave {key} out"
            ));
        }
    }
    Ok(())
}

/// Checks `--kafka` properties with librdkafka, property by property, and says which one it
/// refuses by its key alone: librdkafka's own error repeats the value, and a value may be a
/// password (`sasl.password`).
pub fn check_kafka_properties(properties: &[(String, String)]) -> Result<(), String> {
    for (key, value) in properties {
        // Given here it would win over --brokers, which every message and warning names.
        if matches!(key.as_str(), "bootstrap.servers" | "metadata.broker.list") {
            return Err(format!(
                "--kafka {key}=…: give the brokers with --brokers (TOOLCALLS_BROKERS, `brokers` in the config file)"
            ));
        }
        let mut c = ClientConfig::new();
        c.set(key, value);
        if let Err(KafkaError::ClientConfig(_, why, _, _)) = c.create_native_config() {
            // librdkafka's reason quotes the value for some properties: left out for secrets.
            let why = if why.contains(value.as_str()) && !value.is_empty() {
                "librdkafka does not take its value".to_owned()
            } else {
                why
            };
            return Err(format!(
                "--kafka {key}=…: {why}; see librdkafka's CONFIGURATION.md for the property"
            ));
        }
    }
    Ok(())
}

impl Publisher {
    /// A publisher whose broker troubles are kept for its errors but not said meanwhile.
    pub fn new(settings: PublishSettings) -> Result<Self, PublishError> {
        let watch = Arc::new(BrokerWatch::new(&settings.brokers, |_| {}));
        Publisher::with_watch(settings, watch)
    }

    /// A publisher that tells `watch` of its connectivity and authentication errors.
    pub fn with_watch(
        settings: PublishSettings,
        watch: Arc<BrokerWatch>,
    ) -> Result<Self, PublishError> {
        check_kafka_properties(&settings.kafka).map_err(PublishError::Property)?;
        keeps_acknowledged_delivery(&settings.kafka).map_err(PublishError::Property)?;
        let deliveries = Arc::new(Deliveries::default());
        let producer = settings
            .client_config("toolcalls-ingest")
            .create_with_context(Context {
                deliveries: deliveries.clone(),
                watch: watch.clone(),
            })
            .map_err(PublishError::Create)?;
        Ok(Publisher {
            producer,
            deliveries,
            watch,
            settings,
        })
    }

    /// Waits until the brokers answer and both input topics exist, for at most the delivery
    /// timeout: a topic that does not exist is refused at once, brokers that cannot be reached
    /// (or refuse the credentials) once the timeout has passed.
    pub fn check_topics(&self) -> Result<(), PublishError> {
        let start = Instant::now();
        let deadline = start + self.settings.flush_timeout;
        let topics = [
            self.settings.announce_topic.as_str(),
            self.settings.completion_topic.as_str(),
        ];
        let mut next = 0;
        while next < topics.len() {
            let topic = topics[next];
            match self
                .producer
                .client()
                .fetch_metadata(Some(topic), METADATA_ATTEMPT)
            {
                Ok(md) => {
                    self.watch.reachable();
                    let entry = md.topics().iter().find(|t| t.name() == topic);
                    match entry.map(|t| (t.error(), t.partitions().is_empty())) {
                        Some((None, false)) => next += 1,
                        None
                        | Some((
                            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART),
                            _,
                        )) => {
                            return Err(PublishError::MissingTopic {
                                topic: topic.to_owned(),
                                brokers: self.settings.brokers.clone(),
                            });
                        }
                        // A topic just created may have no leader yet: ask again.
                        Some((error, _)) => {
                            if Instant::now() >= deadline {
                                return Err(PublishError::TopicUnavailable {
                                    topic: topic.to_owned(),
                                    reason: error.map_or_else(
                                        || "it has no partitions".to_owned(),
                                        |e| RDKafkaErrorCode::from(e).to_string(),
                                    ),
                                });
                            }
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                    continue;
                }
                // A connection error says at once why; without one (no answer at all), the
                // silence is said once it lasts.
                Err(_)
                    if self.watch.is_reachable()
                        && (self.watch.last_error().is_some() || start.elapsed() >= SILENCE) =>
                {
                    self.watch.unanswered(&format!(
                        "no broker answered within {}s (librdkafka is still trying to connect)",
                        SILENCE.as_secs()
                    ));
                }
                Err(_) => self.watch.tick(),
            }
            if Instant::now() >= deadline {
                return Err(self.unreachable(self.settings.flush_timeout));
            }
        }
        Ok(())
    }

    fn unreachable(&self, waited: Duration) -> PublishError {
        let (trouble, reason) = match self.watch.trouble() {
            Some((trouble, reason, _)) => (trouble, reason),
            None => (
                Trouble::Unreachable,
                "no broker answered a metadata request".to_owned(),
            ),
        };
        PublishError::Unreachable {
            trouble,
            brokers: self.settings.brokers.clone(),
            reason,
            waited,
        }
    }

    /// The input topic an event belongs on.
    pub fn topic_for(&self, event: &Event) -> &str {
        match event.kind() {
            EventKind::Completion | EventKind::ExecutionEnd => &self.settings.completion_topic,
            _ => &self.settings.announce_topic,
        }
    }

    /// Enqueues one event (`payload` is its encoding), waiting while librdkafka's queue is full.
    /// An event too large to be sent is [`PublishError::TooLarge`]: the caller reports it and goes
    /// on, as with a bad line.
    pub fn send(&self, event: &Event, payload: &[u8]) -> Result<(), PublishError> {
        let topic = self.topic_for(event).to_owned();
        let key = event.session.as_str().as_bytes();
        self.settings.check_size(key, payload)?;
        let mut record = BaseRecord::to(&topic).key(key).payload(payload);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    // The producer's own thread drains the queue (events that cannot be
                    // delivered leave it at the delivery timeout); give it a moment.
                    self.producer.poll(Duration::from_millis(10));
                    self.watch.tick();
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _)) => {
                    return Err(PublishError::TooLarge {
                        bytes: key.len() + payload.len() + MESSAGE_OVERHEAD,
                        max: self.settings.max_message_bytes(),
                    })
                }
                Err((e, _)) => return Err(PublishError::Send(e)),
            }
        }
    }

    /// Waits until every event is delivered or has failed at the delivery timeout (saying
    /// meanwhile what keeps the brokers out of reach); fails when any was not delivered.
    pub fn finish(&self) -> Result<u64, PublishError> {
        // Every event is enqueued by now, so each is delivered or failed within the delivery
        // timeout; a second more lets the last reports come in.
        let bound = self.settings.flush_timeout + Duration::from_secs(1);
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match wait_delivered(&self.producer, left.min(Duration::from_secs(1))) {
                Ok(()) => break,
                Err(_) if left > Duration::from_secs(1) => self.watch.tick(),
                Err(_) => return Err(PublishError::Flush(bound)),
            }
        }
        let failed = self.deliveries.failed.load(Ordering::Relaxed);
        if failed > 0 {
            let first = self
                .deliveries
                .first
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_default();
            let why = match self.watch.trouble() {
                Some((trouble, reason, _)) => {
                    format!(
                        "; {}",
                        trouble_words(trouble, &self.settings.brokers, &reason)
                    )
                }
                None => String::new(),
            };
            return Err(PublishError::Delivery { failed, first, why });
        }
        Ok(self.deliveries.delivered.load(Ordering::Relaxed))
    }

    /// The events the brokers refused as too large since the last call: left out, not failed
    /// ([`finish`](Publisher::finish) does not count them); the caller says each.
    pub fn take_refused(&self) -> Vec<Refused> {
        let mut all = self
            .deliveries
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *all)
    }

    /// The watch this publisher tells of its brokers' troubles.
    pub fn watch(&self) -> &Arc<BrokerWatch> {
        &self.watch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::producer::DefaultProducerContext;
    use rdkafka::producer::PurgeConfig;

    #[test]
    fn a_refused_property_is_named_by_its_key_never_its_value() {
        let props = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        assert!(check_kafka_properties(&props("sasl.password", "s3cret")).is_ok());
        for (k, v) in [
            ("sasl.pasword", "s3cret-one"),
            ("security.protocol", "s3cret-two"),
        ] {
            let e = check_kafka_properties(&props(k, v)).unwrap_err();
            assert!(e.contains(&format!("--kafka {k}=…")), "{e}");
            assert!(!e.contains(v), "{e}");
        }
        for k in ["bootstrap.servers", "metadata.broker.list"] {
            let e = check_kafka_properties(&props(k, "h:9092")).unwrap_err();
            assert!(e.contains("--brokers"), "{e}");
        }
    }

    #[test]
    fn properties_that_would_report_unkept_events_delivered_are_refused() {
        let props = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        for (k, v) in [
            ("acks", "0"),
            ("acks", "1"),
            ("request.required.acks", "1"),
            ("enable.idempotence", "false"),
        ] {
            let e = keeps_acknowledged_delivery(&props(k, v)).unwrap_err();
            assert!(e.contains(&format!("--kafka {k}={v}")), "{e}");
        }
        for (k, v) in [
            ("acks", "all"),
            ("acks", "-1"),
            ("enable.idempotence", "true"),
        ] {
            assert!(keeps_acknowledged_delivery(&props(k, v)).is_ok(), "{k}={v}");
        }
        let settings = PublishSettings {
            brokers: "localhost:1".into(),
            announce_topic: "a".into(),
            completion_topic: "c".into(),
            kafka: props("acks", "0"),
            flush_timeout: Duration::from_secs(1),
        };
        assert!(matches!(
            Publisher::new(settings),
            Err(PublishError::Property(_))
        ));
    }

    /// Brokers that take only TLS (managed Kafka services, the Kubernetes example's `SASL_SSL`)
    /// need a client built with it: librdkafka refuses `security.protocol=SSL` otherwise.
    #[test]
    fn clients_speak_tls_and_sasl_over_it() {
        for protocol in ["SSL", "SASL_SSL"] {
            let settings = PublishSettings {
                brokers: "127.0.0.1:1".into(),
                announce_topic: "a".into(),
                completion_topic: "c".into(),
                kafka: vec![
                    ("security.protocol".into(), protocol.into()),
                    ("sasl.mechanism".into(), "SCRAM-SHA-512".into()),
                    ("sasl.username".into(), "u".into()),
                    ("sasl.password".into(), "p".into()),
                ],
                flush_timeout: Duration::from_secs(1),
            };
            let made: Result<ThreadedProducer<DefaultProducerContext>, _> =
                settings.client_config("tls-test").create();
            assert!(made.is_ok(), "{protocol}: {:?}", made.err());
        }
    }

    /// The brokers refusing an event as larger than its topic takes leave it out, said, and
    /// the events after it are still delivered.
    #[test]
    fn an_event_the_brokers_refuse_as_too_large_is_left_out_not_failed() {
        use rdkafka::mocking::MockCluster;
        use rdkafka::types::RDKafkaApiKey;
        let cluster = MockCluster::new(1).expect("mock cluster");
        for topic in ["a", "c"] {
            cluster.create_topic(topic, 1, 1).expect("topic");
        }
        let publisher = Publisher::new(PublishSettings {
            brokers: cluster.bootstrap_servers(),
            announce_topic: "a".into(),
            completion_topic: "c".into(),
            kafka: vec![],
            flush_timeout: Duration::from_secs(10),
        })
        .expect("publisher");
        publisher.check_topics().expect("topics");
        let event = |call: &str| {
            let line = format!(
                r#"{{"v":1,"kind":"announce","source":"s","session":"x","callId":"{call}","time":"2026-01-01T00:00:00Z","tool":"t"}}"#
            );
            Event::decode(line.as_bytes()).unwrap()
        };
        let big = event("big");
        cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
        );
        publisher.send(&big, &big.encode()).expect("enqueued");
        assert_eq!(publisher.finish().expect("nothing failed"), 0);
        let refused = publisher.take_refused();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].event(), Some(big));
        assert_eq!(refused[0].topic, "a");
        let said = refused[0].to_string();
        assert!(
            said.contains("max.message.bytes") && said.contains("left out"),
            "{said}"
        );
        assert!(publisher.take_refused().is_empty(), "each said once");

        let next = event("next");
        publisher.send(&next, &next.encode()).expect("enqueued");
        assert_eq!(publisher.finish().expect("delivered"), 1);
        assert!(publisher.take_refused().is_empty());
    }

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
