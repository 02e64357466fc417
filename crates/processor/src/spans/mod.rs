//! Records as OpenTelemetry spans (`--otlp-endpoint`): each record of a committed batch is
//! converted in its partition task (`convert.rs`), handed over by the coordinator once the batch
//! committed — an aborted batch's records are never exported — and sent by one exporter task
//! (`export.rs`) from a bounded queue. Options in `settings.rs`.

mod convert;
mod export;
mod metrics;
pub mod settings;

pub use convert::{session_trace, span_of, SpanMaker, OPERATION};
pub use export::{start, SpanQueue};
pub use metrics::SpanMetrics;
