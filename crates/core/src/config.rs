//! [`Config`]: the tunables of the correlation rules.

use serde::{Deserialize, Serialize};

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
    /// starting new calls; an event that nothing holds, stamped this long before its scope's
    /// clock, is too old to tell from a copy of a forgotten call and is late. At least
    /// `call_timeout_ms` (the default: the same), so that no event is taken as late that could
    /// still be paired.
    pub dedupe_window_ms: u64,
    /// Most pending entries (calls and waiting results) a partition keeps; over it the oldest are
    /// closed as `Evicted` records.
    pub max_pending: usize,
    /// Most bytes of pending state (the estimate of
    /// [`Correlator::pending_bytes`](crate::Correlator::pending_bytes): entries, their payloads
    /// and their share of the indexes) a partition keeps; over it the oldest entries are closed
    /// as `Evicted` records, so a flood of large arguments cannot exhaust memory.
    pub max_pending_bytes: usize,
    /// Most closed ids remembered for de-duplication; over it the oldest are forgotten.
    pub max_remembered: usize,
    /// Most sessions (scopes) a partition keeps a note of after it forgot every call of theirs
    /// and dropped them: the event time up to which each forgot its calls, so that their events
    /// delivered again (a file read again) are late instead of calls opened a second time. Over
    /// it, the notes of the sessions that forgot longest ago (in event time) go; 0 keeps none.
    pub max_forgotten_sessions: usize,
    /// Most bytes the facts of one call may take in its record — hook decisions, approvals,
    /// execution timing and the attributes its events bring — besides its arguments and result.
    /// A fact that would take a call past it is refused (`Rejected("call_too_large")`, which the
    /// processor dead-letters): so many facts for one call are a producer gone wrong, and a
    /// record must fit in a Kafka message.
    pub max_facts_bytes: usize,
    /// A session (a scope) that sent nothing for this long of wall clock, as the runtime tells it
    /// (the processor; local mode has no wall clock), goes idle: its deadlines then follow the
    /// partition's stream time instead of its own clock (docs/ARCHITECTURE.md, Correlation →
    /// Time).
    pub session_idle_ms: u64,
    /// The reorder window: how far, in event time, an event may arrive behind a later event of
    /// its session. Events are held until their session has shown an event this much later (or,
    /// with a wall clock, for this long of it; or the input ends) and applied in event-time
    /// order. 0 applies events in arrival order (docs/ARCHITECTURE.md, Correlation → Disorder).
    pub max_disorder_ms: u64,
    /// How many input topics feed the correlator (the processor: 2). Stream time waits until
    /// events of each have been seen and then follows the slowest (see
    /// [`Correlator::advance`](crate::Correlator::advance) for moving past a topic that has gone
    /// quiet).
    pub input_topics: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            call_timeout_ms: 30 * 60 * 1000,
            turn_grace_ms: 30 * 1000,
            orphan_grace_ms: 5 * 60 * 1000,
            idempotency_window_ms: 10 * 60 * 1000,
            dedupe_window_ms: 30 * 60 * 1000,
            max_pending: 100_000,
            max_pending_bytes: 256 << 20,
            max_remembered: 200_000,
            max_forgotten_sessions: 100_000,
            max_facts_bytes: 4 << 20,
            session_idle_ms: 30 * 1000,
            max_disorder_ms: 0,
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
        if self.max_pending_bytes == 0 {
            return Err("max_pending_bytes must be greater than 0".into());
        }
        if self.max_facts_bytes == 0 {
            return Err("max_facts_bytes must be greater than 0".into());
        }
        if self.call_timeout_ms == 0 {
            return Err("call_timeout_ms must be greater than 0".into());
        }
        Ok(())
    }
}
