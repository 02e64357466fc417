//! What every partition task shares.

use super::admit::PoisonRegistry;
use super::validate::Limits;
use crate::client::SharedProducer;
use crate::failpoint::Failpoints;
use crate::input::batch::BatchPool;
use crate::metrics::Metrics;
use crate::output::Topics;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct TaskEnv {
    pub producer: SharedProducer,
    pub topics: Topics,
    pub limits: Limits,
    /// An input topic quiet this long no longer holds stream time back.
    pub input_idle: Duration,
    /// How long a message waits for the partition's other input topic (see
    /// [`crate::input::align`]).
    pub align_wait: Duration,
    /// The reorder window (`--max-disorder`): input stamped out of order by more than it reaches
    /// is counted and said (see `stamps.rs`).
    pub max_disorder_ms: u64,
    /// Bytes of output the tasks may hold back, together, while a checkpoint commits.
    pub max_held_bytes: usize,
    /// Bytes of output the tasks hold back now.
    pub held_bytes: Arc<AtomicUsize>,
    /// Input messages whose processing panicked: after the rewind that follows, they are
    /// dead-lettered instead of applied again.
    pub poisoned: PoisonRegistry,
    pub metrics: Metrics,
    pub failpoints: Arc<Failpoints>,
    /// Where spent input batches go back to the consumer thread.
    pub batches: Arc<BatchPool>,
    /// Applied to every record before it leaves the process (published or answered).
    pub redaction: toolcalls_model::redact::Redaction,
    /// Converts published records to spans when they are exported (`--otlp-endpoint`).
    pub spans: Option<crate::spans::SpanMaker>,
}
