//! Flow control between the consumer thread and the partition tasks: what a task has not
//! processed yet ([`Inflight`]), where its batches go ([`PartitionSink`]), and how the consumer
//! thread is woken from its idle wait ([`Wake`]).

use super::batch::InBatch;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Messages and bytes a partition task has not processed yet.
#[derive(Debug)]
pub(crate) struct Inflight {
    pub messages: AtomicUsize,
    pub bytes: AtomicUsize,
    /// Of `messages`, per input topic.
    pub topic_messages: [AtomicUsize; 2],
    /// The consumer thread holds the partition's input back (see
    /// [`run_consumer_loop`](super::consumer::run_consumer_loop)); the task wakes it as it works
    /// its input off.
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

    /// The consumer thread handed the task `batch`.
    pub fn given(&self, batch: &InBatch) {
        self.messages.fetch_add(batch.len(), Ordering::AcqRel);
        self.bytes.fetch_add(batch.size(), Ordering::AcqRel);
        for (count, n) in self.topic_messages.iter().zip(batch.topic_counts()) {
            count.fetch_add(n, Ordering::AcqRel);
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

    /// Per input topic: the consumer saw everything delivered (see [`super::align`]).
    pub fn caught_up(&self) -> [bool; 2] {
        [0, 1].map(|t| self.caught_up[t].load(Ordering::Acquire))
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
    pub fn wait(&self, timeout: Duration) {
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

impl PartitionSink {
    /// Hands a batch to the partition's task, counting it in flight.
    pub fn send(&self, partition: i32, batch: InBatch) {
        self.inflight.given(&batch);
        if self.tx.send(batch).is_err() {
            tracing::debug!(partition, "partition task gone, dropping its messages");
        }
    }
}
