//! What the handlers share.

use super::deliver::Deliverer;
use super::metrics::Metrics;
use std::sync::Arc;
use toolcalls_model::redact::Redaction;

pub struct Shared {
    pub deliverer: Deliverer,
    pub metrics: Arc<Metrics>,
    /// `--max-body-bytes`, for the 413 answer.
    pub max_body_bytes: usize,
    /// Applied to every event before it is published.
    pub redaction: Redaction,
    /// The turns of large bodies (`--max-reads`, [`super::reading`]).
    pub readers: Arc<tokio::sync::Semaphore>,
    /// The receive times given to hook payloads, a millisecond of its own per session.
    pub stamps: super::stamps::Stamps,
}
