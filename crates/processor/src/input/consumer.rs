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
    'outer: loop {
        let mut busy = false;
        loop {
            match commands.try_recv() {
                Ok(ConsumerCmd::Activate {
                    partition,
                    offsets,
                    sink,
                }) => {
                    busy = true;
                    if let Some(q) = activate(&consumer, &ctx, partition, offsets, sink, &cfg) {
                        queues.insert(partition, q);
                    }
                }
                Ok(ConsumerCmd::Deactivate { partition }) => {
                    busy = true;
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

/// Seeks a restored partition to `offsets`, routes it to `sink` and resumes it; its queues, or
/// `None` when it is no longer assigned (or librdkafka gave no queues: then it is read from the
/// group queue).
fn activate(
    consumer: &Arc<GroupConsumer>,
    ctx: &ConsumerCtx,
    partition: i32,
    offsets: [Offset; 2],
    sink: PartitionSink,
    cfg: &LoopConfig,
) -> Option<Queues> {
    let mut tpl = TopicPartitionList::new();
    for (topic, offset) in ctx.topics.iter().zip(offsets) {
        if let Err(e) = tpl.add_partition_offset(topic, partition, offset) {
            tracing::warn!(partition, error = %e, "bad offset");
        }
    }
    if !consumer
        .assignment()
        .map(|a| a.find_partition(&ctx.topics[0], partition).is_some())
        .unwrap_or(false)
    {
        tracing::info!(partition, "partition no longer assigned, not activating it");
        return None;
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
    match consumer.seek_partitions(tpl, cfg.seek_timeout) {
        Ok(result) => {
            for e in result.elements() {
                if let Err(err) = e.error() {
                    tracing::warn!(partition, topic = e.topic(), error = %err, "seek failed");
                }
            }
        }
        Err(e) => tracing::warn!(partition, error = %e, "seek failed"),
    }
    ctx.routes().active.insert(partition, sink);
    if let Err(e) = consumer.resume(&ctx.both(&[partition])) {
        tracing::warn!(partition, error = %e, "resuming a restored partition failed");
    }
    PartitionResumed { partition, offsets }.emit();
    queues
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
