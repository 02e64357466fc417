//! Flow control between the consumer thread and the partition tasks: what a task has not
//! processed yet ([`Inflight`]), where its batches go ([`PartitionSink`]), and how the consumer
//! thread is woken from its idle wait ([`Wake`]).

use super::batch::InBatch;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};
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
    /// Per input topic: when the consumer's last statistics, taken then, showed every stable
    /// message of the partition delivered, as [`Stamp`] microseconds; 0 when they did not (and
    /// while unknown).
    caught_up: [AtomicU64; 2],
    wake: Arc<Wake>,
}

impl Inflight {
    pub fn new(wake: Arc<Wake>) -> Self {
        Inflight {
            messages: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            topic_messages: [AtomicUsize::new(0), AtomicUsize::new(0)],
            throttled: AtomicBool::new(false),
            caught_up: [AtomicU64::new(0), AtomicU64::new(0)],
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

    /// Per input topic: when the consumer last saw everything delivered, if its latest
    /// statistics say so (see [`super::align`]).
    pub fn caught_up(&self) -> [Option<Instant>; 2] {
        [0, 1].map(|t| Stamp::instant(self.caught_up[t].load(Ordering::Acquire)))
    }

    /// What statistics taken at `at` say of input topic `topic`: caught up, or not.
    pub fn set_caught_up(&self, topic: usize, caught_up: bool, at: Instant) {
        let stamp = if caught_up { Stamp::of(at) } else { 0 };
        self.caught_up[topic].store(stamp, Ordering::Release);
    }
}

/// An instant as a number an atomic can hold: microseconds since the first one asked for, plus
/// one (0 stands for none).
struct Stamp;

impl Stamp {
    fn epoch() -> Instant {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }

    fn of(at: Instant) -> u64 {
        let since = at.saturating_duration_since(Self::epoch());
        u64::try_from(since.as_micros()).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant(stamp: u64) -> Option<Instant> {
        let micros = stamp.checked_sub(1)?;
        Some(Self::epoch() + Duration::from_micros(micros))
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
