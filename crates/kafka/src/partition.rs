//! The partition task: the only owner of one input partition's [`Correlator`].
//!
//! It receives batches of messages of both input topics' partition `p` from the consumer thread,
//! decodes and validates them (dead-lettering what fails), applies them to the correlator and hands
//! the records to the producer. At a checkpoint it writes the changed state entries to changelog
//! partition `p`, reports the next offsets to commit, and waits until the coordinator has committed
//! (or abandoned) the batch — so nothing it produces lands in a transaction with the wrong offsets.

use crate::client::SharedProducer;
use crate::consumer::Inflight;
use crate::failpoint::Failpoints;
use crate::metrics::Metrics;
use crate::output::{self, dlq_headers, header_pairs, Out};
use prometheus::{Gauge, IntCounter, IntGauge};
use rdkafka::error::KafkaError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use toolcalls_core::{Correlator, Effects, Outcome, Position};
use toolcalls_model::{DecodeError, Event, EventKind, Phase, RecordId, SessionId, ToolCallRecord};

/// One input message, detached from librdkafka.
#[derive(Debug, Clone)]
pub(crate) struct InMsg {
    /// 0 = announce topic, 1 = completion topic.
    pub topic: u16,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub timestamp_ms: Option<i64>,
}

impl InMsg {
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len) + self.payload.as_ref().map_or(0, Vec::len) + 64
    }
}

/// A read of a partition's pending state for the query API.
pub(crate) enum Query {
    Get(RecordId, oneshot::Sender<Option<ToolCallRecord>>),
    Session(SessionId, oneshot::Sender<Vec<ToolCallRecord>>),
}

/// What a partition task reports at a checkpoint.
#[derive(Debug)]
pub(crate) struct Checkpointed {
    pub partition: i32,
    /// Next offsets to commit per input topic, when they moved since the last checkpoint.
    pub offsets: [Option<i64>; 2],
    /// Messages handed to the producer since the last checkpoint.
    pub produced: usize,
    /// Of which records and dead letters (the rest is changelog).
    pub outputs: usize,
    /// A produce call refused a message: the batch must be aborted.
    pub error: Option<KafkaError>,
}

pub(crate) enum PartitionMsg {
    Batch(Vec<InMsg>),
    /// Wall-clock punctuation: an idle partition moves its stream time on by the wall time that
    /// passed since its last event, so deadlines fire without new input.
    Tick,
    /// Flush state to the changelog, report, then wait for `resume` (dropped = stop).
    Checkpoint {
        reply: oneshot::Sender<Checkpointed>,
        resume: oneshot::Receiver<()>,
    },
    Query(Query),
}

/// What every partition task shares.
pub(crate) struct TaskEnv {
    pub producer: SharedProducer,
    pub input_topics: [String; 2],
    pub records_topic: String,
    pub dlq_topic: String,
    pub changelog_topic: String,
    pub max_message_bytes: usize,
    pub max_future_skew_ms: u64,
    /// An input topic quiet this long no longer holds stream time back.
    pub input_idle: std::time::Duration,
    pub metrics: Metrics,
    pub failpoints: Arc<Failpoints>,
}

/// Dead-lettered payloads are cut to this size (an oversize message must not fail the batch).
const DLQ_PAYLOAD_LIMIT: usize = 64 * 1024;

pub(crate) struct PartitionTask {
    partition: i32,
    correlator: Correlator,
    /// Next offset expected per input topic.
    next: [i64; 2],
    /// `next` as of the last checkpoint.
    reported: [i64; 2],
    env: Arc<TaskEnv>,
    inflight: Arc<Inflight>,
    effects: Effects,
    produced: usize,
    outputs: usize,
    error: Option<KafkaError>,
    last_timestamp_ms: Option<i64>,
    /// Wall time of the last event or punctuation that moved stream time.
    anchor: Instant,
    /// No event arrived since the last punctuation.
    idle_since_tick: bool,
    /// Wall time each input topic last delivered a message (or the task started).
    topic_seen_at: [Instant; 2],
    m: TaskMetrics,
}

/// Metric children resolved once per task (`with_label_values` hashes on every call).
struct TaskMetrics {
    received: [[IntCounter; 9]; 2],
    pending_calls: IntGauge,
    pending_bytes: IntGauge,
    oldest_age: Gauge,
    lag_seconds: Gauge,
}

impl TaskMetrics {
    fn new(m: &Metrics, topics: &[String; 2], partition: i32) -> Self {
        let p = partition.to_string();
        let kinds = |topic: &str| -> [IntCounter; 9] {
            std::array::from_fn(|i| {
                let kind = EventKind::ALL.get(i).map_or("invalid", |k| k.as_str());
                m.events_received.with_label_values(&[topic, kind])
            })
        };
        TaskMetrics {
            received: [kinds(&topics[0]), kinds(&topics[1])],
            pending_calls: m.pending_calls.with_label_values(&[&p]),
            pending_bytes: m.pending_bytes.with_label_values(&[&p]),
            oldest_age: m.oldest_pending_age.with_label_values(&[&p]),
            lag_seconds: m.consumer_lag_seconds.with_label_values(&[&p]),
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl PartitionTask {
    pub fn new(
        partition: i32,
        correlator: Correlator,
        next: [i64; 2],
        env: Arc<TaskEnv>,
        inflight: Arc<Inflight>,
    ) -> Self {
        let m = TaskMetrics::new(&env.metrics, &env.input_topics, partition);
        PartitionTask {
            partition,
            correlator,
            next,
            reported: next,
            env,
            inflight,
            effects: Effects::default(),
            produced: 0,
            outputs: 0,
            error: None,
            last_timestamp_ms: None,
            anchor: Instant::now(),
            idle_since_tick: false,
            topic_seen_at: [Instant::now(); 2],
            m,
        }
    }

    /// Runs until the control channel closes or a checkpoint is abandoned.
    ///
    /// Control messages (checkpoints, punctuation, queries) come on `rx` and are served before
    /// input batches (`data`): a checkpoint must not wait behind thousands of queued messages, or
    /// the commit interval stretches with the backlog. What a checkpoint reports is exactly what
    /// was applied before it, so the order between the two channels does not change the results.
    pub async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<PartitionMsg>,
        mut data: mpsc::UnboundedReceiver<PartitionMsg>,
    ) {
        self.refresh_gauges(true);
        let mut data_open = true;
        loop {
            let msg = tokio::select! {
                biased;
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break,
                },
                m = data.recv(), if data_open => match m {
                    Some(m) => m,
                    None => {
                        data_open = false;
                        continue;
                    }
                },
            };
            match msg {
                PartitionMsg::Batch(batch) => {
                    self.env.failpoints.stop("after_consume");
                    let start = Instant::now();
                    for m in batch {
                        if let Some(seen) = self.topic_seen_at.get_mut(usize::from(m.topic)) {
                            *seen = start;
                        }
                        self.handle(m).await;
                    }
                    self.env
                        .metrics
                        .batch_duration
                        .observe(start.elapsed().as_secs_f64());
                    if let Some(ts) = self.last_timestamp_ms {
                        self.m
                            .lag_seconds
                            .set((now_ms() - ts).max(0) as f64 / 1000.0);
                    }
                    self.refresh_gauges(false);
                }
                PartitionMsg::Tick => {
                    // Stream time is the watermark of both input topics; one that has delivered
                    // nothing for `input_idle` (while the other may flow) no longer holds it back.
                    let quiet = self
                        .topic_seen_at
                        .map(|t| t.elapsed() >= self.env.input_idle);
                    let mut target = None;
                    if quiet[0] || quiet[1] {
                        target = self.correlator.max_event_time();
                    }
                    // An idle partition moves on by the wall time that passed since its last
                    // event, so deadlines fire without new input.
                    if self.idle_since_tick {
                        if let Some(base) = target.or(self.correlator.stream_time()) {
                            let elapsed = u64::try_from(self.anchor.elapsed().as_millis())
                                .unwrap_or(u64::MAX);
                            target = Some(base.plus_millis(elapsed));
                            self.anchor = Instant::now();
                        }
                    }
                    if let Some(t) = target {
                        self.correlator.advance(t, &mut self.effects);
                        self.publish_records().await;
                    }
                    self.idle_since_tick = true;
                    self.refresh_gauges(true);
                }
                PartitionMsg::Checkpoint { reply, resume } => {
                    self.write_changelog().await;
                    let offsets = std::array::from_fn(|t| {
                        (self.next[t] != self.reported[t]).then_some(self.next[t])
                    });
                    let report = Checkpointed {
                        partition: self.partition,
                        offsets,
                        produced: std::mem::take(&mut self.produced),
                        outputs: std::mem::take(&mut self.outputs),
                        error: self.error.take(),
                    };
                    if reply.send(report).is_err() || resume.await.is_err() {
                        // The coordinator abandoned the batch: this state is ahead of what is
                        // committed, so it must not go on; a restore rebuilds it.
                        break;
                    }
                    self.reported = self.next;
                }
                PartitionMsg::Query(q) => self.answer(q),
            }
        }
        self.clear_gauges();
        tracing::debug!(partition = self.partition, "partition task stopped");
    }

    fn answer(&self, q: Query) {
        match q {
            Query::Get(id, tx) => {
                let _ = tx.send(self.correlator.get(&id));
            }
            Query::Session(session, tx) => {
                let _ = tx.send(self.correlator.pending_in_session(&session));
            }
        }
    }

    async fn handle(&mut self, m: InMsg) {
        let t = usize::from(m.topic.min(1));
        self.inflight.messages.fetch_sub(1, Ordering::AcqRel);
        self.inflight.bytes.fetch_sub(m.size(), Ordering::AcqRel);
        if m.offset < self.next[t] {
            tracing::trace!(
                partition = self.partition,
                topic = t,
                offset = m.offset,
                "skipping a message already processed"
            );
            return;
        }
        self.next[t] = m.offset + 1;
        if let Some(ts) = m.timestamp_ms {
            self.last_timestamp_ms = Some(ts);
        }
        let pos = Position::new(m.topic, m.offset);
        let event = match self.validate(&m) {
            Ok(event) => event,
            Err((reason, detail)) => {
                self.m.received[t][8].inc();
                self.dead_letter(&m, reason, &detail).await;
                return;
            }
        };
        let kind = event.kind();
        if let Some(i) = EventKind::ALL.iter().position(|k| *k == kind) {
            self.m.received[t][i].inc();
        }
        let outcome = self.correlator.apply(event, pos, &mut self.effects);
        self.anchor = Instant::now();
        self.idle_since_tick = false;
        let metrics = &self.env.metrics;
        metrics
            .event_outcomes
            .with_label_values(&[outcome.label()])
            .inc();
        match outcome {
            Outcome::Matched(strategy) => metrics
                .matches
                .with_label_values(&[strategy.as_str()])
                .inc(),
            Outcome::Duplicate => metrics.duplicates.inc(),
            Outcome::Rejected(reason) => {
                let detail = format!("the correlator refused the event: {reason}");
                self.dead_letter(&m, reason, &detail).await;
            }
            _ => {}
        }
        self.publish_records().await;
    }

    /// Decodes and checks one message; the error is a reason label and a description.
    fn validate(&self, m: &InMsg) -> Result<Event, (&'static str, String)> {
        let Some(payload) = m.payload.as_deref() else {
            let e = DecodeError::Empty;
            return Err((e.reason(), e.to_string()));
        };
        if payload.len() > self.env.max_message_bytes {
            let e = DecodeError::TooLarge {
                size: payload.len(),
                limit: self.env.max_message_bytes,
            };
            return Err((e.reason(), e.to_string()));
        }
        let event = Event::decode(payload).map_err(|e| (e.reason(), e.to_string()))?;
        let limit =
            now_ms().saturating_add(i64::try_from(self.env.max_future_skew_ms).unwrap_or(i64::MAX));
        if event.time.millis() > limit {
            return Err((
                "far_future",
                format!(
                    "event time {} is more than {} ms ahead of the processor's clock; fix the producer's clock or its time field",
                    event.time, self.env.max_future_skew_ms
                ),
            ));
        }
        match m.key.as_deref() {
            Some(key) if key == event.session.as_str().as_bytes() => {}
            Some(key) => {
                return Err((
                    "key_mismatch",
                    format!(
                        "message key `{}` is not the event's session `{}`; key every message by its session so a session stays in one partition",
                        String::from_utf8_lossy(&key[..key.len().min(64)]),
                        event.session.as_str().chars().take(64).collect::<String>()
                    ),
                ))
            }
            None => {
                return Err((
                    "key_mismatch",
                    "message has no key; key every message by its session so a session stays in one partition".into(),
                ))
            }
        }
        Ok(event)
    }

    async fn dead_letter(&mut self, m: &InMsg, reason: &'static str, detail: &str) {
        self.env
            .metrics
            .dead_letters
            .with_label_values(&[reason])
            .inc();
        tracing::debug!(
            partition = self.partition,
            topic = m.topic,
            offset = m.offset,
            reason,
            "message dead-lettered"
        );
        let topic = &self.env.input_topics[usize::from(m.topic.min(1))];
        let partition = m.partition.to_string();
        let offset = m.offset.to_string();
        let timestamp = m.timestamp_ms.map(|t| t.to_string()).unwrap_or_default();
        let detail: String = detail.chars().take(1024).collect();
        let payload = m
            .payload
            .as_deref()
            .map(|p| &p[..p.len().min(DLQ_PAYLOAD_LIMIT)]);
        let headers = header_pairs(&[
            (dlq_headers::REASON, reason.as_bytes()),
            (dlq_headers::ERROR, detail.as_bytes()),
            (dlq_headers::SOURCE_TOPIC, topic.as_bytes()),
            (dlq_headers::SOURCE_PARTITION, partition.as_bytes()),
            (dlq_headers::SOURCE_OFFSET, offset.as_bytes()),
            (dlq_headers::SOURCE_TIMESTAMP, timestamp.as_bytes()),
        ]);
        let env = self.env.clone();
        let out = Out {
            topic: &env.dlq_topic,
            partition: None,
            key: m.key.as_deref(),
            payload,
            headers: Some(headers),
        };
        self.produce(out).await;
        self.outputs += 1;
    }

    async fn publish_records(&mut self) {
        if self.effects.records.is_empty() {
            return;
        }
        let records = std::mem::take(&mut self.effects.records);
        let now = now_ms();
        let env = self.env.clone();
        for record in &records {
            let metrics = &self.env.metrics;
            let phase = record.status.phase;
            metrics
                .records_emitted
                .with_label_values(&[phase.as_str()])
                .inc();
            if phase == Phase::Evicted {
                metrics.evictions.inc();
            }
            if let Some(done) = record.status.completed_at {
                metrics
                    .call_duration
                    .observe(done.millis_since(record.created_at) as f64 / 1000.0);
            }
            metrics
                .end_to_end_latency
                .observe((now - record.updated_at.millis()).max(0) as f64 / 1000.0);
            let key = record.id().to_string();
            let payload = record.encode();
            let out = Out {
                topic: &env.records_topic,
                partition: None,
                key: Some(key.as_bytes()),
                payload: Some(&payload),
                headers: None,
            };
            self.produce(out).await;
            self.outputs += 1;
        }
        // Give the vector back so the hot path does not allocate.
        self.effects.records = records;
        self.effects.clear();
    }

    async fn write_changelog(&mut self) {
        let ops = self.correlator.take_changelog();
        let env = self.env.clone();
        for op in ops {
            let pos = output::encode_pos(op.pos);
            let headers = header_pairs(&[(output::POS_HEADER, pos.as_bytes())]);
            let out = Out {
                topic: &env.changelog_topic,
                partition: Some(self.partition),
                key: Some(op.key.as_bytes()),
                payload: op.value.as_deref(),
                headers: Some(headers),
            };
            self.produce(out).await;
        }
    }

    async fn produce(&mut self, out: Out<'_>) {
        if self.error.is_some() {
            // The batch is already doomed; do not pile more onto it.
            return;
        }
        match output::send(&self.env.producer, out).await {
            Ok(()) => self.produced += 1,
            Err(e) => {
                tracing::warn!(partition = self.partition, error = %e, "produce refused, the batch will be aborted");
                self.env.metrics.produce_errors.inc();
                self.error = Some(e);
            }
        }
    }

    fn refresh_gauges(&mut self, full: bool) {
        self.m
            .pending_calls
            .set(self.correlator.pending_len() as i64);
        self.m
            .pending_bytes
            .set(self.correlator.pending_bytes() as i64);
        if full {
            let age = match (
                self.correlator.stream_time(),
                self.correlator.oldest_pending(),
            ) {
                (Some(now), Some(oldest)) => now.millis_since(oldest) as f64 / 1000.0,
                _ => 0.0,
            };
            self.m.oldest_age.set(age);
        }
    }

    fn clear_gauges(&self) {
        let p = self.partition.to_string();
        let m = &self.env.metrics;
        let _ = m.pending_calls.remove_label_values(&[&p]);
        let _ = m.pending_bytes.remove_label_values(&[&p]);
        let _ = m.oldest_pending_age.remove_label_values(&[&p]);
        let _ = m.consumer_lag_seconds.remove_label_values(&[&p]);
    }
}
