//! Telemetry of the input stage: rebalances, back-pressure and lag, as the consumer thread sees
//! them.

use crate::metrics::Metrics;
use rdkafka::topic_partition_list::Offset;
use std::time::Duration;

/// The group assigned announce partitions (and their completion twins) to this instance; they
/// stay paused until restored.
pub(crate) struct PartitionsAssigned<'a> {
    pub partitions: &'a [i32],
}

impl PartitionsAssigned<'_> {
    pub fn emit(self, metrics: &Metrics) {
        metrics.rebalances.with_label_values(&["assign"]).inc();
        tracing::info!(
            partitions = ?self.partitions,
            "partitions assigned, paused until restored"
        );
    }
}

/// The group takes partitions away: revoked (their batch is committed first) or lost (the group
/// moved on without this instance; nothing is committed).
pub(crate) struct PartitionsRevoked<'a> {
    pub partitions: &'a [i32],
    pub lost: bool,
}

impl PartitionsRevoked<'_> {
    pub fn emit(self, metrics: &Metrics) {
        let kind = if self.lost { "lost" } else { "revoke" };
        metrics.rebalances.with_label_values(&[kind]).inc();
        tracing::info!(
            partitions = ?self.partitions,
            lost = self.lost,
            "partitions revoked, waiting for the coordinator"
        );
    }
}

/// The coordinator did not acknowledge a revocation in time; the partitions are given up anyway.
pub(crate) struct RevocationUnacknowledged<'a> {
    pub partitions: &'a [i32],
    pub timeout: Duration,
}

impl RevocationUnacknowledged<'_> {
    pub fn emit(self) {
        tracing::warn!(
            partitions = ?self.partitions,
            timeout_ms = self.timeout.as_millis() as u64,
            "coordinator did not acknowledge the revocation in time, giving the partitions up"
        );
    }
}

/// A restored partition is read again, from these offsets.
pub(crate) struct PartitionResumed {
    pub partition: i32,
    pub offsets: [Offset; 2],
}

impl PartitionResumed {
    pub fn emit(self) {
        tracing::info!(
            partition = self.partition,
            announce = ?self.offsets[0],
            completion = ?self.offsets[1],
            "partition restored and resumed"
        );
    }
}

/// How many partitions the consumer thread holds back, after one pass over its queues.
pub(crate) struct InputThrottled {
    pub partitions: i64,
}

impl InputThrottled {
    pub fn emit(self, metrics: &Metrics) {
        metrics.partitions_paused.set(self.partitions);
    }
}

/// Messages of one input partition not yet delivered, from librdkafka's statistics; `None`: the
/// partition is no longer assigned here, and its series goes.
pub(crate) struct LagObserved<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub messages: Option<i64>,
}

impl LagObserved<'_> {
    pub fn emit(self, metrics: &Metrics) {
        let labels = [self.topic, &self.partition.to_string()];
        match self.messages {
            Some(n) => metrics
                .consumer_lag_records
                .with_label_values(&labels)
                .set(n),
            None => {
                let _ = metrics.consumer_lag_records.remove_label_values(&labels);
            }
        }
    }
}

/// How far behind one partition's processing is, in seconds, at each statistics report: 0 when
/// nothing waits (librdkafka has delivered every stable message and the task has applied every
/// one it was given), otherwise the wall clock minus the Kafka timestamp of the last message the
/// task processed — the age of the input it is working through. An idle partition is not
/// behind, however long ago its last message came.
pub(crate) struct LagSecondsObserved {
    pub partition: i32,
    pub waiting: bool,
    pub now_ms: i64,
}

impl LagSecondsObserved {
    pub fn emit(self, metrics: &Metrics) {
        let seconds = if !self.waiting {
            0.0
        } else {
            match metrics.processed.get(self.partition) {
                // The input's timestamps are the producers' to set, to any value.
                Some(ts) => self.now_ms.saturating_sub(ts).max(0) as f64 / 1000.0,
                // Nothing processed yet since the partition was restored: unknown, left as it is.
                None => return,
            }
        };
        metrics
            .consumer_lag_seconds
            .with_label_values(&[&self.partition.to_string()])
            .set(seconds);
    }
}

/// The wall clock in milliseconds since the Unix epoch.
pub(crate) fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
