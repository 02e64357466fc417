//! The receiver's producer: publishes one request's events onto the input topics and waits until
//! the brokers acknowledged each of them.
//!
//! `toolcalls_producer::Publisher` waits for everything it ever sent at once (`finish`), which
//! serves a command that ends; a server answers each request on its own, so here every event
//! gets its own delivery future (rdkafka's `FutureProducer`). The client is configured as the
//! `Publisher` is ([`PublishSettings::client_config`]), and the brokers and topics are checked at
//! start with the `Publisher`'s own check.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::ClientContext;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use toolcalls_model::{Event, EventKind};
use toolcalls_producer::{BrokerWatch, PublishSettings, Publisher};

/// Tells the broker watch of connectivity and authentication errors.
pub struct Context {
    watch: Arc<BrokerWatch>,
}

impl ClientContext for Context {
    fn error(&self, error: KafkaError, reason: &str) {
        if !self.watch.client_error(&error, reason) {
            tracing::warn!("kafka: {error}: {reason}");
        }
    }
}

/// Why a request's events were not all delivered.
pub enum Undelivered {
    /// The brokers did not acknowledge them all (some may have arrived): the client retries.
    Retry(String),
    /// An event is larger than a Kafka message may be: nothing of the request was sent, and a
    /// retry would fail the same way.
    TooLarge(String),
    /// The brokers refused an event as larger than its topic takes (the topic's
    /// `max.message.bytes` below the producer's): the request's other events may have been
    /// published, and a retry would fail the same way.
    Refused(String),
}

type Producer = FutureProducer<Context>;

/// Delivery timeouts without a delivery after which the producer is replaced.
const STUCK: u32 = 3;

struct Times {
    /// When the first request that failed since the last delivery began; `None` while
    /// requests are delivered.
    failing_since: Option<Instant>,
    made: Instant,
}

pub struct Deliverer {
    /// Replaced when it fails for good or delivers nothing for long ([`Deliverer::renew`]); a
    /// request holds the one it sent through until it is answered.
    producer: RwLock<Arc<Producer>>,
    /// Since when requests fail, and when the producer was made.
    times: Mutex<Times>,
    settings: PublishSettings,
    announce_topic: String,
    completion_topic: String,
    timeout: Duration,
    watch: Arc<BrokerWatch>,
    brokers: String,
}

impl Deliverer {
    /// Checks that the brokers answer and both input topics exist (blocking, for at most the
    /// delivery timeout), then makes the producer.
    pub fn connect(settings: PublishSettings) -> anyhow::Result<Deliverer> {
        let watch = Arc::new(BrokerWatch::new(&settings.brokers, |notice| {
            tracing::warn!("{notice}");
        }));
        Publisher::with_watch(settings.clone(), watch.clone())?.check_topics()?;
        let producer = make_producer(&settings, &watch)?;
        let now = Instant::now();
        Ok(Deliverer {
            producer: RwLock::new(Arc::new(producer)),
            times: Mutex::new(Times {
                failing_since: None,
                made: now,
            }),
            announce_topic: settings.announce_topic.clone(),
            completion_topic: settings.completion_topic.clone(),
            timeout: settings.flush_timeout,
            watch,
            brokers: settings.brokers.clone(),
            settings,
        })
    }

    fn topic_for(&self, event: &Event) -> &str {
        match event.kind() {
            EventKind::Completion | EventKind::ExecutionEnd => &self.completion_topic,
            _ => &self.announce_topic,
        }
    }

    /// Publishes `events` and waits until the brokers acknowledged every one, for at most the
    /// delivery timeout. The error says why not: an event too large to send (then none was
    /// sent), or what kept the brokers from acknowledging them (some may have been delivered).
    pub async fn deliver(&self, events: &[Event]) -> Result<(), Undelivered> {
        let payloads: Vec<Vec<u8>> = events.iter().map(Event::encode).collect();
        for (event, payload) in events.iter().zip(&payloads) {
            if let Err(e) = self
                .settings
                .check_size(event.session.as_str().as_bytes(), payload)
            {
                return Err(Undelivered::TooLarge(format!(
                    "the {} event of session {}: {e}",
                    event.kind(),
                    event.session.as_str()
                )));
            }
        }
        self.send_all(events, &payloads).await
    }

    async fn send_all(&self, events: &[Event], payloads: &[Vec<u8>]) -> Result<(), Undelivered> {
        let producer = self.producer();
        let sent = self.send_through(&producer, events, payloads).await;
        match sent {
            Ok(()) => {
                self.times().failing_since = None;
                Ok(())
            }
            Err(Undelivered::Retry(what)) => {
                let why = match self.missing_topic(&producer, events).await {
                    Some(missing) => missing,
                    None => self.why(what),
                };
                Err(Undelivered::Retry(self.renew(&producer, why)))
            }
            other => other,
        }
    }

    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn producer(&self) -> Arc<Producer> {
        self.producer
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// After a failed delivery through `failed`, a new producer in its place when it cannot
    /// deliver again: librdkafka declared it failed for good (an idempotence error), or nothing
    /// was delivered for [`STUCK`] delivery timeouts, and it has been in use that long (brokers
    /// that lost their producer state in a restart answer its every batch `UNKNOWN_PRODUCER_ID`,
    /// which it retries for ever). During an outage a new one is made at most that often, and
    /// connects once the brokers are back. Made once however many requests saw it fail, so the
    /// clients' retries go through it. The answer to give: `why`, or what was done.
    fn renew(&self, failed: &Arc<Producer>, why: String) -> String {
        let fatal = failed.client().fatal_error();
        let stuck_for = self.timeout * STUCK;
        let mut times = self.times();
        // This request had been failing since it began, a delivery timeout ago.
        let began = Instant::now()
            .checked_sub(self.timeout)
            .unwrap_or_else(Instant::now);
        let failing_for = times.failing_since.get_or_insert(began).elapsed();
        let stuck = failing_for >= stuck_for && times.made.elapsed() >= stuck_for;
        if fatal.is_none() && !stuck {
            return why;
        }
        let mut current = self
            .producer
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cause = match &fatal {
            Some((code, reason)) => format!("it failed for good ({code:?}: {reason})"),
            None => format!("it delivered nothing for {} s", failing_for.as_secs()),
        };
        if Arc::ptr_eq(&current, failed) {
            match make_producer(&self.settings, &self.watch) {
                Ok(fresh) => {
                    *current = Arc::new(fresh);
                    times.made = Instant::now();
                    times.failing_since = None;
                    tracing::error!("replaced the Kafka producer with a new one: {cause}");
                }
                Err(e) => tracing::error!(
                    "the Kafka producer: {cause}, and a new one cannot be made: {e:#}"
                ),
            }
        }
        format!("{why}; the Kafka producer was replaced ({cause}): retry")
    }

    async fn send_through(
        &self,
        producer: &Producer,
        events: &[Event],
        payloads: &[Vec<u8>],
    ) -> Result<(), Undelivered> {
        let deadline = Instant::now() + self.timeout;
        let mut waiting = Vec::with_capacity(events.len());
        for (event, payload) in events.iter().zip(payloads) {
            let key = event.session.as_str().as_bytes();
            let topic = self.topic_for(event);
            loop {
                let record = FutureRecord::to(topic).key(key).payload(payload);
                match producer.send_result(record) {
                    Ok(future) => {
                        waiting.push(future);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                        if Instant::now() < deadline =>
                    {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    // `check_size` counts as librdkafka does; should it ever count less, the
                    // answer is still that the event is too large, not to retry.
                    Err((
                        KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
                        _,
                    )) => {
                        return Err(Undelivered::Refused(format!(
                            "the {} event of session {}: {} bytes with its key, more than librdkafka's message.max.bytes ({}) takes",
                            event.kind(),
                            event.session.as_str(),
                            key.len() + payload.len(),
                            self.settings.max_message_bytes()
                        )));
                    }
                    Err((e, _)) => {
                        let why = format!("Kafka refused an event ({e})");
                        return Err(Undelivered::Retry(why));
                    }
                }
            }
        }
        // Each event is delivered or failed by librdkafka within `message.timeout.ms` (the
        // delivery timeout); a second more lets the last reports come in.
        let all = async {
            for (future, event) in waiting.into_iter().zip(events) {
                match future.await {
                    Ok(Ok(_)) => {}
                    Ok(Err((
                        KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
                        m,
                    ))) => {
                        let refused = toolcalls_producer::Refused {
                            payload: m.payload().unwrap_or_default().to_vec(),
                            topic: m.topic().to_owned(),
                        };
                        return Err(Undelivered::Refused(format!(
                            "the {} event of session {}: {refused}",
                            event.kind(),
                            event.session.as_str()
                        )));
                    }
                    Ok(Err((e, _))) => {
                        let why = format!("an event was not delivered ({e})");
                        return Err(Undelivered::Retry(why));
                    }
                    Err(_) => return Err(Undelivered::Retry("the producer stopped".to_owned())),
                }
            }
            Ok(())
        };
        match tokio::time::timeout(self.timeout + Duration::from_secs(1), all).await {
            Ok(Ok(())) => {
                self.watch.reachable();
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Undelivered::Retry(format!(
                "the brokers did not acknowledge the events within {:?} (--delivery-timeout)",
                self.timeout
            ))),
        }
    }

    /// After a failed delivery of `events`, asks the brokers for the topics they go to (for a
    /// second): when they answer, the trouble the watch knew of is over, and a topic they do not
    /// have is the cause to name — a broker that came back empty, say — not the trouble they had
    /// before.
    async fn missing_topic(&self, producer: &Arc<Producer>, events: &[Event]) -> Option<String> {
        let mut topics: Vec<String> = Vec::new();
        for event in events {
            let topic = self.topic_for(event);
            if !topics.iter().any(|t| t == topic) {
                topics.push(topic.to_owned());
            }
        }
        let producer = producer.clone();
        let answers = tokio::task::spawn_blocking(move || {
            topics
                .into_iter()
                .map(|topic| {
                    let md = producer
                        .client()
                        .fetch_metadata(Some(&topic), Duration::from_secs(1))
                        .ok()?;
                    let there = md.topics().iter().any(|t| {
                        t.name() == topic && t.error().is_none() && !t.partitions().is_empty()
                    });
                    Some((topic, there))
                })
                .collect::<Vec<_>>()
        })
        .await
        .ok()?;
        let mut missing = None;
        for (topic, there) in answers.into_iter().flatten() {
            self.watch.reachable();
            if !there && missing.is_none() {
                missing = Some(format!(
                    "topic `{topic}` does not exist on the Kafka brokers at {} (or has no leader yet); create the processor's topics with `toolcalls topics create`",
                    self.brokers
                ));
            }
        }
        missing
    }

    /// `what`, with what the broker watch knows of the brokers' trouble.
    fn why(&self, what: String) -> String {
        match self.watch.trouble() {
            Some((trouble, reason, _)) => {
                format!("{what}; {} at {}: {reason}", trouble.what(), self.brokers)
            }
            None => what,
        }
    }

    /// Waits (blocking) for what is still in flight, for at most the delivery timeout.
    pub fn flush(&self) -> anyhow::Result<()> {
        toolcalls_producer::wait_delivered(&*self.producer(), self.timeout + Duration::from_secs(1))
            .map_err(|e| anyhow::anyhow!("events still in flight at shutdown ({e})"))
    }
}

/// The producer, configured as the `Publisher` is.
fn make_producer(settings: &PublishSettings, watch: &Arc<BrokerWatch>) -> anyhow::Result<Producer> {
    settings
        .client_config("toolcalls-receive")
        .create_with_context(Context {
            watch: watch.clone(),
        })
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot create the Kafka producer ({e}); check --brokers and the --kafka settings"
            )
        })
}
