//! What one step of a [`Correlator`](crate::Correlator) takes and gives besides the event: the
//! event's input [`Position`], its [`Outcome`], and the [`Effects`] (records) it produced.

use serde::{Deserialize, Serialize};
use toolcalls_model::{Event, EventKind, Strategy, ToolCallRecord};

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
    /// Held in the reorder window (`max_disorder_ms`): it is applied later, in event-time order,
    /// and its outcome then comes in [`Effects::released`].
    Held,
}

/// Every reason of [`Outcome::Rejected`].
pub const REFUSAL_REASONS: [&str; 2] = ["conflicting_call_id", "call_too_large"];

/// What a refusal's reason ([`Outcome::Rejected`]) means, and what to do about it.
pub fn refusal_explained(reason: &str) -> &'static str {
    match reason {
        "conflicting_call_id" => "a call of another tool holds this call id (pending, or remembered for dedupe_window after its record): an id names one call; give each call an id of its own",
        "call_too_large" => "its call's facts (hook decisions, approvals, execution timing, attributes) would take more than max_facts_bytes (--max-facts-bytes) in its record: too many or too large facts for one call, or a producer sending the same call's facts without end",
        _ => "refused by the correlation rules",
    }
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
            Outcome::Held => "held",
        }
    }
}

/// What a step of the correlator produced: records to publish, in order, and the outcomes of
/// events the reorder window held and has now applied.
///
/// Reused across calls by the caller (clear it after publishing) so the hot path does not allocate.
#[derive(Debug, Default)]
pub struct Effects {
    pub records: Vec<ToolCallRecord>,
    pub released: Vec<Released>,
}

impl Effects {
    pub fn clear(&mut self) {
        self.records.clear();
        self.released.clear();
    }
}

/// An event the reorder window held, now applied: where it came from and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    pub pos: Position,
    pub kind: EventKind,
    pub outcome: Outcome,
    /// The event itself when it was [`Outcome::Rejected`], for the dead-letter topic (the
    /// message it came in is gone by then).
    pub rejected: Option<Box<Event>>,
}
