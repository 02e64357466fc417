//! The output stage: records, dead letters and changelog entries, encoded and handed to
//! librdkafka.
//!
//! A partition task owns one `Sink`: it sends each message, counts what it sent, and keeps the
//! first error — a batch with a refused message is aborted at the checkpoint. Delivery results
//! come back on librdkafka's threads (`client::ProducerCtx`): a transaction fails on its
//! own, and at-least-once counts the failures.

use crate::client::SharedProducer;
use crate::input::batch::InMsg;
use crate::metrics::Metrics;
use crate::telemetry::output::ProduceRefused;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::BaseRecord;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use toolcalls_model::record::{Origin, TopicOffsets};
use toolcalls_model::redact::Redaction;
use toolcalls_model::ToolCallRecord;

/// Dead-letter headers.
pub mod dlq_headers {
    /// Bounded reason label (the same as the `reason` label of `toolcalls_dlq_messages_total`).
    pub const REASON: &str = "toolcalls.reason";
    /// Human-readable description of what is wrong and what to send instead.
    pub const ERROR: &str = "toolcalls.error";
    pub const SOURCE_TOPIC: &str = "toolcalls.source.topic";
    pub const SOURCE_PARTITION: &str = "toolcalls.source.partition";
    pub const SOURCE_OFFSET: &str = "toolcalls.source.offset";
    /// Kafka timestamp of the source message, milliseconds since the epoch.
    pub const SOURCE_TIMESTAMP: &str = "toolcalls.source.timestamp";
}

/// Dead-lettered payloads are cut to this size (an oversize message must not fail the batch).
const DLQ_PAYLOAD_LIMIT: usize = 64 * 1024;

/// The topics a partition task reads and writes.
pub(crate) struct Topics {
    /// Announce, completion (shared with every record's provenance).
    pub inputs: [Arc<str>; 2],
    pub records: String,
    pub dlq: String,
    pub changelog: String,
}

impl Topics {
    /// Names the inputs in a record's provenance as the core numbers them (0 = announce,
    /// 1 = completion) by their topics, at `partition`: the record as it is published.
    pub fn name_provenance(&self, partition: i32, record: &mut ToolCallRecord) {
        record.provenance.name(|input, offsets| {
            let topic = match self.inputs.get(usize::from(input)) {
                Some(t) => Arc::clone(t),
                None => format!("<input {input}>").into(),
            };
            Origin::Topic(TopicOffsets {
                topic,
                partition,
                offsets,
            })
        });
    }
}

/// One message to produce.
pub(crate) struct Out<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    pub headers: Option<OwnedHeaders>,
}

/// A partition task's way to the producer.
pub(crate) struct Sink {
    producer: SharedProducer,
    partition: i32,
    metrics: Metrics,
    /// Messages handed to the producer since the last [`Sink::take`].
    produced: usize,
    /// The first produce call refused since the last [`Sink::take`].
    error: Option<KafkaError>,
}

impl Sink {
    pub fn new(producer: SharedProducer, partition: i32, metrics: Metrics) -> Self {
        Sink {
            producer,
            partition,
            metrics,
            produced: 0,
            error: None,
        }
    }

    /// Hands `out` to the producer, unless a message of this batch was refused already: the
    /// batch is doomed, and nothing more is piled onto it.
    pub async fn send(&mut self, out: Out<'_>) {
        if self.error.is_some() {
            return;
        }
        match send(&self.producer, out).await {
            Ok(()) => self.produced += 1,
            Err(error) => {
                ProduceRefused {
                    partition: self.partition,
                    error: &error,
                }
                .emit(&self.metrics);
                self.error = Some(error);
            }
        }
    }

    /// What was sent since the last call, and the first refusal.
    pub fn take(&mut self) -> (usize, Option<KafkaError>) {
        (std::mem::take(&mut self.produced), self.error.take())
    }
}

/// Hands a message to librdkafka, waiting while its queue is full.
async fn send(producer: &SharedProducer, out: Out<'_>) -> Result<(), KafkaError> {
    let mut headers = out.headers;
    loop {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(out.topic);
        if let Some(p) = out.partition {
            record = record.partition(p);
        }
        if let Some(k) = out.key {
            record = record.key(k);
        }
        if let Some(v) = out.payload {
            record = record.payload(v);
        }
        if let Some(h) = headers.take() {
            record = record.headers(h);
        }
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), record)) => {
                headers = record.headers;
                // librdkafka's queue drains on its own threads; give it a moment.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

pub(crate) fn header_pairs(pairs: &[(&str, &[u8])]) -> OwnedHeaders {
    let mut h = OwnedHeaders::new_with_capacity(pairs.len());
    for (key, value) in pairs {
        h = h.insert(Header {
            key,
            value: Some(*value),
        });
    }
    h
}

/// A record's key: its id, hyphenated, written into `buf` (from `uuid::Uuid::encode_buffer`; no
/// allocation per record).
pub(crate) fn record_key<'b>(record: &ToolCallRecord, buf: &'b mut [u8]) -> &'b [u8] {
    record.id().0.hyphenated().encode_lower(buf).as_bytes()
}

/// An input message as it goes to the dead-letter topic: its key, its payload (redacted, then
/// cut to [`DLQ_PAYLOAD_LIMIT`]), and headers that say why and where it came from.
pub(crate) struct DeadLetter<'a> {
    pub key: Option<&'a [u8]>,
    pub payload: Option<Cow<'a, [u8]>>,
    pub headers: OwnedHeaders,
}

impl<'a> DeadLetter<'a> {
    /// `m`, read from `source_topic`, refused for `reason` (a bounded label) as `detail` says;
    /// the payload and the detail (which may quote it) redacted by `redaction`.
    pub fn new(
        m: &InMsg<'a>,
        source_topic: &str,
        reason: &'static str,
        detail: &str,
        redaction: &Redaction,
    ) -> Self {
        let partition = m.partition.to_string();
        let offset = m.offset.to_string();
        let timestamp = m.timestamp_ms.map(|t| t.to_string()).unwrap_or_default();
        let detail: String = redaction.in_text(detail).chars().take(1024).collect();
        let headers = header_pairs(&[
            (dlq_headers::REASON, reason.as_bytes()),
            (dlq_headers::ERROR, detail.as_bytes()),
            (dlq_headers::SOURCE_TOPIC, source_topic.as_bytes()),
            (dlq_headers::SOURCE_PARTITION, partition.as_bytes()),
            (dlq_headers::SOURCE_OFFSET, offset.as_bytes()),
            (dlq_headers::SOURCE_TIMESTAMP, timestamp.as_bytes()),
        ]);
        DeadLetter {
            key: m.key,
            payload: m.payload.map(|p| {
                let mut payload = redaction
                    .dead_letter(p)
                    .map_or(Cow::Borrowed(p), Cow::Owned);
                if payload.len() > DLQ_PAYLOAD_LIMIT {
                    match &mut payload {
                        Cow::Borrowed(p) => *p = &p[..DLQ_PAYLOAD_LIMIT],
                        Cow::Owned(p) => p.truncate(DLQ_PAYLOAD_LIMIT),
                    }
                }
                payload
            }),
            headers,
        }
    }
}
