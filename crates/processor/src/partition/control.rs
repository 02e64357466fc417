//! What the coordinator and the HTTP side tell a partition task, and what it answers. Input
//! batches come on a channel of their own (see [`crate::input::flow::PartitionSink`]).

use rdkafka::error::KafkaError;
use tokio::sync::oneshot;
use toolcalls_model::{RecordId, SessionId, ToolCallRecord};

/// A control message to a partition task.
pub(crate) enum PartitionMsg {
    /// Wall-clock punctuation: an idle partition moves its stream time on by the wall time that
    /// passed since its last event, so deadlines fire without new input.
    Tick,
    /// Flush state to the changelog and report. Until `resume` fires, what the task produces
    /// belongs to the next transaction and is held back; `resume` dropped = stop.
    Checkpoint {
        reply: oneshot::Sender<Checkpointed>,
        resume: oneshot::Receiver<()>,
    },
    Query(Query),
}

/// A read of a partition's pending state for the query API.
pub(crate) enum Query {
    Get(RecordId, oneshot::Sender<Option<ToolCallRecord>>),
    Session(SessionId, oneshot::Sender<Vec<ToolCallRecord>>),
}

/// What a partition task reports at a checkpoint.
#[derive(Debug)]
pub(crate) struct Checkpointed {
    pub partition: i32,
    /// Next offsets to commit per input topic, when they moved since the last checkpoint.
    pub offsets: [Option<i64>; 2],
    /// Messages handed to the producer since the last checkpoint.
    pub produced: usize,
    /// Of which records and dead letters (the rest is changelog).
    pub outputs: usize,
    /// A produce call refused a message: the batch must be aborted.
    pub error: Option<KafkaError>,
    /// The spans of the records published since the last checkpoint (span export on): exported
    /// once the batch committed.
    pub spans: Vec<opentelemetry_sdk::trace::SpanData>,
}
