//! Prometheus metrics, registered in an explicit [`Registry`] handed in at start (no global
//! registry), named `toolcalls_<subsystem>_<name>_<unit>`. Labels are bounded: topic, partition,
//! kind, strategy, phase, reason, result — never a session or a call id.

use crate::telemetry::processed::ProcessedTimes;
use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use std::sync::Arc;
use toolcalls_model::{Phase, Strategy};

/// Every `reason` a message can be dead-lettered for: the decoding errors' labels
/// (`toolcalls_model::DecodeError::reason`), the processor's own checks, a panic, and the
/// correlator's refusals. Their series of `toolcalls_dlq_messages_total` exist from the start, at
/// zero, so that a rate over them is 0 rather than no data.
pub fn dead_letter_reasons() -> impl Iterator<Item = &'static str> {
    let own = ["far_future", "key_mismatch", "panic"];
    let refusals = toolcalls_core::REFUSAL_REASONS;
    toolcalls_model::DecodeError::REASONS
        .into_iter()
        .chain(own)
        .chain(refusals)
}

/// The `result` labels of `toolcalls_output_transactions_total`.
pub const TRANSACTION_RESULTS: [&str; 3] = ["committed", "aborted", "fenced"];

/// Every metric of the runtime.
#[derive(Clone)]
pub struct Metrics {
    /// Input messages read, by topic and event kind (`invalid` when not decodable).
    pub events_received: IntCounterVec,
    /// Input messages stamped out of order by more than the reorder window reaches, by topic.
    pub out_of_order: IntCounterVec,
    /// Records published, by phase.
    pub records_emitted: IntCounterVec,
    /// Completions linked to their call, by strategy.
    pub matches: IntCounterVec,
    /// Outcome of every applied event (pending, matched, merged, duplicate, …).
    pub event_outcomes: IntCounterVec,
    /// Messages sent to the dead-letter topic, by reason.
    pub dead_letters: IntCounterVec,
    /// Repeats of events already merged.
    pub duplicates: IntCounter,
    /// Pending calls and waiting results per partition.
    pub pending_calls: IntGaugeVec,
    pub pending_bytes: IntGaugeVec,
    /// Events held in the reorder window per partition.
    pub held_events: IntGaugeVec,
    /// Sessions noted after they forgot every call, per partition.
    pub forgotten_sessions: IntGaugeVec,
    pub oldest_pending_age: prometheus::GaugeVec,
    /// Pending entries closed by the state cap.
    pub evictions: IntCounter,
    /// Time to apply one chunk of input messages (at most 128) in a partition task.
    pub chunk_duration: Histogram,
    /// Event time from announce to completion of published records.
    pub call_duration: Histogram,
    /// Wall clock when a record is handed to the producer minus the Kafka timestamp of the input
    /// message that closed it.
    pub end_to_end_latency: Histogram,
    /// Input messages not yet delivered to the processor, per input topic and partition.
    pub consumer_lag_records: IntGaugeVec,
    /// 0 when nothing waits, otherwise the wall clock minus the Kafka timestamp of the last
    /// message processed, per partition.
    pub consumer_lag_seconds: prometheus::GaugeVec,
    /// Transactions (or at-least-once checkpoints) by result; `fenced` counts producers fenced.
    pub transactions: IntCounterVec,
    /// Attempts to abort a transaction that the broker did not confirm in time, and were repeated.
    pub abort_retries: IntCounter,
    pub commit_duration: Histogram,
    /// Errors reading the input that are not the brokers' being out of reach: `consume` (a
    /// message librdkafka could not read) and `seek` (a partition's seek on activation failed).
    pub consumer_errors: IntCounterVec,
    /// Group rebalance events by kind (assign, revoke, lost).
    pub rebalances: IntCounterVec,
    pub restore_duration: Histogram,
    pub restore_records: IntCounter,
    pub produce_errors: IntCounter,
    pub partitions_assigned: IntGauge,
    pub partitions_paused: IntGauge,
    pub ready: IntGauge,
    pub build_info: IntGaugeVec,
    /// The Kafka timestamp of the last message each partition task processed (not exported:
    /// the lag in seconds is computed from it).
    pub(crate) processed: Arc<ProcessedTimes>,
}

/// Registers `metric` in `r`.
fn register<M: Collector + Clone + 'static>(r: &Registry, metric: M) -> M {
    r.register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        r,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    register(r, IntCounter::new(name, help).expect("valid metric"))
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        r,
        IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

fn fgauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::GaugeVec {
    register(
        r,
        prometheus::GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    register(r, IntGauge::new(name, help).expect("valid metric"))
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    register(r, Histogram::with_opts(opts).expect("valid metric"))
}

impl Metrics {
    /// Registers every metric in `registry`. Panics when called twice on one registry.
    pub fn new(registry: &Registry) -> Self {
        let r = registry;
        let latency = prometheus::exponential_buckets(0.001, 4.0, 10).expect("valid buckets");
        let m = Metrics {
            events_received: counter_vec(r, "toolcalls_input_events_total", "Input messages read, by topic and event kind.", &["topic", "kind"]),
            out_of_order: counter_vec(r, "toolcalls_input_out_of_order_total", "Input messages stamped earlier than a message their topic partition delivered before them, by more than the reorder window (--max-disorder) reaches: several producers, or skewed clocks, interleave there, and calls without ids may pair otherwise than they happened. By topic.", &["topic"]),
            records_emitted: counter_vec(r, "toolcalls_output_records_total", "ToolCall records published, by phase.", &["phase"]),
            matches: counter_vec(r, "toolcalls_correlation_matches_total", "Results linked to their call, by strategy.", &["strategy"]),
            event_outcomes: counter_vec(r, "toolcalls_correlation_outcomes_total", "What happened to each applied event; an event the reorder window held counts as held when it comes and under its outcome when applied.", &["outcome"]),
            dead_letters: counter_vec(r, "toolcalls_dlq_messages_total", "Messages sent to the dead-letter topic, by reason.", &["reason"]),
            duplicates: counter(r, "toolcalls_correlation_duplicates_total", "Repeated events merged into a call already seen."),
            pending_calls: gauge_vec(r, "toolcalls_state_pending_calls", "Pending calls and waiting results, per partition.", &["partition"]),
            pending_bytes: gauge_vec(r, "toolcalls_state_pending_bytes", "Estimated memory of the pending state, per partition.", &["partition"]),
            held_events: gauge_vec(r, "toolcalls_state_held_events", "Events held in the reorder window (--max-disorder), per partition.", &["partition"]),
            forgotten_sessions: gauge_vec(r, "toolcalls_state_forgotten_sessions", "Sessions noted after every call of theirs was forgotten, so that their events delivered again are late (at most --max-forgotten-sessions), per partition.", &["partition"]),
            oldest_pending_age: fgauge_vec(r, "toolcalls_state_oldest_pending_age_seconds", "Wall-clock time the oldest pending entry has waited since the processor read the event that opened it (since the restore, for entries restored from the changelog), per partition.", &["partition"]),
            evictions: counter(r, "toolcalls_state_evictions_total", "Pending entries closed as Evicted by the state cap."),
            chunk_duration: histogram(r, "toolcalls_processing_batch_duration_seconds", "Time to decode, correlate and publish one chunk (at most 128) of input messages.", latency.clone()),
            call_duration: histogram(r, "toolcalls_call_duration_seconds", "Announce to completion, in event time, of published records.", prometheus::exponential_buckets(0.01, 4.0, 12).expect("valid buckets")),
            end_to_end_latency: histogram(r, "toolcalls_output_end_to_end_latency_seconds", "Wall clock when a record is handed to the producer minus the Kafka timestamp of the input message that closed it (records closed by a timeout are not counted).", prometheus::exponential_buckets(0.01, 4.0, 12).expect("valid buckets")),
            consumer_lag_records: gauge_vec(r, "toolcalls_consumer_lag_records", "Input messages not yet delivered to the processor (last stable offset minus position, from librdkafka statistics), per input topic and partition.", &["topic", "partition"]),
            consumer_lag_seconds: fgauge_vec(r, "toolcalls_consumer_lag_seconds", "How far behind the input a partition is: 0 when nothing waits, otherwise the wall clock minus the Kafka timestamp of the last message processed, per partition.", &["partition"]),
            transactions: counter_vec(r, "toolcalls_output_transactions_total", "Batches committed or aborted (at-least-once checkpoints included), and producers fenced.", &["result"]),
            abort_retries: counter(r, "toolcalls_output_abort_retries_total", "Aborts of a transaction that the broker did not confirm in time and were tried again."),
            commit_duration: histogram(r, "toolcalls_output_commit_duration_seconds", "Time to commit one batch.", latency.clone()),
            consumer_errors: counter_vec(r, "toolcalls_consumer_errors_total", "Errors reading the input other than the brokers being out of reach, by kind: consume (a message librdkafka could not read), seek (a partition's seek on activation failed; it stays paused and is sought again).", &["kind"]),
            rebalances: counter_vec(r, "toolcalls_group_rebalances_total", "Rebalance events, by kind (assign, revoke, lost).", &["kind"]),
            restore_duration: histogram(r, "toolcalls_restore_duration_seconds", "Time to rebuild a partition's state from the changelog.", latency),
            restore_records: counter(r, "toolcalls_restore_records_total", "Changelog records read while restoring."),
            produce_errors: counter(r, "toolcalls_output_produce_errors_total", "Failed produce requests (records, changelog, dead letters)."),
            partitions_assigned: gauge(r, "toolcalls_group_partitions_assigned", "Input partitions (of the announce topic) owned by this instance."),
            partitions_paused: gauge(r, "toolcalls_consumer_partitions_paused", "Partitions whose input is held back by back-pressure."),
            ready: gauge(r, "toolcalls_ready", "1 when every assigned partition is restored and processing."),
            build_info: gauge_vec(r, "toolcalls_build_info", "Build information (always 1).", &["version"]),
            processed: Arc::default(),
        };
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        // Pre-create the bounded label sets so dashboards and alerts see zeros, not gaps.
        for p in Phase::ALL.into_iter().filter(|p| p.is_terminal()) {
            m.records_emitted.with_label_values(&[p.as_str()]);
        }
        for s in Strategy::ALL {
            m.matches.with_label_values(&[s.as_str()]);
        }
        for r in TRANSACTION_RESULTS {
            m.transactions.with_label_values(&[r]);
        }
        for r in dead_letter_reasons() {
            m.dead_letters.with_label_values(&[r]);
        }
        for k in ["assign", "revoke", "lost"] {
            m.rebalances.with_label_values(&[k]);
        }
        for k in ["consume", "seek"] {
            m.consumer_errors.with_label_values(&[k]);
        }
        m
    }
}

/// The sum of the counters and gauges named `name` in `registry` whose labels include every
/// `(label, value)` of `labels` (all of them for none): what a test or an embedding program reads
/// of a running processor.
pub fn sum(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .filter(|series| {
            labels.iter().all(|(k, v)| {
                series
                    .get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })
        .map(|series| series.get_counter().get_value() + series.get_gauge().get_value())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_in_an_explicit_registry_with_conventional_names() {
        let registry = Registry::new();
        let m = Metrics::new(&registry);
        m.dead_letters.with_label_values(&["not_json"]).inc();
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        for n in &names {
            assert!(n.starts_with("toolcalls_"), "{n}");
        }
        assert!(names.iter().any(|n| n == "toolcalls_dlq_messages_total"));
        assert!(prometheus::default_registry()
            .gather()
            .iter()
            .all(|f| !f.name().starts_with("toolcalls_")));
    }

    /// Every known dead-letter reason has its series from the start, at zero: an alert or a
    /// panel over `rate(toolcalls_dlq_messages_total[5m])` has data before the first dead letter.
    #[test]
    fn dead_letter_and_transaction_series_exist_before_the_first_of_them() {
        let registry = Registry::new();
        let _m = Metrics::new(&registry);
        for reason in dead_letter_reasons() {
            let series: Vec<_> = registry
                .gather()
                .into_iter()
                .filter(|f| f.name() == "toolcalls_dlq_messages_total")
                .flat_map(|f| f.get_metric().to_vec())
                .filter(|m| m.get_label().iter().any(|l| l.value() == reason))
                .collect();
            assert_eq!(series.len(), 1, "{reason}");
            assert_eq!(series[0].get_counter().get_value(), 0.0);
        }
        for result in TRANSACTION_RESULTS {
            assert_eq!(
                sum(
                    &registry,
                    "toolcalls_output_transactions_total",
                    &[("result", result)]
                ),
                0.0
            );
        }
        let text = {
            use prometheus::Encoder;
            let mut buf = Vec::new();
            prometheus::TextEncoder::new()
                .encode(&registry.gather(), &mut buf)
                .unwrap();
            String::from_utf8(buf).unwrap()
        };
        assert!(
            text.contains("toolcalls_dlq_messages_total{reason=\"key_mismatch\"} 0"),
            "{text}"
        );
        assert!(text.contains("toolcalls_output_transactions_total{result=\"fenced\"} 0"));
    }

    /// The decoding errors' reasons are among the known ones.
    #[test]
    fn decoding_reasons_are_known() {
        let cases: [&[u8]; 6] = [
            b"  ",
            b"[1]",
            b"{",
            b"{\"v\":2}",
            &[b'{', 0xff, b'}'],
            br#"{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","tol":1}"#,
        ];
        for payload in cases {
            let reason = toolcalls_model::Event::decode(payload)
                .unwrap_err()
                .reason();
            assert!(dead_letter_reasons().any(|r| r == reason), "{reason}");
        }
    }
}
