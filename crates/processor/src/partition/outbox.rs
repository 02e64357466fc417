//! A partition task's outputs. Records and dead letters go to the producer — or, while the last
//! checkpoint commits, into the held-output store ([`super::held`]), to be released in order
//! once the next transaction has begun. Changelog entries are written at the checkpoint itself,
//! never held.

use super::env::TaskEnv;
use super::held::{Dest, HeldOutputs};
use crate::changelog;
use crate::input::batch::InMsg;
use crate::output::{record_key, DeadLetter, Out, Sink, Topics};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedHeaders;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use toolcalls_core::ChangelogOp;
use toolcalls_model::ToolCallRecord;

/// The record buffer is given up beyond this size (an exceptional record made it large).
const KEEP_BUFFER_BYTES: usize = 1 << 20;

pub(super) struct Outbox {
    partition: i32,
    env: Arc<TaskEnv>,
    sink: Sink,
    /// The last checkpoint is being committed: outputs wait in `held` (in order) until it is.
    holding: bool,
    held: HeldOutputs,
    /// The buffer records are encoded into, reused: librdkafka copies the payload anyway.
    scratch: Vec<u8>,
    /// Records and dead letters since the last checkpoint, held ones included.
    outputs: usize,
}

/// What an outbox sent since the last checkpoint.
pub(super) struct Sent {
    /// Messages handed to the producer.
    pub produced: usize,
    /// Of which records and dead letters (the rest is changelog); held ones count too.
    pub outputs: usize,
    /// The first message the producer refused.
    pub error: Option<KafkaError>,
}

impl Outbox {
    pub fn new(partition: i32, env: Arc<TaskEnv>) -> Self {
        Outbox {
            partition,
            sink: Sink::new(env.producer.clone(), partition, env.metrics.clone()),
            held: HeldOutputs::new(env.held_bytes.clone()),
            env,
            holding: false,
            scratch: Vec::new(),
            outputs: 0,
        }
    }

    /// Outputs are held back (a checkpoint commits), and together the tasks hold as much as they
    /// may: input waits until the commit is through.
    pub fn held_full(&self) -> bool {
        self.holding && self.env.held_bytes.load(Ordering::Acquire) >= self.env.max_held_bytes
    }

    /// From now on outputs belong to the next transaction: hold them until [`Outbox::release`].
    pub fn hold(&mut self) {
        self.holding = true;
    }

    /// Publishes a record.
    pub async fn record(&mut self, record: &ToolCallRecord) {
        self.outputs += 1;
        let mut key = uuid::Uuid::encode_buffer();
        let key = record_key(record, &mut key);
        if self.holding {
            self.held.push_record(key, record);
            return;
        }
        self.scratch.clear();
        record.encode_into(&mut self.scratch);
        let out = Out {
            topic: &self.env.topics.records,
            partition: None,
            key: Some(key),
            payload: Some(&self.scratch),
            headers: None,
        };
        self.sink.send(out).await;
        if self.scratch.capacity() > KEEP_BUFFER_BYTES {
            self.scratch = Vec::new();
        }
    }

    /// Sends input message `m` to the dead-letter topic.
    pub async fn dead_letter(&mut self, m: &InMsg<'_>, reason: &'static str, detail: &str) {
        let source = &self.env.topics.inputs[m.topic_index()];
        let letter = DeadLetter::new(m, source, reason, detail, &self.env.redaction);
        self.output(
            Dest::Dlq,
            letter.key,
            letter.payload.as_deref(),
            Some(letter.headers),
        )
        .await;
    }

    /// Produces a record or a dead letter, or holds it back while the last checkpoint commits.
    async fn output(
        &mut self,
        dest: Dest,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Option<OwnedHeaders>,
    ) {
        self.outputs += 1;
        if self.holding {
            self.held.push(dest, key, payload, headers);
            return;
        }
        let out = Out {
            topic: topic_of(&self.env.topics, dest),
            partition: None,
            key,
            payload,
            headers,
        };
        self.sink.send(out).await;
    }

    /// The next transaction has begun: hands what was held back to the producer, in order.
    pub async fn release(&mut self) {
        self.holding = false;
        let (pages, mut items) = self.held.take();
        for h in items.drain(..) {
            let out = Out {
                topic: topic_of(&self.env.topics, h.dest),
                partition: None,
                key: h.key.map(|s| s.of(&pages)),
                payload: h.payload.map(|s| s.of(&pages)),
                headers: h.headers,
            };
            self.sink.send(out).await;
        }
        self.held.reuse(pages, items);
    }

    /// Writes changed state entries to the partition's changelog partition.
    pub async fn changelog(&mut self, ops: Vec<ChangelogOp>) {
        let topic = &self.env.topics.changelog;
        changelog::write::write(&mut self.sink, topic, self.partition, ops).await;
    }

    /// What was sent since the last call.
    pub fn take_sent(&mut self) -> Sent {
        let (produced, error) = self.sink.take();
        Sent {
            produced,
            outputs: std::mem::take(&mut self.outputs),
            error,
        }
    }
}

fn topic_of(topics: &Topics, dest: Dest) -> &str {
    match dest {
        Dest::Records => &topics.records,
        Dest::Dlq => &topics.dlq,
    }
}
