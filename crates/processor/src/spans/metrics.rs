//! The exporter's metrics (registered only while export is on).

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// The exporter's metrics.
#[derive(Clone)]
pub struct SpanMetrics {
    pub exported: IntCounter,
    pub queued: IntGauge,
    pub dropped_queue_full: IntCounter,
    pub dropped_export_failed: IntCounter,
    pub dropped_stopped: IntCounter,
}

impl SpanMetrics {
    /// Registers the span metrics in `registry` (only when export is on).
    pub fn new(registry: &Registry) -> Self {
        let exported = IntCounter::new(
            "toolcalls_spans_exported_total",
            "Records exported as OpenTelemetry spans and accepted by the receiver.",
        )
        .expect("valid metric");
        let queued = IntGauge::new(
            "toolcalls_spans_queued",
            "Spans waiting in the export queue.",
        )
        .expect("valid metric");
        let dropped = IntCounterVec::new(
            Opts::new(
                "toolcalls_spans_dropped_total",
                "Spans not exported, by reason: queue_full (the receiver is slower than the records), export_failed (the request failed), stopped (the exporter had stopped).",
            ),
            &["reason"],
        )
        .expect("valid metric");
        for m in [
            Box::new(exported.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(queued.clone()),
            Box::new(dropped.clone()),
        ] {
            registry.register(m).expect("metric registered once");
        }
        SpanMetrics {
            exported,
            queued,
            dropped_queue_full: dropped.with_label_values(&["queue_full"]),
            dropped_export_failed: dropped.with_label_values(&["export_failed"]),
            dropped_stopped: dropped.with_label_values(&["stopped"]),
        }
    }
}
