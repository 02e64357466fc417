//! Telemetry of a partition task, resolved once when the task starts: `with_label_values` hashes
//! its labels on every call, so the counters a message moves are looked up here, not per message.

use crate::metrics::Metrics;
use prometheus::{Gauge, IntCounter, IntGauge};
use std::time::Duration;
use toolcalls_core::{Correlator, Outcome};
use toolcalls_model::{EventKind, Phase, Strategy, ToolCallRecord};

/// The `kind` label of input messages that could not be applied (not decodable, invalid, or
/// poison).
const INVALID_KIND: &str = "invalid";

/// The metric children one partition task moves, and the events it reports.
pub(crate) struct PartitionTelemetry {
    partition: i32,
    metrics: Metrics,
    /// Input messages read, per input topic (0 announce, 1 completion).
    received: [Received; 2],
    outcomes: Outcomes,
    matches: Matches,
    records: Records,
    pending_calls: IntGauge,
    pending_bytes: IntGauge,
    held_events: IntGauge,
    oldest_pending_age: Gauge,
    lag_seconds: Gauge,
}

impl PartitionTelemetry {
    pub fn new(metrics: &Metrics, input_topics: &[String; 2], partition: i32) -> Self {
        let p = partition.to_string();
        PartitionTelemetry {
            partition,
            metrics: metrics.clone(),
            received: [
                Received::new(metrics, &input_topics[0]),
                Received::new(metrics, &input_topics[1]),
            ],
            outcomes: Outcomes::new(metrics),
            matches: Matches::new(metrics),
            records: Records::new(metrics),
            pending_calls: metrics.pending_calls.with_label_values(&[&p]),
            pending_bytes: metrics.pending_bytes.with_label_values(&[&p]),
            held_events: metrics.held_events.with_label_values(&[&p]),
            oldest_pending_age: metrics.oldest_pending_age.with_label_values(&[&p]),
            lag_seconds: metrics.consumer_lag_seconds.with_label_values(&[&p]),
        }
    }

    /// A message at an offset already applied (a rewind delivers it again): skipped.
    pub fn already_applied(&self, topic: usize, offset: i64) {
        tracing::trace!(
            partition = self.partition,
            topic,
            offset,
            "skipping a message already processed"
        );
    }

    /// A message was decoded and applied to the correlator, with this outcome.
    pub fn event_applied(&self, topic: usize, kind: EventKind, outcome: &Outcome) {
        self.received[topic].of(kind).inc();
        self.event_released(outcome);
    }

    /// An event the reorder window held was applied, with this outcome (it was counted as
    /// received, and as held, when it came).
    pub fn event_released(&self, outcome: &Outcome) {
        self.outcomes.of(outcome).inc();
        match outcome {
            Outcome::Matched(strategy) => self.matches.of(*strategy).inc(),
            Outcome::Duplicate => self.metrics.duplicates.inc(),
            _ => {}
        }
    }

    /// A message could not be applied: not decodable, invalid, or poison. It is dead-lettered.
    pub fn message_invalid(&self, topic: usize) {
        self.received[topic].invalid.inc();
    }

    /// A message went to the dead-letter topic, for this reason.
    pub fn dead_lettered(&self, topic: u16, offset: i64, reason: &'static str) {
        self.metrics.dead_letters.with_label_values(&[reason]).inc();
        tracing::debug!(
            partition = self.partition,
            topic,
            offset,
            reason,
            "message dead-lettered"
        );
    }

    /// Decoding or applying a message panicked: the batch is rewound and the message will be
    /// dead-lettered.
    pub fn poison_found(&self, topic: u16, offset: i64, why: &str) {
        tracing::error!(
            partition = self.partition,
            topic,
            offset,
            panic = %why,
            "processing a message panicked; the batch is rewound and the message will be dead-lettered"
        );
    }

    /// A record was published (or held back for the next transaction), at wall clock `now_ms`.
    pub fn record_published(&self, record: &ToolCallRecord, now_ms: i64) {
        let phase = record.status.phase;
        self.records.of(phase).inc();
        if phase == Phase::Evicted {
            self.metrics.evictions.inc();
        }
        if let Some(done) = record.status.completed_at {
            self.metrics
                .call_duration
                .observe(done.millis_since(record.created_at) as f64 / 1000.0);
        }
        self.metrics
            .end_to_end_latency
            .observe((now_ms - record.updated_at.millis()).max(0) as f64 / 1000.0);
    }

    /// A chunk of input was applied, in `elapsed`.
    pub fn chunk_applied(&self, elapsed: Duration) {
        self.metrics.chunk_duration.observe(elapsed.as_secs_f64());
    }

    /// The state's size; with `full`, also the age of its oldest pending entry (a scan, so only
    /// at punctuation).
    pub fn state_sampled(&self, correlator: &Correlator, full: bool) {
        self.pending_calls.set(correlator.pending_len() as i64);
        self.pending_bytes.set(correlator.pending_bytes() as i64);
        self.held_events.set(correlator.held_len() as i64);
        if full {
            let age = match (correlator.stream_time(), correlator.oldest_pending()) {
                (Some(now), Some(oldest)) => now.millis_since(oldest) as f64 / 1000.0,
                _ => 0.0,
            };
            self.oldest_pending_age.set(age);
        }
    }

    /// Wall clock `now_ms` against the Kafka timestamp of the last message processed.
    pub fn lag_sampled(&self, now_ms: i64, last_timestamp_ms: i64) {
        self.lag_seconds
            .set((now_ms - last_timestamp_ms).max(0) as f64 / 1000.0);
    }

    /// The task stopped: its partition's series go (another instance may own it now).
    pub fn stopped(&self) {
        let p = self.partition.to_string();
        let m = &self.metrics;
        let _ = m.pending_calls.remove_label_values(&[&p]);
        let _ = m.pending_bytes.remove_label_values(&[&p]);
        let _ = m.held_events.remove_label_values(&[&p]);
        let _ = m.oldest_pending_age.remove_label_values(&[&p]);
        let _ = m.consumer_lag_seconds.remove_label_values(&[&p]);
        tracing::debug!(partition = self.partition, "partition task stopped");
    }
}

/// `toolcalls_input_events_total` of one input topic, by event kind.
struct Received {
    announce: IntCounter,
    completion: IntCounter,
    execution_start: IntCounter,
    execution_end: IntCounter,
    turn_end: IntCounter,
    turn_aborted: IntCounter,
    approval: IntCounter,
    hook_decision: IntCounter,
    invalid: IntCounter,
}

impl Received {
    fn new(m: &Metrics, topic: &str) -> Self {
        let c = |kind: &str| m.events_received.with_label_values(&[topic, kind]);
        let kind = |k: EventKind| c(k.as_str());
        Received {
            announce: kind(EventKind::Announce),
            completion: kind(EventKind::Completion),
            execution_start: kind(EventKind::ExecutionStart),
            execution_end: kind(EventKind::ExecutionEnd),
            turn_end: kind(EventKind::TurnEnd),
            turn_aborted: kind(EventKind::TurnAborted),
            approval: kind(EventKind::Approval),
            hook_decision: kind(EventKind::HookDecision),
            invalid: c(INVALID_KIND),
        }
    }

    fn of(&self, kind: EventKind) -> &IntCounter {
        match kind {
            EventKind::Announce => &self.announce,
            EventKind::Completion => &self.completion,
            EventKind::ExecutionStart => &self.execution_start,
            EventKind::ExecutionEnd => &self.execution_end,
            EventKind::TurnEnd => &self.turn_end,
            EventKind::TurnAborted => &self.turn_aborted,
            EventKind::Approval => &self.approval,
            EventKind::HookDecision => &self.hook_decision,
        }
    }
}

/// `toolcalls_correlation_outcomes_total`, by outcome.
struct Outcomes {
    pending: IntCounter,
    matched: IntCounter,
    merged: IntCounter,
    duplicate: IntCounter,
    late: IntCounter,
    collapsed: IntCounter,
    applied: IntCounter,
    rejected: IntCounter,
    held: IntCounter,
}

impl Outcomes {
    fn new(m: &Metrics) -> Self {
        // Labelled by `Outcome::label` of a value of each variant, so the labels stay the core's.
        let c = |o: Outcome| m.event_outcomes.with_label_values(&[o.label()]);
        Outcomes {
            pending: c(Outcome::Pending),
            matched: c(Outcome::Matched(Strategy::CallId)),
            merged: c(Outcome::Merged),
            duplicate: c(Outcome::Duplicate),
            late: c(Outcome::Late),
            collapsed: c(Outcome::Collapsed),
            applied: c(Outcome::Applied),
            rejected: c(Outcome::Rejected("")),
            held: c(Outcome::Held),
        }
    }

    fn of(&self, outcome: &Outcome) -> &IntCounter {
        match outcome {
            Outcome::Pending => &self.pending,
            Outcome::Matched(_) => &self.matched,
            Outcome::Merged => &self.merged,
            Outcome::Duplicate => &self.duplicate,
            Outcome::Late => &self.late,
            Outcome::Collapsed => &self.collapsed,
            Outcome::Applied => &self.applied,
            Outcome::Rejected(_) => &self.rejected,
            Outcome::Held => &self.held,
        }
    }
}

/// `toolcalls_correlation_matches_total`, by strategy.
struct Matches {
    call_id: IntCounter,
    checksum: IntCounter,
    tool_fifo: IntCounter,
    oldest: IntCounter,
    unmatched: IntCounter,
}

impl Matches {
    fn new(m: &Metrics) -> Self {
        let c = |s: Strategy| m.matches.with_label_values(&[s.as_str()]);
        Matches {
            call_id: c(Strategy::CallId),
            checksum: c(Strategy::Checksum),
            tool_fifo: c(Strategy::ToolFifo),
            oldest: c(Strategy::Oldest),
            unmatched: c(Strategy::Unmatched),
        }
    }

    fn of(&self, strategy: Strategy) -> &IntCounter {
        match strategy {
            Strategy::CallId => &self.call_id,
            Strategy::Checksum => &self.checksum,
            Strategy::ToolFifo => &self.tool_fifo,
            Strategy::Oldest => &self.oldest,
            Strategy::Unmatched => &self.unmatched,
        }
    }
}

/// `toolcalls_output_records_total`, by phase.
struct Records {
    pending: IntCounter,
    running: IntCounter,
    succeeded: IntCounter,
    failed: IntCounter,
    denied: IntCounter,
    interrupted: IntCounter,
    timed_out: IntCounter,
    evicted: IntCounter,
    orphaned: IntCounter,
}

impl Records {
    fn new(m: &Metrics) -> Self {
        let c = |p: Phase| m.records_emitted.with_label_values(&[p.as_str()]);
        Records {
            pending: c(Phase::Pending),
            running: c(Phase::Running),
            succeeded: c(Phase::Succeeded),
            failed: c(Phase::Failed),
            denied: c(Phase::Denied),
            interrupted: c(Phase::Interrupted),
            timed_out: c(Phase::TimedOut),
            evicted: c(Phase::Evicted),
            orphaned: c(Phase::Orphaned),
        }
    }

    fn of(&self, phase: Phase) -> &IntCounter {
        match phase {
            Phase::Pending => &self.pending,
            Phase::Running => &self.running,
            Phase::Succeeded => &self.succeeded,
            Phase::Failed => &self.failed,
            Phase::Denied => &self.denied,
            Phase::Interrupted => &self.interrupted,
            Phase::TimedOut => &self.timed_out,
            Phase::Evicted => &self.evicted,
            Phase::Orphaned => &self.orphaned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Registry;

    #[test]
    fn every_named_counter_moves_the_series_of_its_label() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry);
        let t = PartitionTelemetry::new(&metrics, &["a".into(), "c".into()], 3);
        for kind in EventKind::ALL {
            t.event_applied(1, kind, &Outcome::Merged);
            let labels = [("topic", "c"), ("kind", kind.as_str())];
            assert_eq!(
                crate::metrics::sum(&registry, "toolcalls_input_events_total", &labels),
                1.0
            );
        }
        t.message_invalid(0);
        let invalid = [("topic", "a"), ("kind", "invalid")];
        assert_eq!(
            crate::metrics::sum(&registry, "toolcalls_input_events_total", &invalid),
            1.0
        );
        for strategy in Strategy::ALL {
            let outcome = Outcome::Matched(strategy);
            t.event_applied(0, EventKind::Completion, &outcome);
            let labels = [("strategy", strategy.as_str())];
            assert_eq!(
                crate::metrics::sum(&registry, "toolcalls_correlation_matches_total", &labels),
                1.0
            );
        }
        for outcome in [
            Outcome::Pending,
            Outcome::Duplicate,
            Outcome::Late,
            Outcome::Collapsed,
            Outcome::Applied,
            Outcome::Rejected("conflicting_call_id"),
        ] {
            t.event_applied(0, EventKind::Announce, &outcome);
            let labels = [("outcome", outcome.label())];
            assert_eq!(
                crate::metrics::sum(&registry, "toolcalls_correlation_outcomes_total", &labels),
                1.0
            );
        }
        let matched = [("outcome", "matched")];
        assert_eq!(
            crate::metrics::sum(&registry, "toolcalls_correlation_outcomes_total", &matched),
            Strategy::ALL.len() as f64
        );
        assert_eq!(
            crate::metrics::sum(&registry, "toolcalls_correlation_duplicates_total", &[]),
            1.0
        );
        for phase in Phase::ALL {
            t.records.of(phase).inc();
            let labels = [("phase", phase.as_str())];
            assert_eq!(
                crate::metrics::sum(&registry, "toolcalls_output_records_total", &labels),
                1.0
            );
        }
    }
}
