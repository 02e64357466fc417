//! Running the core over a finite input (the embedded mode, tests and benchmarks).

use crate::{Config, Correlator, Effects, Outcome, Position};
use toolcalls_model::{Event, Phase, ToolCallRecord};

/// How calls still pending at the end of a finite input are closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FinishMode {
    /// Let every deadline run out, as if time went on with no more events: calls of ended turns
    /// become Interrupted, denied calls Denied, the rest TimedOut; waiting results Orphaned.
    #[default]
    Deadlines,
    /// Every pending call becomes Interrupted ("input ended"); waiting results Orphaned.
    Interrupt,
    /// Publish nothing for them: they stay pending (and are reported as such).
    Keep,
}

/// What a replay produced.
#[derive(Debug, Default)]
pub struct Replay {
    /// Records in the order they were published.
    pub records: Vec<ToolCallRecord>,
    /// The outcome of every input event, by input index (for an event the reorder window held,
    /// its outcome when it was applied).
    pub outcomes: Vec<Outcome>,
    /// Calls and results still pending at the end (only with [`FinishMode::Keep`]).
    pub pending: Vec<ToolCallRecord>,
}

/// Applies `events` in order to one correlator (positions `0:0`, `0:1`, …) and closes what is
/// still pending by `finish`.
pub fn replay(
    config: &Config,
    events: impl IntoIterator<Item = Event>,
    finish: FinishMode,
) -> Replay {
    let mut c = Correlator::without_changelog(config.clone());
    let mut out = Effects::default();
    let mut outcomes = Vec::new();
    let settle = |outcomes: &mut Vec<Outcome>, out: &mut Effects| {
        for r in out.released.drain(..) {
            outcomes[r.pos.offset as usize] = r.outcome;
        }
    };
    for (i, event) in events.into_iter().enumerate() {
        outcomes.push(c.apply(event, Position::new(0, i as i64), &mut out));
        settle(&mut outcomes, &mut out);
    }
    c.release_all(&mut out);
    settle(&mut outcomes, &mut out);
    let mut pending = Vec::new();
    match finish {
        FinishMode::Deadlines => c.end_of_input(&mut out),
        FinishMode::Interrupt => c.close_all(Phase::Interrupted, "input ended", &mut out),
        FinishMode::Keep => pending = c.pending_views().collect(),
    }
    Replay {
        records: out.records,
        outcomes,
        pending,
    }
}
