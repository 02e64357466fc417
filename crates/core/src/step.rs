//! What one step of a [`Correlator`](crate::Correlator) takes and gives besides the event: the
//! event's input [`Position`], its [`Outcome`], and the [`Effects`] (records) it produced.

use serde::{Deserialize, Serialize};
use toolcalls_model::{Strategy, ToolCallRecord};

/// Where an input event came from: the index of its input topic (0 = announce, 1 = completion, as
/// the runtime numbers them) and its offset. Record keys of calls without ids and changelog
/// positions are derived from it, so it must be stable across replays.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
pub struct Position {
    pub topic: u16,
    pub offset: i64,
}

impl Position {
    /// Before every input offset: the position of a changelog entry written again as it stands
    /// ([`Correlator::restate`](crate::Correlator::restate)) rather than changed by an input event; every restore accepts it.
    pub const RESTATED: Position = Position::new(0, -1);

    pub const fn new(topic: u16, offset: i64) -> Self {
        Position { topic, offset }
    }
}

/// What happened to one input event. Together with the records this accounts for every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It opened a new pending entry (a call, or a result waiting for its call).
    Pending,
    /// It was linked to its counterpart by this strategy (and a record may have been published).
    Matched(Strategy),
    /// It added facts to a pending entry (approval, hook decision, execution start/end).
    Merged,
    /// It repeated an event already merged (same call id); counted on the record, otherwise ignored.
    Duplicate,
    /// It arrived after its call was closed and published; counted, not merged.
    Late,
    /// An announce with an idempotency key seen inside the window; collapsed into that record.
    Collapsed,
    /// A turn event, applied to the pending calls of its turn.
    Applied,
    /// Refused; the reason is a short label (the event goes to the dead-letter topic).
    Rejected(&'static str),
}

impl Outcome {
    /// A bounded label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Matched(_) => "matched",
            Outcome::Merged => "merged",
            Outcome::Duplicate => "duplicate",
            Outcome::Late => "late",
            Outcome::Collapsed => "collapsed",
            Outcome::Applied => "applied",
            Outcome::Rejected(_) => "rejected",
        }
    }
}

/// What a step of the correlator produced: records to publish, in order.
///
/// Reused across calls by the caller (clear it after publishing) so the hot path does not allocate.
#[derive(Debug, Default)]
pub struct Effects {
    pub records: Vec<ToolCallRecord>,
}

impl Effects {
    pub fn clear(&mut self) {
        self.records.clear();
    }
}
