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
//! Back-pressure: a partition whose task has too many messages waiting is paused, and resumed when
//! the task has worked half of them off; all partitions pause while the input bytes waiting
//! exceed the global cap.

use crate::client::{log_to_tracing, record_lag};
use crate::metrics::Metrics;
use crate::partition::{BatchPool, InBatch};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Messages and bytes a partition task has not processed yet.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    pub messages: AtomicUsize,
    pub bytes: AtomicUsize,
    /// The partition is paused for back-pressure: nothing more arrives until the task drains.
    pub paused: AtomicBool,
    /// Per input topic: the consumer's last statistics showed every stable message of the
    /// partition delivered (false while unknown).
    pub caught_up: [AtomicBool; 2],
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
    /// Paused by back-pressure (not by restore).
    throttled: HashSet<i32>,
    all_throttled: bool,
}

pub(crate) struct ConsumerCtx {
    pub topics: [String; 2],
    pub events: UnboundedSender<GroupEvent>,
    pub metrics: Metrics,
    /// How long a revocation waits for the coordinator.
    pub ack_timeout: Duration,
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
                routes.throttled.remove(p);
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

/// Runs the consumer until [`ConsumerCmd::Shutdown`] (or the command channel closes), then leaves
/// the group (the revoke callback commits through the coordinator) and reports [`GroupEvent::Closed`].
pub(crate) fn run_consumer_loop(
    consumer: Arc<GroupConsumer>,
    commands: std_mpsc::Receiver<ConsumerCmd>,
    cfg: LoopConfig,
) {
    let ctx = consumer.context().clone();
    let mut buffers: HashMap<i32, InBatch> = HashMap::new();
    'outer: loop {
        loop {
            match commands.try_recv() {
                Ok(ConsumerCmd::Activate {
                    partition,
                    offsets,
                    sink,
                }) => activate(&consumer, &ctx, partition, offsets, sink, cfg.seek_timeout),
                Ok(ConsumerCmd::Deactivate { partition }) => {
                    let mut routes = ctx.routes();
                    routes.active.remove(&partition);
                    routes.throttled.remove(&partition);
                    drop(routes);
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
        // Poll a burst: block briefly for the first message, then take what is already there.
        let mut timeout = Duration::from_millis(20);
        for _ in 0..2048 {
            match consumer.poll(timeout) {
                Some(Ok(m)) => {
                    timeout = Duration::ZERO;
                    let topic = if m.topic() == ctx.topics[0] {
                        0
                    } else if m.topic() == ctx.topics[1] {
                        1
                    } else {
                        continue;
                    };
                    let partition = m.partition();
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
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "consume error");
                    break;
                }
                None => break,
            }
        }
        dispatch(&ctx, &mut buffers);
        apply_backpressure(&consumer, &ctx, &cfg);
    }
    // Leave the group: close_queue makes librdkafka revoke everything through the callback.
    tracing::info!("consumer leaving the group");
    dispatch(&ctx, &mut buffers);
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

fn activate(
    consumer: &GroupConsumer,
    ctx: &ConsumerCtx,
    partition: i32,
    offsets: [Offset; 2],
    sink: PartitionSink,
    timeout: Duration,
) {
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
        return;
    }
    match consumer.seek_partitions(tpl, timeout) {
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
    if sink.tx.send(batch).is_err() {
        tracing::debug!(partition, "partition task gone, dropping its messages");
    }
}

fn apply_backpressure(consumer: &GroupConsumer, ctx: &ConsumerCtx, cfg: &LoopConfig) {
    let mut routes = ctx.routes();
    let total_bytes: usize = routes
        .active
        .values()
        .map(|s| s.inflight.bytes.load(Ordering::Acquire))
        .sum();
    let over_bytes = total_bytes > cfg.max_inflight_bytes;
    let under_bytes = total_bytes <= cfg.max_inflight_bytes / 2;
    let mut pause = Vec::new();
    let mut resume = Vec::new();
    for (p, sink) in &routes.active {
        let waiting = sink.inflight.messages.load(Ordering::Acquire);
        let throttled = routes.throttled.contains(p);
        if !throttled && (waiting > cfg.max_inflight_messages || over_bytes) {
            pause.push(*p);
        } else if throttled
            && waiting <= cfg.max_inflight_messages / 2
            && (under_bytes || !routes.all_throttled)
        {
            resume.push(*p);
        }
    }
    if over_bytes {
        routes.all_throttled = true;
    } else if under_bytes {
        routes.all_throttled = false;
    }
    if !pause.is_empty() {
        if let Err(e) = consumer.pause(&ctx.both(&pause)) {
            tracing::warn!(error = %e, "pausing for back-pressure failed");
        } else {
            tracing::debug!(partitions = ?pause, total_bytes, "back-pressure, partitions paused");
            for p in &pause {
                if let Some(sink) = routes.active.get(p) {
                    sink.inflight.paused.store(true, Ordering::Release);
                }
            }
            routes.throttled.extend(pause);
        }
    }
    if !resume.is_empty() {
        if let Err(e) = consumer.resume(&ctx.both(&resume)) {
            tracing::warn!(error = %e, "resuming after back-pressure failed");
        } else {
            tracing::debug!(partitions = ?resume, "back-pressure relieved, partitions resumed");
            for p in resume {
                if let Some(sink) = routes.active.get(&p) {
                    sink.inflight.paused.store(false, Ordering::Release);
                }
                routes.throttled.remove(&p);
            }
        }
    }
    ctx.metrics
        .partitions_paused
        .set(routes.throttled.len() as i64);
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
