//! The attempts of a call that collapsed retries, as its record lists them: which attempt a
//! late result belongs to, and whether the correlator may have applied it no later than the
//! attempt the record holds (docs/ARCHITECTURE.md, Correlation → Idempotency keys).

use super::identity::result_says;
use super::input::Pos;
use toolcalls_model::{Event, EventBody};

/// One attempt of a call (its call id; the events without one together) as its record lists it.
#[derive(Default)]
pub(super) struct Attempt {
    /// When its announce was made, and where it is: attempts are numbered in the order they
    /// were applied, which is the order of their event times (or, where those tie, of their
    /// positions) for the runs this audits.
    pub(super) announce: Option<(i64, Pos)>,
    /// What each of its results listed says ([`result_says`]).
    pub(super) results: Vec<u64>,
    /// A result of it came after the record held one that says the same: the correlator takes
    /// it as late, but as the attempt answered from then on.
    pub(super) answered_late: bool,
}

impl Attempt {
    pub(super) fn listed(&mut self, pos: Pos, event: &Event) {
        match &event.body {
            EventBody::Announce(_) => {
                let at = (event.time.millis(), pos);
                self.announce = Some(self.announce.map_or(at, |a| a.min(at)));
            }
            EventBody::Completion(c) => self.results.push(result_says(c)),
            _ => {}
        }
    }
}

/// Whether the attempt announced at `own` may have been applied no later than the one at
/// `answered` (each `(event time, position)`). The correlator numbers attempts in the order it
/// applied their announces: the input's order, or event time's under a reorder window, which
/// the audit is not told. It takes either: a result it might have taken as late is not named.
pub(super) fn no_later_attempt(own: (i64, Pos), answered: (i64, Pos)) -> bool {
    let same_input = own.1 .0 == answered.1 .0;
    own.0 <= answered.0 || (same_input && own.1 <= answered.1)
}
