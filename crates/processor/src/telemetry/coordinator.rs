//! Telemetry of the coordinator: batches committed and aborted, restores, readiness.

use crate::error::Error;
use crate::metrics::Metrics;
use rdkafka::error::RDKafkaError;
use std::time::Duration;

/// A batch committed: its transaction (or, at-least-once, its offsets).
pub(crate) struct BatchCommitted {
    /// Messages the batch handed to the producer.
    pub produced: usize,
    pub elapsed: Duration,
}

impl BatchCommitted {
    pub fn emit(self, metrics: &Metrics) {
        metrics.transactions.with_label_values(&["committed"]).inc();
        metrics.commit_duration.observe(self.elapsed.as_secs_f64());
        tracing::trace!(produced = self.produced, "batch committed");
    }
}

/// The open batch is abandoned: aborted, and every partition rewound to its committed offsets.
pub(crate) struct BatchAborted<'a> {
    pub reason: &'a str,
}

impl BatchAborted<'_> {
    pub fn emit(self, metrics: &Metrics) {
        tracing::warn!(
            reason = self.reason,
            "aborting the batch and rewinding to the committed offsets"
        );
        metrics.transactions.with_label_values(&["aborted"]).inc();
    }
}

/// A commit failed in a way no retry mends (fenced, unauthorized, …): the processor stops.
pub(crate) struct CommitFailedFatally<'a> {
    pub error: &'a Error,
}

impl CommitFailedFatally<'_> {
    pub fn emit(self) {
        tracing::error!(error = %self.error, "commit failed fatally, stopping without committing");
    }
}

/// The broker did not confirm an abort in time; it is asked again.
pub(crate) struct AbortUnconfirmed<'a> {
    pub attempt: u32,
    pub error: &'a RDKafkaError,
}

impl AbortUnconfirmed<'_> {
    pub fn emit(self, metrics: &Metrics) {
        tracing::warn!(
            error = %self.error,
            attempt = self.attempt,
            "the broker did not confirm the abort in time; retrying until it answers"
        );
        metrics.abort_retries.inc();
    }
}

/// A commit that had timed out went through when it was made again before an abort: the batch
/// is committed, and the rewind that follows resumes after it.
pub(crate) struct CommitResumed;

impl CommitResumed {
    pub fn emit(self, metrics: &Metrics) {
        tracing::warn!("the commit that timed out went through when made again; the batch is committed, not aborted");
        metrics.transactions.with_label_values(&["committed"]).inc();
    }
}

/// A partition's state is being rebuilt from the changelog.
pub(crate) struct RestoreStarted {
    pub partition: i32,
}

impl RestoreStarted {
    pub fn emit(self) {
        tracing::info!(
            partition = self.partition,
            "restoring partition state from the changelog"
        );
    }
}

/// A restore failed in a way worth another try; it starts again.
pub(crate) struct RestoreRetried<'a> {
    pub partition: i32,
    pub error: &'a Error,
}

impl RestoreRetried<'_> {
    pub fn emit(self) {
        tracing::warn!(partition = self.partition, error = %self.error, "restore failed, retrying");
    }
}

/// Changelog keys whose latest value was never committed: the restored state writes them again
/// at its first checkpoint.
pub(crate) struct KeysRestated {
    pub partition: i32,
    pub keys: usize,
}

impl KeysRestated {
    pub fn emit(self) {
        tracing::info!(
            partition = self.partition,
            keys = self.keys,
            "changelog keys whose latest value was never committed are written again at the first checkpoint"
        );
    }
}

/// A partition's state is rebuilt; its task starts.
pub(crate) struct RestoreFinished {
    pub partition: i32,
    /// Changelog messages read.
    pub records_read: u64,
    /// State entries the correlator was rebuilt from.
    pub entries: usize,
    pub restated: usize,
    /// Pending calls and waiting results in the restored state.
    pub pending: usize,
    pub elapsed: Duration,
}

impl RestoreFinished {
    pub fn emit(self, metrics: &Metrics) {
        metrics.restore_duration.observe(self.elapsed.as_secs_f64());
        metrics.restore_records.inc_by(self.records_read);
        tracing::info!(
            partition = self.partition,
            records = self.records_read,
            entries = self.entries,
            restated = self.restated,
            pending = self.pending,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "partition restored"
        );
    }
}

/// Partitions owned, and whether every one of them is restored and processing.
pub(crate) struct Readiness {
    pub assigned: usize,
    pub ready: bool,
}

impl Readiness {
    pub fn emit(self, metrics: &Metrics) {
        metrics.partitions_assigned.set(self.assigned as i64);
        metrics.ready.set(i64::from(self.ready));
    }
}
