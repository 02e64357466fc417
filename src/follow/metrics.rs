//! The follower's metrics, on `/metrics` of `--metrics-addr` (the processor's conventions:
//! `toolcalls_<subsystem>_<name>_<unit>`, an explicit registry).

use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct FollowMetrics {
    registry: Registry,
    /// Events the adapters read from changed files (each parse counts what is new to it).
    pub read: IntCounterVec,
    /// Events published and acknowledged, by format.
    pub sent: IntCounterVec,
    /// Events said and left out, by format and why: too large for a Kafka message by the
    /// producer's limit (`too_large`), or refused by the brokers for the topic's
    /// (`refused_too_large`).
    pub left_out: IntCounterVec,
    /// Events the redaction rules changed before they were sent, by format.
    pub redacted: IntCounterVec,
    /// Lines (or parts of a document) the adapter could not read, each counted once when said.
    pub bad_lines: IntCounterVec,
    /// Deliveries that failed (the follower then stops; a restart resumes from the checkpoints).
    pub send_errors: IntCounter,
    /// Bytes of each followed file not yet delivered.
    behind: IntGaugeVec,
    /// How far each followed file is delivered (its checkpoint's position), by its `file`
    /// label: a scrape measures the file again, so that the bytes behind are those of now also
    /// while a delivery waits on the brokers (when the follower itself looks at nothing).
    delivered_to: Arc<Mutex<HashMap<String, (PathBuf, u64)>>>,
    /// Paths that cannot be read now: directories that cannot be searched, files whose last read
    /// failed, named files that cannot be looked up.
    pub unreadable: IntGauge,
    /// When a checkpoint was last written (Unix seconds): `time() - …` is its age.
    pub checkpoint_time: Gauge,
}

/// What bounds the clients of the metrics listener: a few scrapers, each sending its request
/// within seconds.
const SCRAPERS: toolcalls_processor::listener::Bounds = toolcalls_processor::listener::Bounds {
    max_connections: 64,
    read_timeout: std::time::Duration::from_secs(10),
};

impl FollowMetrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("registered once");
            c
        };
        let read = counter_vec(
            "toolcalls_producer_events_read_total",
            "Events read from followed files that were not delivered before, by format.",
            &["format"],
        );
        let sent = counter_vec(
            "toolcalls_producer_events_sent_total",
            "Events published and acknowledged, by format.",
            &["format"],
        );
        let left_out = counter_vec(
            "toolcalls_producer_events_left_out_total",
            "Events said and left out, by format and reason (too_large: over the producer's message.max.bytes; refused_too_large: refused by the brokers for the topic's max.message.bytes).",
            &["format", "reason"],
        );
        let redacted = counter_vec(
            "toolcalls_producer_events_redacted_total",
            "Events the redaction rules changed before they were sent, by format.",
            &["format"],
        );
        let bad_lines = counter_vec(
            "toolcalls_producer_bad_lines_total",
            "Lines (or parts of a document) of followed files that could not be read, each counted once when said, by format: their events are not delivered.",
            &["format"],
        );
        let send_errors = IntCounter::new(
            "toolcalls_producer_send_errors_total",
            "Deliveries that failed.",
        )
        .expect("valid metric");
        let behind = IntGaugeVec::new(
            Opts::new(
                "toolcalls_producer_file_bytes_behind",
                "Bytes of a followed file not yet delivered (a partial last line included).",
            ),
            &["file"],
        )
        .expect("valid metric");
        let unreadable = IntGauge::new(
            "toolcalls_producer_unreadable_paths",
            "Followed paths that cannot be read now (a directory that cannot be searched, a file whose last read failed); nothing under them is followed until they can be.",
        )
        .expect("valid metric");
        let checkpoint_time = Gauge::new(
            "toolcalls_producer_last_checkpoint_timestamp_seconds",
            "When a checkpoint was last written, in Unix seconds.",
        )
        .expect("valid metric");
        for m in [
            Box::new(send_errors.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(behind.clone()),
            Box::new(unreadable.clone()),
            Box::new(checkpoint_time.clone()),
        ] {
            registry.register(m).expect("registered once");
        }
        FollowMetrics {
            registry,
            read,
            sent,
            left_out,
            redacted,
            bad_lines,
            send_errors,
            behind,
            delivered_to: Arc::default(),
            unreadable,
            checkpoint_time,
        }
    }

    /// File `path`, `size` bytes long, is delivered up to `position`.
    pub fn delivered_to(&self, path: &Path, position: u64, size: u64) {
        let label = path.display().to_string();
        self.behind
            .with_label_values(&[&label])
            .set(i64::try_from(size.saturating_sub(position)).unwrap_or(i64::MAX));
        let mut files = self.delivered_to.lock().unwrap_or_else(|e| e.into_inner());
        files.insert(label, (path.to_owned(), position));
    }

    /// File `path` is followed no more: its series goes.
    pub fn forget_file(&self, path: &Path) {
        let label = path.display().to_string();
        let _ = self.behind.remove_label_values(&[&label]);
        let mut files = self.delivered_to.lock().unwrap_or_else(|e| e.into_inner());
        files.remove(&label);
    }

    /// The bytes behind of every followed file, from its size now.
    fn measure_behind(&self) {
        let files = self.delivered_to.lock().unwrap_or_else(|e| e.into_inner());
        for (label, (path, position)) in files.iter() {
            if let Ok(m) = std::fs::metadata(path) {
                let behind = m.len().saturating_sub(*position);
                self.behind
                    .with_label_values(&[label])
                    .set(i64::try_from(behind).unwrap_or(i64::MAX));
            }
        }
    }

    /// Makes the series of a format's counters, at 0, once its first file is read: a counter
    /// that first appears at 1 shows Prometheus' `increase()` no increase, and the alerts on
    /// events left out would miss the first.
    pub fn format_seen(&self, format: &str) {
        for counter in [&self.read, &self.sent, &self.redacted, &self.bad_lines] {
            counter.with_label_values(&[format]);
        }
        for reason in crate::left_out::REASONS {
            self.left_out.with_label_values(&[format, reason]);
        }
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        self.measure_behind();
        let mut out = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }

    /// Serves `GET /metrics` and `GET /healthz` on `addr` from a thread of its own; returns the
    /// bound address.
    pub fn serve(&self, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
        use anyhow::Context;
        // Time: the listener's read timeouts.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("starting the metrics listener")?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(addr))
            .with_context(|| format!("cannot listen on --metrics-addr {addr}"))?;
        let bound = listener.local_addr()?;
        let me = self.clone();
        let app = axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let body = me.render();
                    async move {
                        (
                            [(
                                axum::http::header::CONTENT_TYPE,
                                "text/plain; version=0.0.4",
                            )],
                            body,
                        )
                    }
                }),
            )
            // The follower answers: its loop runs on another thread, and stops the process
            // when it fails.
            .route("/healthz", axum::routing::get(|| async { "ok\n" }));
        std::thread::spawn(move || {
            // Stopped with the process.
            let (_keep, never) = tokio::sync::watch::channel(false);
            runtime.block_on(toolcalls_processor::listener::serve(
                listener, app, SCRAPERS, never,
            ));
        });
        Ok(bound)
    }
}
