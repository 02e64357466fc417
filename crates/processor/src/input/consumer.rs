//! The consumer thread: one OS thread owns the polling of the group consumer and hands each
//! partition's messages, in [`InBatch`]es, to the partition's task.
//!
//! Rebalance callbacks run on this thread inside `poll` ([`super::group`]). A newly assigned
//! partition stays paused until the coordinator has restored its state and sends
//! [`ConsumerCmd::Activate`], which seeks to the committed offsets, routes messages to the
//! partition task and resumes fetching — all on this thread, so no stale message slips through.
//!
//! Back-pressure: once restored, a partition's two topics are read from partition queues of their
//! own. A partition whose task has more than `max_inflight_messages` waiting (or every partition,
//! while the input bytes waiting exceed `max_inflight_bytes`) is not read until the task works
//! its input down — except a topic the task has nothing buffered of, which is read a burst at a
//! time so the task's timestamp alignment can go on. librdkafka stops fetching a partition whose
//! prefetch queue is full (`queued.max.messages.kbytes`), so nothing is paused and nothing
//! fetched is thrown away.

use super::batch::{BatchPool, InBatch};
use super::flow::{Inflight, PartitionSink};
use super::group::{ConsumerCtx, GroupConsumer, GroupEvent, Routes};
use crate::telemetry::input::{InputThrottled, PartitionResumed};
use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;
use toolcalls_producer::Trouble;

/// What the coordinator tells the consumer thread.
pub(crate) enum ConsumerCmd {
    /// Seek both topics' partition to these offsets, route its messages to `sink`, resume it.
    Activate {
        partition: i32,
        offsets: [Offset; 2],
        sink: PartitionSink,
    },
    /// Stop routing a partition and pause it (before a rewind).
    Deactivate { partition: i32 },
    /// Leave the group and end the thread.
    Shutdown,
}

/// Tunables of the consumer loop.
pub(crate) struct LoopConfig {
    pub max_inflight_messages: usize,
    pub max_inflight_bytes: usize,
    pub seek_timeout: Duration,
    pub close_timeout: Duration,
    /// Spent batches handed back by the partition tasks.
    pub batches: Arc<BatchPool>,
}

/// Messages read from one queue in a row before the thread moves on.
const BURST: usize = 1024;
/// The longest the thread idles without looking at its commands and queues (a command or a queue
/// becoming non-empty wakes it at once).
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// A partition's two input queues (announce, completion), read apart from the group queue.
type Queues = [PartitionQueue<ConsumerCtx>; 2];

/// Runs the consumer until [`ConsumerCmd::Shutdown`] (or the command channel closes), then leaves
/// the group (the revoke callback commits through the coordinator) and reports [`GroupEvent::Closed`].
///
/// An active partition's two topics are read from queues of their own (librdkafka's partition
/// queues), so back-pressure needs no pause: a partition whose task has too much waiting is
/// simply not read, and librdkafka stops fetching it once its prefetch queue is full. Pausing
/// would throw the prefetched messages away and fetch them again on resume. Even then a topic the
/// task has nothing buffered of is read, a burst at a time, so that the task's timestamp alignment
/// ([`super::align`]) always gets the other topic's head.
pub(crate) fn run_consumer_loop(
    consumer: Arc<GroupConsumer>,
    commands: std_mpsc::Receiver<ConsumerCmd>,
    cfg: LoopConfig,
) {
    let ctx = consumer.context().clone();
    let mut buffers: HashMap<i32, InBatch> = HashMap::new();
    let mut queues: HashMap<i32, Queues> = HashMap::new();
    // Activations whose seek failed, tried again after `SEEK_RETRY` (see `activate`).
    let mut unsought: Vec<Unsought> = Vec::new();
    let mut retry_at = std::time::Instant::now();
    'outer: loop {
        let mut busy = false;
        if !unsought.is_empty() && std::time::Instant::now() >= retry_at {
            busy = true;
            for u in std::mem::take(&mut unsought) {
                activate_or_retry(&consumer, &ctx, &cfg, u, &mut queues, &mut unsought);
            }
            retry_at = std::time::Instant::now() + SEEK_RETRY;
        }
        loop {
            match commands.try_recv() {
                Ok(ConsumerCmd::Activate {
                    partition,
                    offsets,
                    sink,
                }) => {
                    busy = true;
                    let u = Unsought {
                        partition,
                        offsets,
                        sink,
                    };
                    activate_or_retry(&consumer, &ctx, &cfg, u, &mut queues, &mut unsought);
                    retry_at = std::time::Instant::now() + SEEK_RETRY;
                }
                Ok(ConsumerCmd::Deactivate { partition }) => {
                    busy = true;
                    unsought.retain(|u| u.partition != partition);
                    ctx.routes().active.remove(&partition);
                    queues.remove(&partition);
                    if let Err(e) = consumer.pause(&ctx.both(&[partition])) {
                        tracing::warn!(partition, error = %e, "pausing a partition for a rewind failed");
                    }
                }
                Ok(ConsumerCmd::Shutdown) | Err(std_mpsc::TryRecvError::Disconnected) => {
                    break 'outer
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
            }
        }
        // The group queue: rebalance callbacks, errors, and messages of partitions not (yet)
        // read from queues of their own.
        for _ in 0..BURST {
            match consumer.poll(Duration::ZERO) {
                Some(Ok(m)) => {
                    busy = true;
                    if let Some(topic) = ctx.topic_index(m.topic()) {
                        take(&ctx, &cfg, &mut buffers, m.partition(), topic, &m);
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => {
                    consume_error(&ctx, None, &e);
                    break;
                }
                None => break,
            }
        }
        busy |= read_partition_queues(&ctx, &cfg, &mut queues, &mut buffers);
        dispatch(&ctx, &mut buffers);
        if !busy {
            ctx.wake.wait(IDLE_WAIT);
        }
    }
    // Leave the group: close_queue makes librdkafka revoke everything through the callback.
    tracing::info!("consumer leaving the group");
    dispatch(&ctx, &mut buffers);
    drop(queues);
    match consumer.close_queue() {
        Ok(()) => {
            let deadline = std::time::Instant::now() + cfg.close_timeout;
            while !consumer.closed() && std::time::Instant::now() < deadline {
                let _ = consumer.poll(Duration::from_millis(50));
            }
        }
        Err(e) => tracing::warn!(error = %e, "closing the consumer failed"),
    }
    let _ = ctx.events.send(GroupEvent::Closed);
}

/// Reads the active partitions' own queues, each as far as its task has room (see the module
/// doc); true when a message was read.
fn read_partition_queues(
    ctx: &ConsumerCtx,
    cfg: &LoopConfig,
    queues: &mut HashMap<i32, Queues>,
    buffers: &mut HashMap<i32, InBatch>,
) -> bool {
    let mut busy = false;
    // Partitions revoked or lost inside `poll` lose their queues.
    let sinks: Vec<(i32, Arc<Inflight>)> = {
        let routes = ctx.routes();
        queues.retain(|p, _| routes.active.contains_key(p));
        routes
            .active
            .iter()
            .map(|(p, s)| (*p, s.inflight.clone()))
            .collect()
    };
    let total_bytes: usize = sinks
        .iter()
        .map(|(_, f)| f.bytes.load(Ordering::Acquire))
        .sum();
    let over_bytes = total_bytes > cfg.max_inflight_bytes;
    let mut throttled = 0;
    for (p, inflight) in &sinks {
        let Some(qs) = queues.get(p) else { continue };
        let waiting = inflight.messages.load(Ordering::Acquire);
        let room = cfg.max_inflight_messages.saturating_sub(waiting);
        let over = over_bytes || room == 0;
        inflight.throttled.store(over, Ordering::Release);
        throttled += i64::from(over);
        for (t, q) in qs.iter().enumerate() {
            // Up to the partition's room; when there is none, a topic the task has nothing
            // of still gets a burst, so the task's alignment can go on.
            let allowed = if !over {
                room
            } else if inflight.topic_messages[t].load(Ordering::Acquire) == 0 {
                cfg.max_inflight_messages
            } else {
                0
            };
            for _ in 0..allowed.min(BURST) {
                match q.poll(Duration::ZERO) {
                    Some(Ok(m)) => {
                        busy = true;
                        take(ctx, cfg, buffers, *p, t as u16, &m);
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) => {}
                    Some(Err(e)) => {
                        consume_error(ctx, Some(*p), &e);
                        break;
                    }
                    None => break,
                }
            }
        }
    }
    InputThrottled {
        partitions: throttled,
    }
    .emit(&ctx.metrics);
    busy
}

/// An error a queue returned instead of a message. Brokers out of reach make every queue return
/// one on every poll: those are said by the broker watch, from the error callback that carries
/// librdkafka's reason, at its own rate — not here, dozens of times a second.
fn consume_error(ctx: &ConsumerCtx, partition: Option<i32>, e: &KafkaError) {
    if Trouble::of(e).is_some() {
        ctx.watch.tick();
        return;
    }
    ctx.metrics
        .consumer_errors
        .with_label_values(&["consume"])
        .inc();
    match partition {
        Some(p) => tracing::warn!(partition = p, error = %e, "consume error"),
        None => tracing::warn!(error = %e, "consume error"),
    }
}

/// Copies message `m` into its partition's batch, handing the batch over first when it is full.
fn take(
    ctx: &ConsumerCtx,
    cfg: &LoopConfig,
    buffers: &mut HashMap<i32, InBatch>,
    partition: i32,
    topic: u16,
    m: &BorrowedMessage<'_>,
) {
    let batch = buffers
        .entry(partition)
        .or_insert_with(|| cfg.batches.take(partition));
    let len = m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
    if !batch.has_room(len) {
        // Full: hand it over now and go on in a fresh one.
        let full = std::mem::replace(batch, cfg.batches.take(partition));
        send_batch(&ctx.routes(), partition, full);
    }
    batch.push(
        topic,
        m.offset(),
        m.timestamp().to_millis(),
        m.key(),
        m.payload(),
    );
}

/// How long a partition whose seek failed waits before it is tried again.
const SEEK_RETRY: Duration = Duration::from_millis(500);

/// A partition to activate: where its input resumes and where its batches go.
struct Unsought {
    partition: i32,
    offsets: [Offset; 2],
    sink: PartitionSink,
}

/// [`activate`]s `u`; one whose seek failed stays paused and unrouted and goes to `retry`.
fn activate_or_retry(
    consumer: &Arc<GroupConsumer>,
    ctx: &ConsumerCtx,
    cfg: &LoopConfig,
    u: Unsought,
    queues: &mut HashMap<i32, Queues>,
    retry: &mut Vec<Unsought>,
) {
    let partition = u.partition;
    match activate(consumer, ctx, u, cfg) {
        Activation::Active(Some(q)) => {
            queues.insert(partition, q);
        }
        Activation::Active(None) | Activation::NotAssigned => {}
        Activation::SeekFailed(u) => retry.push(u),
    }
}

enum Activation {
    /// Sought, routed and resumed, with its queues (`None`: librdkafka gave none, so it is read
    /// from the group queue).
    Active(Option<Queues>),
    NotAssigned,
    /// It stays paused and unrouted: resumed from wherever librdkafka's position is, it would
    /// skip what an aborted batch had consumed (or read again what it has applied).
    SeekFailed(Unsought),
}

/// Seeks a restored partition to its offsets, routes it to its sink and resumes it, unless it is
/// no longer assigned or the seek fails.
fn activate(
    consumer: &Arc<GroupConsumer>,
    ctx: &ConsumerCtx,
    u: Unsought,
    cfg: &LoopConfig,
) -> Activation {
    let partition = u.partition;
    let mut tpl = TopicPartitionList::new();
    for (topic, &offset) in ctx.topics.iter().zip(&u.offsets) {
        if let Err(e) = tpl.add_partition_offset(topic, partition, offset) {
            tracing::error!(partition, error = %e, "bad offset to resume a partition from; it stays paused, tried again");
            ctx.metrics
                .consumer_errors
                .with_label_values(&["seek"])
                .inc();
            return Activation::SeekFailed(u);
        }
    }
    if !consumer
        .assignment()
        .map(|a| a.find_partition(&ctx.topics[0], partition).is_some())
        .unwrap_or(false)
    {
        tracing::info!(partition, "partition no longer assigned, not activating it");
        return Activation::NotAssigned;
    }
    // Queues of its own before anything is fetched from the seek position on: while it was
    // paused, its messages (dropped unrouted) came through the group queue.
    let queues = ctx.topics.iter().map(|topic| {
        consumer
            .split_partition_queue(topic, partition)
            .map(|mut q| {
                let wake = ctx.wake.clone();
                q.set_nonempty_callback(move || wake.notify());
                q
            })
    });
    let queues: Option<Vec<_>> = queues.collect();
    let queues = queues.and_then(|q| <[_; 2]>::try_from(q).ok());
    if queues.is_none() {
        tracing::warn!(
            partition,
            "no partition queues; reading the partition from the group queue"
        );
    }
    let failed = match consumer.seek_partitions(tpl, cfg.seek_timeout) {
        Ok(result) => result.elements().iter().any(|e| match e.error() {
            Ok(()) => false,
            Err(err) => {
                tracing::warn!(partition, topic = e.topic(), error = %err, "seek failed; the partition stays paused, tried again");
                true
            }
        }),
        Err(e) => {
            tracing::warn!(partition, error = %e, "seek failed; the partition stays paused, tried again");
            true
        }
    };
    if failed {
        ctx.metrics
            .consumer_errors
            .with_label_values(&["seek"])
            .inc();
        return Activation::SeekFailed(u);
    }
    ctx.routes().active.insert(partition, u.sink);
    if let Err(e) = consumer.resume(&ctx.both(&[partition])) {
        tracing::warn!(partition, error = %e, "resuming a restored partition failed");
    }
    PartitionResumed {
        partition,
        offsets: u.offsets,
    }
    .emit();
    Activation::Active(queues)
}

/// Hands every partition's batch over.
fn dispatch(ctx: &ConsumerCtx, buffers: &mut HashMap<i32, InBatch>) {
    if buffers.is_empty() {
        return;
    }
    let routes = ctx.routes();
    for (partition, batch) in buffers.drain() {
        send_batch(&routes, partition, batch);
    }
}

/// Hands a batch to its partition's task. A partition without a route is paused (restoring or
/// rewinding): its messages are dropped here and fetched again after the seek that activates it.
fn send_batch(routes: &Routes, partition: i32, batch: InBatch) {
    if let Some(sink) = routes.active.get(&partition) {
        sink.send(partition, batch);
    }
}
