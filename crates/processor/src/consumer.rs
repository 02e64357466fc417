//! The consumer thread: one OS thread owns the polling of the group consumer.
//!
//! The group is formed on the **announce topic only**; completion partition `p` follows announce
//! partition `p` into the local assignment. librdkafka's assignors (range, roundrobin,
//! cooperative-sticky) assign each topic on its own, so subscribing to both topics would let the
//! two halves of one session land on different instances; following the leader topic keeps them
//! together under cooperative-sticky rebalancing.
//!
//! Rebalance callbacks run on this thread inside `poll`. They are turned into [`GroupEvent`]s for
//! the coordinator; a revocation waits (bounded) for the coordinator's acknowledgement, which comes
//! after the current batch is committed, before the partitions are given up. Newly assigned
//! partitions are paused at once and stay paused until the coordinator has restored their state
//! and sends [`ConsumerCmd::Activate`], which seeks to the committed offsets, routes messages to the
//! partition task and resumes fetching — all on this thread, so no stale message slips through.
//!
//! Back-pressure: once restored, a partition's two topics are read from partition queues of their
//! own. A partition whose task has more than `max_inflight_messages` waiting (or every partition,
//! while the input bytes waiting exceed `max_inflight_bytes`) is not read until the task works
//! its input down — except a topic the task has nothing buffered of, which is read a burst at a
//! time so the task's timestamp alignment can go on. librdkafka stops fetching a partition whose
//! prefetch queue is full (`queued.max.messages.kbytes`), so nothing is paused and nothing
//! fetched is thrown away.

use crate::client::{log_to_tracing, record_lag};
use crate::metrics::Metrics;
use crate::partition::{BatchPool, InBatch};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Messages and bytes a partition task has not processed yet.
#[derive(Debug)]
pub(crate) struct Inflight {
    pub messages: AtomicUsize,
    pub bytes: AtomicUsize,
    /// Of `messages`, per input topic.
    pub topic_messages: [AtomicUsize; 2],
    /// The consumer thread holds the partition's input back (see [`run_consumer_loop`]); the task
    /// wakes it as it works its input off.
    pub throttled: AtomicBool,
    /// Per input topic: the consumer's last statistics showed every stable message of the
    /// partition delivered (false while unknown).
    pub caught_up: [AtomicBool; 2],
    wake: Arc<Wake>,
}

impl Inflight {
    pub fn new(wake: Arc<Wake>) -> Self {
        Inflight {
            messages: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            topic_messages: [AtomicUsize::new(0), AtomicUsize::new(0)],
            throttled: AtomicBool::new(false),
            caught_up: [AtomicBool::new(false), AtomicBool::new(false)],
            wake,
        }
    }

    /// The task applied `messages` (`per_topic` of each topic) of `bytes`.
    pub fn taken(&self, messages: usize, bytes: usize, per_topic: [usize; 2]) {
        self.messages.fetch_sub(messages, Ordering::AcqRel);
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        for (count, n) in self.topic_messages.iter().zip(per_topic) {
            count.fetch_sub(n, Ordering::AcqRel);
        }
        if self.throttled.load(Ordering::Acquire) {
            self.wake.notify();
        }
    }
}

/// Wakes the consumer thread from its idle wait: a queue became non-empty, a task worked off
/// input that was held back, or the coordinator sent a command.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    pending: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    pub fn notify(&self) {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    /// Returns when notified (since the last return) or after `timeout`.
    fn wait(&self, timeout: Duration) {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (mut pending, _) = self
            .cv
            .wait_timeout_while(pending, timeout, |p| !*p)
            .unwrap_or_else(|e| e.into_inner());
        *pending = false;
    }
}

/// Where the consumer thread delivers a partition's messages.
#[derive(Clone)]
pub(crate) struct PartitionSink {
    pub tx: UnboundedSender<InBatch>,
    pub inflight: Arc<Inflight>,
}

/// What the consumer thread tells the coordinator.
pub(crate) enum GroupEvent {
    /// Announce partitions (and their completion twins) were assigned; they are paused.
    Assigned(Vec<i32>),
    /// Partitions are being revoked; acknowledge once their batch is committed and their tasks stopped.
    Revoked {
        partitions: Vec<i32>,
        ack: std_mpsc::SyncSender<()>,
    },
    /// Partitions were lost (the group moved on without us); drop them without committing.
    Lost {
        partitions: Vec<i32>,
        ack: std_mpsc::SyncSender<()>,
    },
    /// A consumer error the runtime cannot continue after.
    Fatal(String),
    /// The consumer left the group and the thread ended.
    Closed,
}

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

#[derive(Default)]
struct Routes {
    active: HashMap<i32, PartitionSink>,
}

pub(crate) struct ConsumerCtx {
    pub topics: [String; 2],
    pub events: UnboundedSender<GroupEvent>,
    pub metrics: Metrics,
    /// How long a revocation waits for the coordinator.
    pub ack_timeout: Duration,
    pub wake: Arc<Wake>,
    routes: Mutex<Routes>,
}

impl ConsumerCtx {
    pub fn new(
        topics: [String; 2],
        events: UnboundedSender<GroupEvent>,
        metrics: Metrics,
        ack_timeout: Duration,
    ) -> Self {
        ConsumerCtx {
            topics,
            events,
            metrics,
            ack_timeout,
            wake: Arc::new(Wake::default()),
            routes: Mutex::new(Routes::default()),
        }
    }

    fn both(&self, partitions: &[i32]) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for topic in &self.topics {
            for p in partitions {
                tpl.add_partition(topic, *p);
            }
        }
        tpl
    }

    /// 0 for the announce topic, 1 for the completion topic.
    fn topic_index(&self, topic: &str) -> Option<u16> {
        self.topics
            .iter()
            .position(|t| t == topic)
            .map(|i| i as u16)
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_assign(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>, cooperative: bool) {
        let tpl = self.both(&partitions);
        let result = if cooperative {
            consumer.incremental_assign(&tpl)
        } else {
            consumer.assign(&tpl)
        };
        if let Err(e) = result {
            let _ = self.events.send(GroupEvent::Fatal(format!(
                "assigning partitions {partitions:?} failed: {e}"
            )));
            return;
        }
        if let Err(e) = consumer.pause(&tpl) {
            let _ = self.events.send(GroupEvent::Fatal(format!(
                "pausing new partitions {partitions:?} failed: {e}"
            )));
            return;
        }
        self.metrics.rebalances.with_label_values(&["assign"]).inc();
        tracing::info!(?partitions, "partitions assigned, paused until restored");
        let _ = self.events.send(GroupEvent::Assigned(partitions));
    }

    fn on_revoke(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>, cooperative: bool) {
        let lost = consumer.assignment_lost();
        let (ack, done) = std_mpsc::sync_channel(1);
        let kind = if lost { "lost" } else { "revoke" };
        self.metrics.rebalances.with_label_values(&[kind]).inc();
        tracing::info!(
            ?partitions,
            lost,
            "partitions revoked, waiting for the coordinator"
        );
        let event = if lost {
            GroupEvent::Lost {
                partitions: partitions.clone(),
                ack,
            }
        } else {
            GroupEvent::Revoked {
                partitions: partitions.clone(),
                ack,
            }
        };
        if self.events.send(event).is_ok() && done.recv_timeout(self.ack_timeout).is_err() {
            tracing::warn!(
                ?partitions,
                timeout_ms = self.ack_timeout.as_millis() as u64,
                "coordinator did not acknowledge the revocation in time, giving the partitions up"
            );
        }
        {
            let mut routes = self.routes();
            for p in &partitions {
                routes.active.remove(p);
            }
        }
        let tpl = self.both(&partitions);
        let result = if cooperative {
            consumer.incremental_unassign(&tpl)
        } else {
            consumer.unassign()
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, ?partitions, "unassigning partitions failed");
        }
    }
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_tracing(level, fac, message);
    }

    fn stats(&self, statistics: Statistics) {
        record_lag(&self.metrics, &self.topics, &statistics);
        let routes = self.routes();
        for (p, sink) in &routes.active {
            for (t, topic) in self.topics.iter().enumerate() {
                let part = statistics
                    .topics
                    .get(topic)
                    .and_then(|s| s.partitions.get(p));
                sink.inflight.caught_up[t].store(part.is_some_and(caught_up), Ordering::Release);
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let fatal = error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::Fatal);
        if fatal {
            tracing::error!(error = %error, reason, "fatal consumer error");
            let _ = self
                .events
                .send(GroupEvent::Fatal(format!("{error}: {reason}")));
        } else {
            tracing::warn!(error = %error, reason, "consumer error");
        }
    }
}

impl ConsumerContext for ConsumerCtx {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let partitions: Vec<i32> = tpl
            .elements()
            .iter()
            .filter(|e| e.topic() == self.topics[0])
            .map(|e| e.partition())
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.on_assign(consumer, partitions, cooperative)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.on_revoke(consumer, partitions, cooperative)
            }
            other => {
                tracing::error!(error = ?other, "rebalance failed, dropping the assignment");
                let all: Vec<i32> = self.routes().active.keys().copied().collect();
                self.on_revoke(consumer, all, false);
            }
        }
    }
}

/// Stable messages of a partition not yet delivered to us, from librdkafka's statistics; `None`
/// while unknown (before the first fetch).
///
/// The end is the last stable offset (the high watermark without read_committed); the position is
/// the offset after the last message delivered, or the fetch position while nothing was delivered
/// since the assignment. librdkafka's own `consumer_lag` counts from the committed offset, which
/// it does not know when offsets commit in a transaction.
pub(crate) fn undelivered(part: &rdkafka::statistics::Partition) -> Option<i64> {
    let end = if part.ls_offset >= 0 {
        part.ls_offset
    } else {
        part.hi_offset
    };
    let at = if part.app_offset >= 0 {
        part.app_offset
    } else {
        part.next_offset
    };
    (end >= 0 && at >= 0).then(|| (end - at).max(0))
}

/// Whether a partition's statistics show every stable message delivered. A transaction's commit
/// marker takes an offset that is never delivered, so one short of the end counts as caught up.
fn caught_up(part: &rdkafka::statistics::Partition) -> bool {
    undelivered(part).is_some_and(|n| n <= 1)
}

pub(crate) type GroupConsumer = BaseConsumer<ConsumerCtx>;

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

/// Runs the consumer until [`ConsumerCmd::Shutdown`] (or the command channel closes), then leaves
/// the group (the revoke callback commits through the coordinator) and reports [`GroupEvent::Closed`].
///
/// An active partition's two topics are read from queues of their own (librdkafka's partition
/// queues), so back-pressure needs no pause: a partition whose task has too much waiting is
/// simply not read, and librdkafka stops fetching it once its prefetch queue is full. Pausing
/// would throw the prefetched messages away and fetch them again on resume. Even then a topic the
/// task has nothing buffered of is read, a burst at a time, so that the task's timestamp alignment
/// (`align.rs`) always gets the other topic's head.
pub(crate) fn run_consumer_loop(
    consumer: Arc<GroupConsumer>,
    commands: std_mpsc::Receiver<ConsumerCmd>,
    cfg: LoopConfig,
) {
    let ctx = consumer.context().clone();
    let mut buffers: HashMap<i32, InBatch> = HashMap::new();
    let mut queues: HashMap<i32, [PartitionQueue<ConsumerCtx>; 2]> = HashMap::new();
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
                    tracing::warn!(error = %e, "consume error");
                    break;
                }
                None => break,
            }
        }
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
                            take(&ctx, &cfg, &mut buffers, *p, t as u16, &m);
                        }
                        Some(Err(KafkaError::PartitionEOF(_))) => {}
                        Some(Err(e)) => {
                            tracing::warn!(partition = p, error = %e, "consume error");
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        ctx.metrics.partitions_paused.set(throttled);
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

fn activate(
    consumer: &Arc<GroupConsumer>,
    ctx: &ConsumerCtx,
    partition: i32,
    offsets: [Offset; 2],
    sink: PartitionSink,
    cfg: &LoopConfig,
) -> Option<[PartitionQueue<ConsumerCtx>; 2]> {
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
    // Queues of its own before anything is fetched from the seek position on; until now the
    // partition was paused and its messages (dropped unrouted) went to the group queue.
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
    tracing::info!(partition, announce = ?offsets[0], completion = ?offsets[1], "partition restored and resumed");
    queues
}

fn dispatch(ctx: &ConsumerCtx, buffers: &mut HashMap<i32, InBatch>) {
    if buffers.is_empty() {
        return;
    }
    let routes = ctx.routes();
    for (partition, batch) in buffers.drain() {
        send_batch(&routes, partition, batch);
    }
}

/// Hands a batch to its partition's task, counting it in flight.
fn send_batch(routes: &Routes, partition: i32, batch: InBatch) {
    // A partition without a route is paused (restoring or rewinding): its messages are dropped
    // here and fetched again after the seek that activates it.
    let Some(sink) = routes.active.get(&partition) else {
        return;
    };
    let size = batch.size();
    sink.inflight
        .messages
        .fetch_add(batch.len(), Ordering::AcqRel);
    sink.inflight.bytes.fetch_add(size, Ordering::AcqRel);
    for (count, n) in sink
        .inflight
        .topic_messages
        .iter()
        .zip(batch.topic_counts())
    {
        count.fetch_add(n, Ordering::AcqRel);
    }
    if sink.tx.send(batch).is_err() {
        tracing::debug!(partition, "partition task gone, dropping its messages");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(ls: i64, hi: i64, app: i64, next: i64) -> rdkafka::statistics::Partition {
        rdkafka::statistics::Partition {
            ls_offset: ls,
            hi_offset: hi,
            app_offset: app,
            next_offset: next,
            ..Default::default()
        }
    }

    #[test]
    fn a_topic_is_caught_up_when_everything_stable_was_delivered() {
        const UNKNOWN: i64 = -1001;
        // Delivered up to the last stable offset, or one short of it (a commit marker).
        assert!(caught_up(&part(100, 120, 100, 120)));
        assert!(caught_up(&part(100, 120, 99, 120)));
        // More stable messages to deliver: behind.
        assert!(!caught_up(&part(100, 120, 50, 120)));
        // Nothing delivered since the assignment: the fetch position decides.
        assert!(caught_up(&part(100, 100, UNKNOWN, 100)));
        assert!(!caught_up(&part(100, 100, UNKNOWN, 0)));
        // Without a last stable offset the high watermark is the end.
        assert!(caught_up(&part(UNKNOWN, 40, 40, 40)));
        assert!(!caught_up(&part(UNKNOWN, 40, 10, 40)));
        // Not known yet (before the first fetch): behind.
        assert!(!caught_up(&part(UNKNOWN, UNKNOWN, UNKNOWN, 0)));
    }
}
