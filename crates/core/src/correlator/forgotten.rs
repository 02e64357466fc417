//! Events too old for their scope to tell from a copy of a call it has forgotten
//! (docs/ARCHITECTURE.md, Correlation → Repeats).
//!
//! A closed call is remembered for `dedupe_window` of its scope's clock after it closed, so that
//! a copy of one of its events is `Late`, not a second record. Past that the call is forgotten,
//! and a copy would open a new entry under the same record name: a re-read file's announce a
//! `TimedOut` call, its result an `Orphaned` one, published over the record the call had —
//! the ledger's latest word on a call that succeeded would be that it timed out.
//!
//! A call is forgotten once its scope's clock reaches `dedupe_window` after it closed, so every
//! event of a forgotten call is stamped at least `dedupe_window` before that clock. So an event
//! that no entry holds (by id, repeat key or idempotency key) and that is stamped that far
//! behind its scope's clock is taken as `Late` instead of opening an entry: a
//! copy of a forgotten call, or an event so late that its entry would close at once by its own
//! deadline when `dedupe_window` is at least `call_timeout` (the default), with a record that
//! says nothing true. A scope that went idle keeps its own clock (its deadlines follow the
//! partition's), and a scope not seen yet has none: neither refuses anything here.

use super::Correlator;
use crate::state::ScopeIx;
use toolcalls_model::Timestamp;

impl Correlator {
    /// Whether an event of scope `ix` at `time`, which no entry holds, is stamped at least
    /// `dedupe_window` before the scope's clock: too old to tell from a copy of a call the scope
    /// has forgotten.
    pub(super) fn older_than_remembered(&self, ix: ScopeIx, time: Timestamp) -> bool {
        let window = self.config.dedupe_window_ms;
        self.scopes
            .get(ix)
            .clock
            .is_some_and(|clock| time.plus_millis(window) <= clock)
    }
}
