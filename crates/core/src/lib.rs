//! The correlation core of toolcalls.
//!
//! One [`Correlator`] per input partition turns a stream of v1 [`Event`]s into ToolCall records. It
//! does no I/O and reads no clock: events, their input [`Position`]s and, for idle partitions, a
//! punctuation time come in; records and changelog operations come out.
//!
//! # Rules
//!
//! Everything happens inside a *scope* `(source, session, thread)`; native ids are never compared
//! across scopes. A completion is linked to a pending call by the first rule that finds one:
//!
//! 1. **call id** — the same native or stream id;
//! 2. **checksum** — the oldest pending call (created time, then arrival) with the same
//!    `sha256({tool,args})`;
//! 3. **tool FIFO** — the oldest pending call of the same tool;
//! 4. **oldest** — only when the completion carries no hint at all: the oldest pending call;
//! 5. otherwise the completion waits (its announce may still come) and after `orphan_grace` it is
//!    published as an `Orphaned` record.
//!
//! Fallbacks (2–4) never pair two events that both carry ids, and stay inside a turn when both
//! sides name one. Matching is symmetric: an announce first looks for a waiting completion with the
//! same rules. Every record carries the strategy, a confidence and how many candidates there were.
//!
//! # Time
//!
//! Stream time is the largest event time seen by the partition — with several input topics, the
//! smallest of their largest event times (a watermark), so a topic read ahead of the other does not
//! time out calls whose results are still unread; [`Correlator::advance`] moves it on for an idle
//! partition or past a topic that has gone quiet. Deadlines fire when stream time passes them, after the event that moved
//! it has been applied: a call without a result after `call_timeout` is `TimedOut`; pending calls of
//! an ended or aborted turn become `Interrupted` after `turn_grace`; a denied call that never reports
//! a result becomes `Denied` after `turn_grace`.
//!
//! # Invariants
//!
//! - Every input event is accounted for: its [`Outcome`] says whether it was merged, is pending,
//!   was a duplicate, or was rejected with a reason.
//! - Every announce ends in exactly one terminal record (Succeeded, Failed, Denied, Interrupted,
//!   TimedOut, Evicted), every unmatched completion in one `Orphaned` record (or `Evicted` when the
//!   state cap pushes it out). Records are published once; a later revision only follows when an
//!   idempotent retry collapses into a record already published.
//! - State is bounded by `max_pending`: over the cap the oldest pending entries are closed as
//!   `Evicted` records, never dropped silently.
//! - State is event-sourced: [`Correlator::take_changelog`] returns the entries changed since the
//!   last call, each with the input position that last changed it, and [`Correlator::restore`]
//!   rebuilds an identical correlator from the latest value of every key.

mod codec;
mod correlator;
mod replay;
mod state;

pub use codec::CodecError;
pub use correlator::{Correlator, RestoreError};
pub use replay::{replay, FinishMode, Replay};
pub use state::ChangelogOp;

use serde::{Deserialize, Serialize};
use toolcalls_model::{Strategy, ToolCallRecord};

#[cfg(doc)]
use toolcalls_model::Event;

/// Tunables of the correlation rules. Durations are in milliseconds of event time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields, default)]
pub struct Config {
    /// A call with no result this long after its announce becomes `TimedOut`.
    pub call_timeout_ms: u64,
    /// After `turn_end` / `turn_aborted` (or a denial), calls still pending wait this long for a
    /// late result before they close as `Interrupted` (or `Denied`).
    pub turn_grace_ms: u64,
    /// A result whose call is not (yet) announced waits this long before it is published `Orphaned`.
    pub orphan_grace_ms: u64,
    /// Announces sharing an idempotency key this close together collapse into one record.
    pub idempotency_window_ms: u64,
    /// Closed call ids are remembered this long, so late repeats count as duplicates instead of
    /// starting new calls.
    pub dedupe_window_ms: u64,
    /// Most pending entries (calls and waiting results) a partition keeps; over it the oldest are
    /// closed as `Evicted` records.
    pub max_pending: usize,
    /// Most closed ids remembered for de-duplication; over it the oldest are forgotten.
    pub max_remembered: usize,
    /// How many input topics feed the correlator (the processor: 2). Stream time waits until
    /// events of each have been seen and then follows the slowest (see [`Correlator::advance`] for
    /// moving past a topic that has gone quiet).
    pub input_topics: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            call_timeout_ms: 30 * 60 * 1000,
            turn_grace_ms: 30 * 1000,
            orphan_grace_ms: 5 * 60 * 1000,
            idempotency_window_ms: 10 * 60 * 1000,
            dedupe_window_ms: 10 * 60 * 1000,
            max_pending: 100_000,
            max_remembered: 200_000,
            input_topics: 1,
        }
    }
}

impl Config {
    /// Checks the values make sense together; the message says which knob to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_pending == 0 {
            return Err("max_pending must be at least 1".into());
        }
        if self.call_timeout_ms == 0 {
            return Err("call_timeout_ms must be greater than 0".into());
        }
        Ok(())
    }
}

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
    /// ([`Correlator::restate`]) rather than changed by an input event; every restore accepts it.
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
