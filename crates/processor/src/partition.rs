//! The partition task: the only owner of one input partition's [`Correlator`].
//!
//! It receives batches of messages of both input topics' partition `p` from the consumer thread,
//! decodes and validates them (dead-lettering what fails), applies them to the correlator and hands
//! the records to the producer. At a checkpoint it writes the changed state entries to changelog
//! partition `p` and reports the next offsets to commit. It goes on applying input while the
//! coordinator commits, but holds back what it produces until the coordinator has committed the
//! batch and begun the next transaction (or stops when the batch is abandoned) — so nothing it
//! produces lands in a transaction with the wrong offsets.

use crate::align::{Aligner, Next};
use crate::client::SharedProducer;
use crate::consumer::Inflight;
use crate::failpoint::Failpoints;
use crate::metrics::Metrics;
use crate::output::{self, dlq_headers, header_pairs, Out};
use prometheus::{Gauge, IntCounter, IntGauge};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedHeaders;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use toolcalls_core::{Correlator, Effects, Outcome, Position};
use toolcalls_model::{
    DecodeError, Event, EventKind, Phase, RecordId, SessionId, Strategy, ToolCallRecord,
};

/// One input message, borrowed from its [`InBatch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct InMsg<'a> {
    /// 0 = announce topic, 1 = completion topic.
    pub topic: u16,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    pub timestamp_ms: Option<i64>,
}

/// Where a message's key and payload lie in its batch's buffer.
#[derive(Debug, Clone, Copy)]
struct InMeta {
    topic: u16,
    offset: i64,
    timestamp_ms: Option<i64>,
    key: Option<(usize, usize)>,
    payload: Option<(usize, usize)>,
}

/// A burst of one partition's input messages, detached from librdkafka: the keys and payloads of
/// all of them are copied back to back into one buffer, so a message costs no allocation of its own.
#[derive(Debug)]
pub(crate) struct InBatch {
    partition: i32,
    data: Vec<u8>,
    msgs: Vec<InMeta>,
}

/// What a message counts for the in-flight byte limit beyond its key and payload.
const MSG_OVERHEAD: usize = 64;

/// Spent input batches, handed back from the partition tasks to the consumer thread for reuse:
/// memory fresh from the allocator costs page faults and the kernel's zeroing of every page (most
/// of the consumer thread's CPU before the pool).
#[derive(Debug, Default)]
pub(crate) struct BatchPool {
    free: Mutex<Vec<InBatch>>,
}

/// Bytes of keys and payloads one batch holds: the consumer thread starts a new batch rather than
/// grow one, so a buffer is allocated once at this size and never reallocated (growing a buffer
/// by doubling copies it and touches twice the memory; a burst of a fast partition is megabytes).
pub(crate) const BATCH_BYTES: usize = 256 * 1024;
/// Batches the pool keeps (8 MiB of buffers).
const POOL_KEEP: usize = 32;
/// Batches whose buffer grew beyond this (a single message larger than [`BATCH_BYTES`]) go back
/// to the allocator.
const POOL_MAX_BYTES: usize = 2 * BATCH_BYTES;

impl BatchPool {
    /// An empty batch for `partition`, reused if the pool has one.
    pub fn take(&self, partition: i32) -> InBatch {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match reused {
            Some(mut batch) => {
                batch.partition = partition;
                batch
            }
            None => InBatch::new(partition),
        }
    }

    /// Gives a spent batch back.
    pub fn give(&self, mut batch: InBatch) {
        if batch.data.capacity() > POOL_MAX_BYTES {
            return;
        }
        batch.data.clear();
        batch.msgs.clear();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_KEEP {
            free.push(batch);
        }
    }
}

impl InBatch {
    pub fn new(partition: i32) -> Self {
        InBatch {
            partition,
            data: Vec::with_capacity(BATCH_BYTES),
            msgs: Vec::with_capacity(BATCH_BYTES / 256),
        }
    }

    /// Whether `bytes` more fit without growing the buffer (an empty batch takes anything: a
    /// message larger than [`BATCH_BYTES`] gets a batch of its own).
    pub fn has_room(&self, bytes: usize) -> bool {
        self.msgs.is_empty() || self.data.len() + bytes <= self.data.capacity()
    }

    pub fn push(
        &mut self,
        topic: u16,
        offset: i64,
        timestamp_ms: Option<i64>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
    ) {
        let mut put = |bytes: Option<&[u8]>| {
            bytes.map(|b| {
                let start = self.data.len();
                self.data.extend_from_slice(b);
                (start, self.data.len())
            })
        };
        let key = put(key);
        let payload = put(payload);
        self.msgs.push(InMeta {
            topic,
            offset,
            timestamp_ms,
            key,
            payload,
        });
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Messages per input topic.
    pub fn topic_counts(&self) -> [usize; 2] {
        let completions = self.msgs.iter().filter(|m| m.topic == 1).count();
        [self.msgs.len() - completions, completions]
    }

    /// Bytes counted against `max_inflight_bytes`: keys, payloads and a fixed overhead per message.
    pub fn size(&self) -> usize {
        self.data.len() + MSG_OVERHEAD * self.msgs.len()
    }

    /// Bytes counted for message `i`.
    pub fn msg_size(&self, i: usize) -> usize {
        let m = &self.msgs[i];
        let len = |r: Option<(usize, usize)>| r.map_or(0, |(a, b)| b - a);
        len(m.key) + len(m.payload) + MSG_OVERHEAD
    }

    /// Message `i`'s topic and timestamp: what the two topics are merged by.
    pub fn order_key(&self, i: usize) -> (u16, Option<i64>) {
        let m = &self.msgs[i];
        (m.topic, m.timestamp_ms)
    }

    pub fn get(&self, i: usize) -> InMsg<'_> {
        let m = self.msgs[i];
        let slice = |r: Option<(usize, usize)>| r.map(|(a, b)| &self.data[a..b]);
        InMsg {
            topic: m.topic,
            partition: self.partition,
            offset: m.offset,
            key: slice(m.key),
            payload: slice(m.payload),
            timestamp_ms: m.timestamp_ms,
        }
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

/// A control message to a partition task (input batches come on a channel of their own).
pub(crate) enum PartitionMsg {
    /// Wall-clock punctuation: an idle partition moves its stream time on by the wall time that
    /// passed since its last event, so deadlines fire without new input.
    Tick,
    /// Flush state to the changelog and report. Until `resume` fires, what the task produces
    /// belongs to the next transaction and is held back; `resume` dropped = stop.
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
    /// How long a message waits for the partition's other input topic (see [`crate::align`]).
    pub align_wait: std::time::Duration,
    /// Bytes of output the tasks may hold back, together, while a checkpoint commits.
    pub max_held_bytes: usize,
    /// Bytes of output the tasks hold back now.
    pub held_bytes: Arc<AtomicUsize>,
    /// Input messages whose processing panicked, by partition and position, with the panic's
    /// message: after the rewind that follows, they are dead-lettered instead of applied again.
    pub poisoned: Mutex<HashMap<i32, Poison>>,
    pub metrics: Metrics,
    pub failpoints: Arc<Failpoints>,
    /// Where spent input batches go back to the consumer thread.
    pub batches: Arc<BatchPool>,
}

/// Dead-lettered payloads are cut to this size (an oversize message must not fail the batch).
const DLQ_PAYLOAD_LIMIT: usize = 64 * 1024;

/// Messages applied between two looks at the control channel, so that a checkpoint does not wait
/// for a whole burst of input.
const CHUNK: usize = 128;

/// Input positions (topic, offset) of one partition whose processing panicked, with the panic's
/// message.
pub(crate) type Poison = HashMap<(u16, i64), String>;

/// Processing a message panicked; the task must stop.
#[derive(Debug)]
struct Poisoned;

/// Output topics a task produces to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Records,
    Dlq,
}

/// An output produced while the previous batch commits: it belongs to the next transaction. Its
/// key and payload lie in [`HeldOutputs::data`].
struct Held {
    dest: Dest,
    key: Option<Span>,
    payload: Option<Span>,
    headers: Option<OwnedHeaders>,
}

/// Where held bytes sit: a chunk of [`HeldOutputs`] and a range in it.
#[derive(Clone, Copy)]
struct Span {
    chunk: usize,
    start: usize,
    end: usize,
}

/// Outputs held back by one task, in order, their keys and payloads back to back in chunks of
/// [`HELD_CHUNK`] bytes: a long commit may hold tens of megabytes, and chunks grow the store
/// without copying what it holds. As many chunks as the last commit used (at least
/// [`KEEP_HELD_CHUNKS`]) are kept for the next one.
/// Counted in the tasks' shared total until released or dropped (also when the task is aborted).
struct HeldOutputs {
    chunks: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    items: Vec<Held>,
    bytes: usize,
    total: Arc<AtomicUsize>,
}

/// Buffers reused from one output to the next are given up beyond this size.
const KEEP_BUFFER_BYTES: usize = 1 << 20;

/// The size of a chunk of held outputs; an output larger than a chunk gets a chunk of its own.
const HELD_CHUNK: usize = 256 << 10;

/// A new chunk is begun for the next record when less than this is left in the current one.
const HELD_CHUNK_SLACK: usize = 16 << 10;

/// Chunks kept for the next commit at least (4 MiB per task); more when the last commit used more.
const KEEP_HELD_CHUNKS: usize = 16;

/// What an output counts for the held-back bound beyond its key and payload.
const HELD_OVERHEAD: usize = 64;

impl HeldOutputs {
    fn new(total: Arc<AtomicUsize>) -> Self {
        HeldOutputs {
            chunks: Vec::new(),
            spare: Vec::new(),
            items: Vec::new(),
            bytes: 0,
            total,
        }
    }

    /// The chunk to write the next `want` bytes to (at least `want` left, unless that is more
    /// than a chunk: then a chunk of its own).
    fn chunk_for(&mut self, want: usize) -> usize {
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= want);
        if !fits {
            let mut chunk = self.spare.pop().unwrap_or_default();
            chunk.reserve_exact(want.max(HELD_CHUNK));
            self.chunks.push(chunk);
        }
        self.chunks.len() - 1
    }

    fn put(&mut self, bytes: Option<&[u8]>) -> Option<Span> {
        bytes.map(|b| {
            let chunk = self.chunk_for(b.len());
            let data = &mut self.chunks[chunk];
            let start = data.len();
            data.extend_from_slice(b);
            span(chunk, start, data.len())
        })
    }

    fn push(
        &mut self,
        dest: Dest,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Option<OwnedHeaders>,
    ) {
        let mut len = 0;
        let key = self.put(key);
        let payload = self.put(payload);
        for s in [key, payload].into_iter().flatten() {
            len += s.len();
        }
        self.items.push(Held {
            dest,
            key,
            payload,
            headers,
        });
        self.count(len);
    }

    /// A record, encoded straight into a chunk (with its key before it).
    fn push_record(&mut self, key: &[u8], record: &ToolCallRecord) {
        let chunk = self.chunk_for(key.len() + HELD_CHUNK_SLACK);
        let data = &mut self.chunks[chunk];
        let at = data.len();
        data.extend_from_slice(key);
        let start = data.len();
        record.encode_into(data);
        let (key, payload) = (span(chunk, at, start), span(chunk, start, data.len()));
        self.items.push(Held {
            dest: Dest::Records,
            key: Some(key),
            payload: Some(payload),
            headers: None,
        });
        self.count(key.len() + payload.len());
    }

    fn count(&mut self, len: usize) {
        let size = len + HELD_OVERHEAD;
        self.bytes += size;
        self.total.fetch_add(size, Ordering::AcqRel);
    }

    /// Takes the chunks and the outputs; give them back with [`HeldOutputs::reuse`].
    fn take(&mut self) -> (Vec<Vec<u8>>, Vec<Held>) {
        self.total.fetch_sub(self.bytes, Ordering::AcqRel);
        self.bytes = 0;
        (
            std::mem::take(&mut self.chunks),
            std::mem::take(&mut self.items),
        )
    }

    fn reuse(&mut self, mut chunks: Vec<Vec<u8>>, mut items: Vec<Held>) {
        // As many as this commit used: the next one likely holds as much, and fresh chunks cost
        // page faults (the kernel zeroes every new page).
        let keep = chunks.len().max(KEEP_HELD_CHUNKS);
        self.spare.truncate(keep);
        for mut chunk in chunks.drain(..) {
            if self.spare.len() < keep && chunk.capacity() <= HELD_CHUNK {
                chunk.clear();
                self.spare.push(chunk);
            }
        }
        if self.chunks.is_empty() {
            self.chunks = chunks;
        }
        if self.items.is_empty() {
            items.clear();
            self.items = items;
        }
    }
}

fn span(chunk: usize, start: usize, end: usize) -> Span {
    Span { chunk, start, end }
}

impl Span {
    fn len(&self) -> usize {
        self.end - self.start
    }
}

impl Drop for HeldOutputs {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

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
    /// Wall clock (ms since the epoch) read once per chunk of input.
    clock_ms: i64,
    /// The last checkpoint is being committed: outputs wait in `held` (in order) until it is.
    holding: bool,
    held: HeldOutputs,
    /// The buffer records are encoded into (reused).
    scratch: Vec<u8>,
    /// Positions whose processing panicked earlier (see [`TaskEnv::poisoned`]).
    poisoned: Poison,
    m: TaskMetrics,
}

/// Metric children resolved once per task (`with_label_values` hashes on every call).
struct TaskMetrics {
    received: [[IntCounter; 9]; 2],
    /// By `Outcome::label`, in the order of `OUTCOMES`.
    outcomes: [IntCounter; 8],
    /// By `Strategy::ALL`.
    matches: [IntCounter; 5],
    /// By `Phase::ALL`.
    records: [IntCounter; 9],
    pending_calls: IntGauge,
    pending_bytes: IntGauge,
    oldest_age: Gauge,
    lag_seconds: Gauge,
}

const OUTCOMES: [&str; 8] = [
    "pending",
    "matched",
    "merged",
    "duplicate",
    "late",
    "collapsed",
    "applied",
    "rejected",
];

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
            outcomes: OUTCOMES.map(|o| m.event_outcomes.with_label_values(&[o])),
            matches: Strategy::ALL.map(|s| m.matches.with_label_values(&[s.as_str()])),
            records: Phase::ALL.map(|p| m.records_emitted.with_label_values(&[p.as_str()])),
            pending_calls: m.pending_calls.with_label_values(&[&p]),
            pending_bytes: m.pending_bytes.with_label_values(&[&p]),
            oldest_age: m.oldest_pending_age.with_label_values(&[&p]),
            lag_seconds: m.consumer_lag_seconds.with_label_values(&[&p]),
        }
    }

    fn outcome(&self, outcome: &Outcome) -> Option<&IntCounter> {
        let label = outcome.label();
        OUTCOMES
            .iter()
            .position(|o| *o == label)
            .map(|i| &self.outcomes[i])
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
        let held = HeldOutputs::new(env.held_bytes.clone());
        let poisoned = env
            .poisoned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&partition)
            .cloned()
            .unwrap_or_default();
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
            clock_ms: now_ms(),
            holding: false,
            held,
            scratch: Vec::new(),
            poisoned,
            m,
        }
    }

    /// Runs until the control channel closes or a checkpoint is abandoned.
    ///
    /// Control messages (checkpoints, punctuation, queries) come on `rx` and are served before
    /// input batches (`data`), and between chunks of a batch: a checkpoint must not wait behind
    /// thousands of queued messages, or the commit interval stretches with the backlog. What a
    /// checkpoint reports is exactly what was applied before it, so the order between the two
    /// channels does not change the results.
    ///
    /// After a checkpoint the task goes on applying input while the coordinator commits; what it
    /// produces meanwhile is held back (at most `max_held_bytes`) and handed to the producer once
    /// `resume` says the next transaction has begun, so every output lands in the transaction of
    /// the offsets it derives from.
    pub async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<PartitionMsg>,
        mut data: mpsc::UnboundedReceiver<InBatch>,
    ) {
        self.refresh_gauges(true);
        let mut data_open = true;
        let mut resume: Option<oneshot::Receiver<()>> = None;
        // Input not yet applied, both topics, handed out in timestamp order.
        let mut input = Aligner::new(self.env.align_wait);
        loop {
            // Input waits while the outputs held back reach their bound (a task holds only while
            // a checkpoint commits, so this ends with the commit).
            let held_full = self.holding
                && self.env.held_bytes.load(Ordering::Acquire) >= self.env.max_held_bytes;
            let next = input.next(Instant::now(), self.caught_up());
            let ready = !held_full && matches!(next, Next::Apply(_));
            let wake = match next {
                Next::WaitUntil(t) if !held_full => Some(t),
                _ => None,
            };
            tokio::select! {
                biased;
                r = async {
                    match resume.as_mut() {
                        Some(r) => r.await,
                        None => std::future::pending().await,
                    }
                }, if resume.is_some() => {
                    resume = None;
                    if r.is_err() {
                        // The coordinator abandoned the batch: this state is ahead of what is
                        // committed, so it must not go on; a restore rebuilds it.
                        break;
                    }
                    self.release().await;
                }
                m = rx.recv() => {
                    let Some(msg) = m else { break };
                    match msg {
                        PartitionMsg::Checkpoint { reply, resume: next } => {
                            // The coordinator checkpoints one batch at a time; should a second
                            // checkpoint come before the first resumed, it waits for that.
                            if let Some(r) = resume.take() {
                                if r.await.is_err() {
                                    break;
                                }
                                self.release().await;
                            }
                            let report = self.checkpoint().await;
                            if reply.send(report).is_err() {
                                break;
                            }
                            self.holding = true;
                            resume = Some(next);
                        }
                        PartitionMsg::Tick => self.tick().await,
                        PartitionMsg::Query(q) => self.answer(q),
                    }
                }
                // Take in what arrived before applying: the other topic may hold older messages.
                m = data.recv(), if data_open => match m {
                    Some(batch) => {
                        self.env.failpoints.stop("after_consume");
                        input.push(batch, Instant::now());
                    }
                    None => data_open = false,
                },
                _ = std::future::ready(()), if ready => {
                    if self.apply_chunk(&mut input).await.is_err() {
                        // The correlator's state is suspect after a panic: stop; the
                        // coordinator aborts the batch and rebuilds the partition.
                        break;
                    }
                    let mut spent = false;
                    while let Some(batch) = input.take_spent() {
                        self.env.batches.give(batch);
                        spent = true;
                    }
                    if spent {
                        self.after_batch();
                    }
                    // Let the coordinator and the other tasks of this worker run between chunks.
                    tokio::task::yield_now().await;
                }
                _ = async {
                    match wake {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                }, if wake.is_some() => {}
            }
        }
        self.clear_gauges();
        tracing::debug!(partition = self.partition, "partition task stopped");
    }

    /// Writes the changed state to the changelog and reports what the batch holds.
    async fn checkpoint(&mut self) -> Checkpointed {
        self.write_changelog().await;
        let offsets =
            std::array::from_fn(|t| (self.next[t] != self.reported[t]).then_some(self.next[t]));
        self.reported = self.next;
        Checkpointed {
            partition: self.partition,
            offsets,
            produced: std::mem::take(&mut self.produced),
            outputs: std::mem::take(&mut self.outputs),
            error: self.error.take(),
        }
    }

    /// The next transaction has begun: hands what was held back to the producer, in order.
    async fn release(&mut self) {
        self.holding = false;
        let (chunks, mut items) = self.held.take();
        let env = self.env.clone();
        let slice = |r: Option<Span>| r.map(|s| &chunks[s.chunk][s.start..s.end]);
        for h in items.drain(..) {
            let out = Out {
                topic: match h.dest {
                    Dest::Records => &env.records_topic,
                    Dest::Dlq => &env.dlq_topic,
                },
                partition: None,
                key: slice(h.key),
                payload: slice(h.payload),
                headers: h.headers,
            };
            self.produce(out).await;
        }
        self.held.reuse(chunks, items);
    }

    async fn tick(&mut self) {
        // Stream time is the watermark of both input topics; one that has delivered nothing for
        // `input_idle` (while the other may flow) no longer holds it back.
        let quiet = self
            .topic_seen_at
            .map(|t| t.elapsed() >= self.env.input_idle);
        let mut target = None;
        if quiet[0] || quiet[1] {
            target = self.correlator.max_event_time();
        }
        // An idle partition moves on by the wall time that passed since its last event, so
        // deadlines fire without new input.
        if self.idle_since_tick {
            if let Some(base) = target.or(self.correlator.stream_time()) {
                let elapsed = u64::try_from(self.anchor.elapsed().as_millis()).unwrap_or(u64::MAX);
                target = Some(base.plus_millis(elapsed));
                self.anchor = Instant::now();
            }
        }
        if let Some(t) = target {
            self.clock_ms = now_ms();
            self.correlator.advance(t, &mut self.effects);
            self.publish_records().await;
        }
        self.idle_since_tick = true;
        self.refresh_gauges(true);
    }

    /// Applies up to [`CHUNK`] messages of `input`, in the order it hands them out; `Err` when one
    /// of them panicked.
    async fn apply_chunk(&mut self, input: &mut Aligner) -> Result<(), Poisoned> {
        let start = Instant::now();
        self.clock_ms = now_ms();
        let caught_up = self.caught_up();
        let mut applied = false;
        let (mut messages, mut bytes) = (0, 0);
        let mut per_topic = [0usize; 2];
        let mut result = Ok(());
        while messages < CHUNK {
            let Next::Apply(at) = input.next(start, caught_up) else {
                break;
            };
            let m = input.get(at);
            if let Some(seen) = self.topic_seen_at.get_mut(usize::from(m.topic)) {
                *seen = start;
            }
            bytes += input.size(at);
            messages += 1;
            per_topic[usize::from(m.topic.min(1))] += 1;
            let step = self.handle(m).await;
            input.pop(at);
            match step {
                Ok(a) => applied |= a,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if applied {
            self.anchor = Instant::now();
            self.idle_since_tick = false;
        }
        self.inflight.taken(messages, bytes, per_topic);
        self.env
            .metrics
            .batch_duration
            .observe(start.elapsed().as_secs_f64());
        result
    }

    /// Per input topic: the consumer saw everything delivered (see [`crate::align`]).
    fn caught_up(&self) -> [bool; 2] {
        [0, 1].map(|t| self.inflight.caught_up[t].load(Ordering::Acquire))
    }

    fn after_batch(&mut self) {
        if let Some(ts) = self.last_timestamp_ms {
            self.m
                .lag_seconds
                .set((self.clock_ms - ts).max(0) as f64 / 1000.0);
        }
        self.refresh_gauges(false);
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

    /// Handles one message; true when it was applied to the correlator, `Err` when decoding or
    /// applying it panicked.
    async fn handle(&mut self, m: InMsg<'_>) -> Result<bool, Poisoned> {
        let t = usize::from(m.topic.min(1));
        if m.offset < self.next[t] {
            tracing::trace!(
                partition = self.partition,
                topic = t,
                offset = m.offset,
                "skipping a message already processed"
            );
            return Ok(false);
        }
        self.next[t] = m.offset + 1;
        if let Some(ts) = m.timestamp_ms {
            self.last_timestamp_ms = Some(ts);
        }
        if !self.poisoned.is_empty() {
            if let Some(why) = self.poisoned.get(&(m.topic, m.offset)) {
                let detail = format!(
                    "processing this event panicked ({why}); it is dead-lettered so that the partition goes on — a bug in the processor, please report it with this event"
                );
                self.m.received[t][8].inc();
                self.dead_letter(&m, "panic", &detail).await;
                return Ok(false);
            }
        }
        let pos = Position::new(m.topic, m.offset);
        // A panic in decoding or correlating must not take the partition down for good: it is
        // caught here, the task stops (its correlator is not used again), and the rewind that
        // follows dead-letters this message instead of applying it again.
        let step = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let event = self.validate(&m)?;
            self.env.failpoints.panic("panic_in_apply");
            let kind = event.kind();
            let outcome = self.correlator.apply(event, pos, &mut self.effects);
            Ok::<_, (&'static str, String)>((kind, outcome))
        }));
        let (kind, outcome) = match step {
            Ok(Ok(done)) => done,
            Ok(Err((reason, detail))) => {
                self.m.received[t][8].inc();
                self.dead_letter(&m, reason, &detail).await;
                return Ok(false);
            }
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                let why: String = why.chars().take(512).collect();
                tracing::error!(
                    partition = self.partition,
                    topic = m.topic,
                    offset = m.offset,
                    panic = %why,
                    "processing a message panicked; the batch is rewound and the message will be dead-lettered"
                );
                self.env
                    .poisoned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(self.partition)
                    .or_default()
                    .insert((m.topic, m.offset), why);
                return Err(Poisoned);
            }
        };
        if let Some(i) = EventKind::ALL.iter().position(|k| *k == kind) {
            self.m.received[t][i].inc();
        }
        match self.m.outcome(&outcome) {
            Some(c) => c.inc(),
            None => self
                .env
                .metrics
                .event_outcomes
                .with_label_values(&[outcome.label()])
                .inc(),
        }
        match outcome {
            Outcome::Matched(strategy) => {
                if let Some(i) = Strategy::ALL.iter().position(|s| *s == strategy) {
                    self.m.matches[i].inc();
                }
            }
            Outcome::Duplicate => self.env.metrics.duplicates.inc(),
            Outcome::Rejected(reason) => {
                let detail = format!("the correlator refused the event: {reason}");
                self.dead_letter(&m, reason, &detail).await;
            }
            _ => {}
        }
        self.publish_records().await;
        Ok(true)
    }

    /// Decodes and checks one message; the error is a reason label and a description.
    fn validate(&self, m: &InMsg<'_>) -> Result<Event, (&'static str, String)> {
        let Some(payload) = m.payload else {
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
        let limit = self
            .clock_ms
            .saturating_add(i64::try_from(self.env.max_future_skew_ms).unwrap_or(i64::MAX));
        if event.time.millis() > limit {
            return Err((
                "far_future",
                format!(
                    "event time {} is more than {} ms ahead of the processor's clock; fix the producer's clock or its time field",
                    event.time, self.env.max_future_skew_ms
                ),
            ));
        }
        match m.key {
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

    async fn dead_letter(&mut self, m: &InMsg<'_>, reason: &'static str, detail: &str) {
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
        let payload = m.payload.map(|p| &p[..p.len().min(DLQ_PAYLOAD_LIMIT)]);
        let headers = header_pairs(&[
            (dlq_headers::REASON, reason.as_bytes()),
            (dlq_headers::ERROR, detail.as_bytes()),
            (dlq_headers::SOURCE_TOPIC, topic.as_bytes()),
            (dlq_headers::SOURCE_PARTITION, partition.as_bytes()),
            (dlq_headers::SOURCE_OFFSET, offset.as_bytes()),
            (dlq_headers::SOURCE_TIMESTAMP, timestamp.as_bytes()),
        ]);
        self.output(Dest::Dlq, m.key, payload, Some(headers)).await;
    }

    async fn publish_records(&mut self) {
        if self.effects.records.is_empty() {
            return;
        }
        let records = std::mem::take(&mut self.effects.records);
        let now = self.clock_ms;
        let env = self.env.clone();
        for record in &records {
            let metrics = &self.env.metrics;
            let phase = record.status.phase;
            if let Some(i) = Phase::ALL.iter().position(|p| *p == phase) {
                self.m.records[i].inc();
            }
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
            let mut key = uuid::Uuid::encode_buffer();
            let key = record.id().0.hyphenated().encode_lower(&mut key);
            if self.holding {
                self.held.push_record(key.as_bytes(), record);
            } else {
                // One buffer for every record: librdkafka copies the payload anyway.
                let mut payload = std::mem::take(&mut self.scratch);
                payload.clear();
                record.encode_into(&mut payload);
                let out = Out {
                    topic: &env.records_topic,
                    partition: None,
                    key: Some(key.as_bytes()),
                    payload: Some(&payload),
                    headers: None,
                };
                self.produce(out).await;
                // Keep the buffer unless an exceptional record made it large.
                if payload.capacity() <= KEEP_BUFFER_BYTES {
                    self.scratch = payload;
                }
            }
            self.outputs += 1;
        }
        // Give the vector back so the hot path does not allocate.
        self.effects.records = records;
        self.effects.clear();
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
        let env = self.env.clone();
        let out = Out {
            topic: match dest {
                Dest::Records => &env.records_topic,
                Dest::Dlq => &env.dlq_topic,
            },
            partition: None,
            key,
            payload,
            headers,
        };
        self.produce(out).await;
    }

    async fn write_changelog(&mut self) {
        let ops = self.correlator.take_changelog();
        let env = self.env.clone();
        for op in ops {
            let mut buf = [0u8; 32];
            let pos = output::write_pos(op.pos, &mut buf);
            let headers = header_pairs(&[(output::POS_HEADER, pos)]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ToolCallRecord {
        let text =
            include_str!("../../../schemas/examples/valid/record-collapsed-retry-revision-2.json");
        serde_json::from_str(text).expect("the example record decodes")
    }

    /// An output as the producer gets it: to the records topic?, key, payload.
    type Output = (bool, Option<Vec<u8>>, Option<Vec<u8>>);

    /// What `release` hands the producer: every held output, in order.
    fn drain(held: &mut HeldOutputs) -> Vec<Output> {
        let (chunks, items) = held.take();
        let slice = |r: Option<Span>| r.map(|s| chunks[s.chunk][s.start..s.end].to_vec());
        let out = items
            .iter()
            .map(|h| {
                (
                    matches!(h.dest, Dest::Records),
                    slice(h.key),
                    slice(h.payload),
                )
            })
            .collect();
        held.reuse(chunks, items);
        out
    }

    #[test]
    fn a_batch_takes_messages_until_its_buffer_is_full_and_never_grows() {
        let mut b = InBatch::new(0);
        let cap = b.data.capacity();
        assert!(cap >= BATCH_BYTES);
        let mut n = 0;
        while b.has_room(1000) {
            b.push(0, n, None, None, Some(&[b'x'; 1000]));
            n += 1;
        }
        assert_eq!(n as usize, cap / 1000);
        assert_eq!(
            b.data.capacity(),
            cap,
            "filled to the brim without a reallocation"
        );
        // An empty batch takes a message larger than a batch: it gets a batch of its own.
        let empty = InBatch::new(0);
        assert!(empty.has_room(BATCH_BYTES * 3));
    }

    #[test]
    fn spent_batches_come_back_empty_with_their_buffers() {
        let pool = BatchPool::default();
        let mut b = pool.take(3);
        for i in 0..1000 {
            b.push(0, i, Some(i), Some(b"k"), Some(&[b'x'; 500]));
        }
        let cap = b.data.capacity();
        pool.give(b);
        let b = pool.take(7);
        assert_eq!((b.partition, b.len(), b.size()), (7, 0, 0));
        assert_eq!(b.data.capacity(), cap, "the buffer is reused");
        // An outsized buffer goes back to the allocator; the pool keeps at most POOL_KEEP.
        let mut big = pool.take(1);
        big.push(1, 0, None, None, Some(&vec![0; POOL_MAX_BYTES + 1]));
        pool.give(big);
        assert!(pool.free.lock().unwrap().is_empty());
        for p in 0..(POOL_KEEP + 5) {
            pool.give(InBatch::new(p as i32));
        }
        assert_eq!(pool.free.lock().unwrap().len(), POOL_KEEP);
    }

    #[test]
    fn held_outputs_come_back_in_order_byte_for_byte_across_chunks() {
        let total = Arc::new(AtomicUsize::new(0));
        let mut held = HeldOutputs::new(total.clone());
        let rec = record();
        let mut encoded = Vec::new();
        rec.encode_into(&mut encoded);
        let mut want = Vec::new();
        // Enough records to fill several chunks, dead letters in between, one larger than a
        // chunk, and outputs without key or payload.
        for i in 0..3 {
            for n in 0..700 {
                let key = format!("key-{i}-{n}");
                held.push_record(key.as_bytes(), &rec);
                want.push((true, Some(key.into_bytes()), Some(encoded.clone())));
                if n % 97 == 0 {
                    let big = vec![b'x'; if n == 194 { HELD_CHUNK * 2 + 5 } else { n }];
                    held.push(Dest::Dlq, None, Some(&big), None);
                    want.push((false, None, Some(big)));
                    held.push(Dest::Dlq, Some(b"k"), None, None);
                    want.push((false, Some(b"k".to_vec()), None));
                }
            }
            assert!(held.chunks.len() > 2, "the outputs span chunks");
            assert!(
                total.load(Ordering::Acquire)
                    >= want
                        .iter()
                        .map(|w| w.2.as_ref().map_or(0, Vec::len))
                        .sum::<usize>()
            );
            let got = drain(&mut held);
            assert_eq!(got.len(), want.len());
            assert!(got == want, "round {i}: held outputs changed");
            assert_eq!(
                total.load(Ordering::Acquire),
                0,
                "released outputs are uncounted"
            );
            assert!(held.spare.len() <= KEEP_HELD_CHUNKS);
            assert!(held
                .spare
                .iter()
                .all(|c| c.is_empty() && c.capacity() <= HELD_CHUNK));
            want.clear();
        }
        held.push(Dest::Dlq, Some(b"k"), Some(b"v"), None);
        drop(held);
        assert_eq!(
            total.load(Ordering::Acquire),
            0,
            "dropped outputs are uncounted"
        );
    }
}
