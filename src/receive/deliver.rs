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
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientContext;
use std::sync::Arc;
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

pub struct Deliverer {
    producer: FutureProducer<Context>,
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
        let producer = settings
            .client_config("toolcalls-receive")
            .create_with_context(Context {
                watch: watch.clone(),
            })
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the Kafka producer ({e}); check --brokers and the --kafka settings"
                )
            })?;
        Ok(Deliverer {
            producer,
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
        let deadline = Instant::now() + self.timeout;
        let mut waiting = Vec::with_capacity(events.len());
        for (event, payload) in events.iter().zip(payloads) {
            let key = event.session.as_str().as_bytes();
            let topic = self.topic_for(event);
            loop {
                let record = FutureRecord::to(topic).key(key).payload(payload);
                match self.producer.send_result(record) {
                    Ok(future) => {
                        waiting.push(future);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                        if Instant::now() < deadline =>
                    {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => {
                        let why = self.why(format!("Kafka refused an event ({e})"));
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
                        return Err(Undelivered::Retry(self.why(why)));
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
            Err(_) => Err(Undelivered::Retry(self.why(format!(
                "the brokers did not acknowledge the events within {:?} (--delivery-timeout)",
                self.timeout
            )))),
        }
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
        toolcalls_producer::wait_delivered(&self.producer, self.timeout + Duration::from_secs(1))
            .map_err(|e| anyhow::anyhow!("events still in flight at shutdown ({e})"))
    }
}
