//! The exporter: one task that takes spans off a bounded queue and sends them in batches with
//! `opentelemetry-otlp`. The queue is offered spans with `try_send`, so a slow or absent
//! receiver costs dropped spans (counted), never a wait on the records' path.

use super::metrics::SpanMetrics;
use super::settings::SpanArgs;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use opentelemetry_sdk::Resource;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How often a failing receiver is reported in the log, at most.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The sending side of the queue.
#[derive(Clone)]
pub struct SpanQueue {
    tx: mpsc::Sender<SpanData>,
    metrics: SpanMetrics,
}

impl SpanQueue {
    /// Queues spans for export; what does not fit is dropped and counted.
    pub fn offer(&self, spans: impl IntoIterator<Item = SpanData>) {
        for span in spans {
            match self.tx.try_send(span) {
                Ok(()) => self.metrics.queued.inc(),
                Err(mpsc::error::TrySendError::Full(_)) => self.metrics.dropped_queue_full.inc(),
                Err(mpsc::error::TrySendError::Closed(_)) => self.metrics.dropped_stopped.inc(),
            }
        }
    }
}

/// Builds the OTLP exporter and starts its task. The task ends once every [`SpanQueue`] is
/// dropped and what was queued is sent.
pub fn start(
    args: &SpanArgs,
    url: String,
    instance_id: &str,
    metrics: SpanMetrics,
) -> Result<(SpanQueue, tokio::task::JoinHandle<()>), String> {
    let headers: HashMap<String, String> = args
        .otlp_header
        .iter()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url.clone())
        .with_timeout(args.otlp_timeout.0)
        .with_headers(headers)
        .build()
        .map_err(|e| format!("--otlp-endpoint {url}: {e}"))?;
    exporter.set_resource(&resource(instance_id));
    let (tx, rx) = mpsc::channel(args.otlp_queue);
    let batch = args.otlp_batch;
    let task_metrics = metrics.clone();
    let task = tokio::spawn(async move { send(exporter, rx, batch, task_metrics, url).await });
    Ok((SpanQueue { tx, metrics }, task))
}

/// `service.name` is `toolcalls` unless OTEL_SERVICE_NAME says otherwise; OTEL_RESOURCE_ATTRIBUTES
/// adds to it (Phoenix, for one, reads its project from `openinference.project.name`).
fn resource(instance_id: &str) -> Resource {
    let mut builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
        builder = builder.with_service_name("toolcalls");
    }
    builder
        .with_attribute(opentelemetry::KeyValue::new(
            "service.instance.id",
            instance_id.to_owned(),
        ))
        .build()
}

async fn send(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    max_batch: usize,
    metrics: SpanMetrics,
    url: String,
) {
    let mut batch = Vec::with_capacity(max_batch);
    let mut failing_since: Option<Instant> = None;
    let mut last_report: Option<Instant> = None;
    // Under load the queue fills while a request is out, so batches grow with the rate.
    while rx.recv_many(&mut batch, max_batch).await > 0 {
        let spans = batch.len();
        metrics.queued.sub(spans as i64);
        match exporter
            .export(std::mem::replace(&mut batch, Vec::with_capacity(max_batch)))
            .await
        {
            Ok(()) => {
                metrics.exported.inc_by(spans as u64);
                if let Some(since) = failing_since.take() {
                    tracing::info!(endpoint = %url, failing_for_s = since.elapsed().as_secs(), "span export works again");
                }
            }
            Err(error) => {
                metrics.dropped_export_failed.inc_by(spans as u64);
                failing_since.get_or_insert_with(Instant::now);
                if last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
                    last_report = Some(Instant::now());
                    tracing::warn!(
                        endpoint = %url,
                        %error,
                        dropped = spans,
                        "span export failed; these spans are dropped (records are not affected). Check that the OTLP receiver is up at --otlp-endpoint and accepts OTLP/HTTP protobuf"
                    );
                }
            }
        }
    }
}
