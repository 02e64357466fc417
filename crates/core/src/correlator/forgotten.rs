//! Events too old for their scope to tell from a copy of a call it has forgotten
//! (docs/ARCHITECTURE.md, Correlation → Repeats), and the notes kept of scopes that forgot
//! everything.
//!
//! A closed call is remembered for `dedupe_window` of its scope's clock after it closed, so that
//! a copy of one of its events is `Late`, not a second record. Past that the call is forgotten,
//! and a copy would open a new entry under the same record name: a re-read file's announce a
//! `TimedOut` call, its result an `Orphaned` one, published over the record the call had —
//! the ledger's latest word on a call that succeeded would be that it timed out.
//!
//! Two rules tell such copies, for an event that no entry holds (by id, repeat key or
//! idempotency key):
//!
//! - A call is forgotten once its scope's clock reaches `dedupe_window` after it closed, so every
//!   event of a forgotten call is stamped at least `dedupe_window` before that clock. An event
//!   stamped that far behind its scope's clock is `Late`: a copy of a forgotten call, or an event
//!   so late that its entry would close at once by its own deadline when `dedupe_window` is at
//!   least `call_timeout` (the default), with a record that says nothing true.
//! - A scope also keeps the latest close of the calls it forgot by their time (`forgot_upto`),
//!   and an event stamped no later is `Late`. This covers what the first rule cannot: an idle
//!   scope forgets by the partition's stream time, not its own clock, and a scope dropped once
//!   everything in it was forgotten has no clock at all. Its note — the key and that time — is
//!   kept in `forgotten_scopes.rs` (in the changelog too, under the scope's own key), so that a
//!   session's file read again a day later, or after a restore, is late as it is while the
//!   session goes on. The notes are bounded by `max_forgotten_sessions`: past it, those that
//!   forgot longest ago go, and a copy of theirs opens calls again.
//!
//! A scope not seen yet, and not noted, has neither: nothing refuses its events here.

use super::Correlator;
use crate::state::ScopeIx;
use toolcalls_model::Timestamp;

impl Correlator {
    /// Whether an event of scope `ix` at `time`, which no entry holds, is too old to tell from a
    /// copy of a call the scope has forgotten: stamped at least `dedupe_window` before the
    /// scope's clock, or no later than the latest close of a call it forgot.
    pub(super) fn older_than_remembered(&self, ix: ScopeIx, time: Timestamp) -> bool {
        let window = self.config.dedupe_window_ms;
        let scope = self.scopes.get(ix);
        scope.forgot_upto.is_some_and(|upto| time <= upto)
            || scope
                .clock
                .is_some_and(|clock| time.plus_millis(window) <= clock)
    }

    /// Scope `ix` forgot a call of its own that closed at `closed_at`, by its deadline.
    pub(super) fn note_forgotten(&mut self, ix: ScopeIx, closed_at: Timestamp) {
        let scope = self.scopes.get_mut(ix);
        if scope.forgot_upto.is_some_and(|upto| upto >= closed_at) {
            return;
        }
        scope.forgot_upto = Some(closed_at);
        self.scope_changed(ix);
    }
}
