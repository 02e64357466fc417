//! What the handlers share.

use super::deliver::Deliverer;
use super::metrics::Metrics;
use std::sync::Arc;

pub struct Shared {
    pub deliverer: Deliverer,
    pub metrics: Arc<Metrics>,
    /// `--max-body-bytes`, for the 413 answer.
    pub max_body_bytes: usize,
}
