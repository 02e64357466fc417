//! Telemetry of a partition task, resolved once when the task starts: `with_label_values` hashes
//! its labels on every call, so the counters a message moves are looked up here, not per message.

use crate::metrics::Metrics;
use crate::telemetry::input::wall_ms;
use prometheus::{Gauge, IntCounter, IntGauge};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use toolcalls_core::{Correlator, Outcome};
use toolcalls_model::{EventKind, Phase, Strategy, Timestamp, ToolCallRecord};

/// The `kind` label of input messages that could not be applied (not decodable, invalid, or
/// poison).
const INVALID_KIND: &str = "invalid";

/// The metric children one partition task moves, and the events it reports.
pub(crate) struct PartitionTelemetry {
    partition: i32,
    metrics: Metrics,
    /// Input messages read, per input topic (0 announce, 1 completion).
    received: [Received; 2],
    /// Input messages stamped out of order beyond the reorder window, per input topic, and
    /// what of them is not said yet.
    out_of_order: [IntCounter; 2],
    out_of_order_unsaid: Cell<OutOfOrder>,
    outcomes: Outcomes,
    matches: Matches,
    records: Records,
    pending_calls: IntGauge,
    pending_bytes: IntGauge,
    held_events: IntGauge,
    forgotten_sessions: IntGauge,
    oldest_pending_age: Gauge,
    /// The input message being handled: (wall clock when its chunk was read, its Kafka
    /// timestamp); no timestamp while timers fire.
    input: Cell<(i64, Option<i64>)>,
    /// When entries were opened, for the oldest pending age.
    opened: RefCell<Opened>,
}

impl PartitionTelemetry {
    pub fn new(metrics: &Metrics, input_topics: &[Arc<str>; 2], partition: i32) -> Self {
        let p = partition.to_string();
        PartitionTelemetry {
            partition,
            metrics: metrics.clone(),
            received: [
                Received::new(metrics, &input_topics[0]),
                Received::new(metrics, &input_topics[1]),
            ],
            out_of_order: [
                metrics.out_of_order.with_label_values(&[&input_topics[0]]),
                metrics.out_of_order.with_label_values(&[&input_topics[1]]),
            ],
            out_of_order_unsaid: Cell::new(OutOfOrder::default()),
            outcomes: Outcomes::new(metrics),
            matches: Matches::new(metrics),
            records: Records::new(metrics),
            pending_calls: metrics.pending_calls.with_label_values(&[&p]),
            pending_bytes: metrics.pending_bytes.with_label_values(&[&p]),
            held_events: metrics.held_events.with_label_values(&[&p]),
            forgotten_sessions: metrics.forgotten_sessions.with_label_values(&[&p]),
            oldest_pending_age: metrics.oldest_pending_age.with_label_values(&[&p]),
            input: Cell::new((wall_ms(), None)),
            opened: RefCell::new(Opened::new(wall_ms())),
        }
    }

    /// The task takes an input message (read at wall clock `now_ms`, with this Kafka timestamp),
    /// or, with `None`, fires timers: what it publishes next is counted against it.
    pub fn input_taken(&self, now_ms: i64, timestamp_ms: Option<i64>) {
        self.input.set((now_ms, timestamp_ms));
    }

    /// A message of input `topic` at `offset` was stamped `behind_ms` before a message its topic
    /// partition delivered earlier, more than the reorder window (`max_disorder_ms`) reaches.
    /// Counted each time; said at once the first time, then at most once a minute, with how
    /// many came since and the furthest behind.
    pub fn out_of_order(&self, topic: usize, offset: i64, behind_ms: i64, max_disorder_ms: u64) {
        self.out_of_order[topic.min(1)].inc();
        let mut unsaid = self.out_of_order_unsaid.get();
        unsaid.count += 1;
        unsaid.furthest_ms = unsaid.furthest_ms.max(behind_ms);
        let now = wall_ms();
        if unsaid
            .said_at
            .is_some_and(|at| now - at < OUT_OF_ORDER_SAID_EVERY_MS)
        {
            self.out_of_order_unsaid.set(unsaid);
            return;
        }
        tracing::warn!(
            partition = self.partition,
            topic,
            offset,
            behind_ms,
            messages = unsaid.count,
            furthest_behind_ms = unsaid.furthest_ms,
            max_disorder_ms,
            "input out of timestamp order: messages stamped before one this topic partition delivered earlier. Several producers (or producers with skewed clocks) write it, and calls without ids may pair otherwise than they happened: run with --max-disorder at least as wide as furthest_behind_ms (docs/OPERATIONS.md, \"Out-of-order input\")"
        );
        self.out_of_order_unsaid.set(OutOfOrder {
            said_at: Some(now),
            count: 0,
            furthest_ms: 0,
        });
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

    /// A message was decoded and applied to the correlator (an event of this kind and event
    /// time), with this outcome.
    pub fn event_applied(&self, topic: usize, kind: EventKind, time: Timestamp, outcome: &Outcome) {
        self.received[topic].of(kind).inc();
        if matches!(outcome, Outcome::Pending | Outcome::Held) {
            // It may open an entry (now, or when the reorder window lets it go).
            self.opened.borrow_mut().note(time, self.input.get().0);
        }
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
    /// Its end-to-end latency runs from the Kafka timestamp of the input message that closed it;
    /// a record closed by a timer (a timeout, a grace) has none.
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
        if let (_, Some(input_ms)) = self.input.get() {
            self.metrics
                .end_to_end_latency
                .observe(now_ms.saturating_sub(input_ms).max(0) as f64 / 1000.0);
        }
    }

    /// A chunk of input was applied, in `elapsed`.
    pub fn chunk_applied(&self, elapsed: Duration) {
        self.metrics.chunk_duration.observe(elapsed.as_secs_f64());
    }

    /// The state's size; with `full`, also the age of its oldest pending entry (a scan, so only
    /// at punctuation): the wall-clock time since the task read the event that opened it, not
    /// its event time, which in a replay is months old.
    pub fn state_sampled(&self, correlator: &Correlator, full: bool) {
        self.pending_calls.set(correlator.pending_len() as i64);
        self.pending_bytes.set(correlator.pending_bytes() as i64);
        self.held_events.set(correlator.held_len() as i64);
        if full {
            self.forgotten_sessions
                .set(correlator.forgotten_sessions() as i64);
            let now = wall_ms();
            let opened = self.opened.borrow_mut().oldest(correlator.oldest_pending());
            let age = opened.map_or(0.0, |at| (now - at).max(0) as f64 / 1000.0);
            self.oldest_pending_age.set(age);
        }
    }

    /// `last_timestamp_ms` is the Kafka timestamp of the last message processed: what the lag
    /// in seconds is measured against while input waits (`LagSecondsObserved`).
    pub fn lag_sampled(&self, _now_ms: i64, last_timestamp_ms: i64) {
        self.metrics
            .processed
            .set(self.partition, last_timestamp_ms);
    }

    /// The task stopped: its partition's series go (another instance may own it now).
    pub fn stopped(&self) {
        let p = self.partition.to_string();
        let m = &self.metrics;
        let _ = m.pending_calls.remove_label_values(&[&p]);
        let _ = m.pending_bytes.remove_label_values(&[&p]);
        let _ = m.held_events.remove_label_values(&[&p]);
        let _ = m.forgotten_sessions.remove_label_values(&[&p]);
        let _ = m.oldest_pending_age.remove_label_values(&[&p]);
        let _ = m.consumer_lag_seconds.remove_label_values(&[&p]);
        m.processed.forget(self.partition);
        tracing::debug!(partition = self.partition, "partition task stopped");
    }
}

/// When a partition task opened its pending entries, by their event time: enough to tell how
/// long (wall clock) the oldest pending entry has waited, which the correlator — which knows
/// event time only — cannot.
///
/// Keyed by the whole second of event time, the wall clock of the first event of that second
/// that may have opened an entry; keys before the oldest pending entry are dropped at each
/// sample. Entries restored from the changelog count from the restore (`since`). At most
/// [`Opened::MAX_KEYS`] seconds are kept: past that, newer entries count from the restore too
/// should they become the oldest.
struct Opened {
    at: BTreeMap<i64, i64>,
    /// The last key noted: events come mostly in event-time order, so most notes stop here.
    last: Option<i64>,
    /// Wall clock when the task started.
    since: i64,
}

impl Opened {
    const MAX_KEYS: usize = 16_384;

    fn new(since: i64) -> Self {
        Opened {
            at: BTreeMap::new(),
            last: None,
            since,
        }
    }

    /// An event of event time `time`, read at wall clock `now_ms`, may have opened an entry.
    fn note(&mut self, time: Timestamp, now_ms: i64) {
        let key = time.millis().div_euclid(1000);
        if self.last == Some(key) {
            return;
        }
        if self.at.len() < Self::MAX_KEYS || self.at.contains_key(&key) {
            self.at.entry(key).or_insert(now_ms);
            self.last = Some(key);
        }
    }

    /// When the entry of event time `oldest` (the correlator's oldest pending) was opened; the
    /// notes of older seconds are dropped. `None` without pending entries.
    fn oldest(&mut self, oldest: Option<Timestamp>) -> Option<i64> {
        let Some(oldest) = oldest else {
            self.at.clear();
            self.last = None;
            return None;
        };
        let key = oldest.millis().div_euclid(1000);
        if self.at.first_key_value().is_some_and(|(k, _)| *k < key) {
            self.at = self.at.split_off(&key);
            self.last = None;
        }
        Some(self.at.get(&key).copied().unwrap_or(self.since))
    }
}

/// `toolcalls_input_events_total` of one input topic, by event kind.
/// How often out-of-order input is said at most, per partition task.
const OUT_OF_ORDER_SAID_EVERY_MS: i64 = 60_000;

/// Out-of-order input not said yet, and when it was last said (wall clock, ms).
#[derive(Debug, Default, Clone, Copy)]
struct OutOfOrder {
    said_at: Option<i64>,
    count: u64,
    furthest_ms: i64,
}

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
    fn the_oldest_pending_entry_counts_from_when_it_was_read() {
        let t = |s: i64| Timestamp::from_millis(s * 1000);
        // The task started (restored its partition) at wall clock 1 000 ms.
        let mut opened = Opened::new(1_000);
        opened.note(t(100), 5_000);
        opened.note(t(100), 6_000);
        opened.note(t(50), 7_000);
        opened.note(t(200), 8_000);
        // A replayed event months older than the others is as old as the wall clock says.
        assert_eq!(opened.oldest(Some(t(50))), Some(7_000));
        // Its second closed: the next oldest counts from the first event of its second.
        assert_eq!(opened.oldest(Some(t(100))), Some(5_000));
        // Entries the task did not read (restored from the changelog) count from the restore.
        assert_eq!(opened.oldest(Some(t(10))), Some(1_000));
        assert_eq!(opened.oldest(None), None);
        assert!(opened.at.is_empty());
    }

    #[test]
    fn end_to_end_latency_runs_from_the_closing_message_and_timers_are_not_counted() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry);
        let t = PartitionTelemetry::new(&metrics, &["a".into(), "c".into()], 0);
        let record = months_old_record();
        t.input_taken(10_500, Some(10_000));
        t.record_published(&record, 10_500);
        // Timers fire: what they close has no input message.
        t.input_taken(20_000, None);
        t.record_published(&record, 20_000);
        let h = metrics.end_to_end_latency.clone();
        assert_eq!(h.get_sample_count(), 1);
        assert!(
            (h.get_sample_sum() - 0.5).abs() < 1e-9,
            "{}",
            h.get_sample_sum()
        );
    }

    /// A record whose events are dated 2026-01-01.
    fn months_old_record() -> ToolCallRecord {
        let mut c = toolcalls_core::Correlator::without_changelog(Default::default());
        let mut fx = toolcalls_core::Effects::default();
        for line in [
            r#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"a","time":"2026-01-01T00:00:00Z","tool":"T"}"#,
            r#"{"v":1,"kind":"completion","source":"s","session":"x","callId":"a","time":"2026-01-01T00:00:01Z","result":1}"#,
        ] {
            let e = toolcalls_model::Event::decode(line.as_bytes()).unwrap();
            c.apply(e, toolcalls_core::Position::new(0, 0), &mut fx);
        }
        fx.records.pop().expect("the call's record")
    }

    #[test]
    fn every_named_counter_moves_the_series_of_its_label() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry);
        let t = PartitionTelemetry::new(&metrics, &["a".into(), "c".into()], 3);
        for kind in EventKind::ALL {
            t.event_applied(1, kind, Timestamp::from_millis(0), &Outcome::Merged);
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
            t.event_applied(
                0,
                EventKind::Completion,
                Timestamp::from_millis(0),
                &outcome,
            );
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
            t.event_applied(0, EventKind::Announce, Timestamp::from_millis(0), &outcome);
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
