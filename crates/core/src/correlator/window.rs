//! The reorder window's held events and the indexes that find them (`disorder.rs` applies
//! them).

use crate::state::ScopeIx;
use crate::Position;
use std::collections::{BTreeMap, BTreeSet};
use toolcalls_model::{Event, Timestamp};

/// An event waiting in the window.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) event: Event,
    /// Its own input position: its provenance, and the key of a call it opens.
    pub(super) pos: Position,
    /// The wall clock when it came (`None` before the runtime first told the time).
    pub(super) wall: Option<Timestamp>,
}

/// The held events, by scope and event time, and the indexes that find them.
#[derive(Debug, Default)]
pub(super) struct Window {
    /// (scope, event time, sequence number) → the event. The sequence number is the changelog
    /// key; it grows with arrival, so it breaks ties of event time in arrival order.
    pub(super) held: BTreeMap<(ScopeIx, Timestamp, u64), Held>,
    /// Sequence number → its place in `held`.
    pub(super) by_seq: BTreeMap<u64, (ScopeIx, Timestamp)>,
    /// (wall time of arrival, sequence number) of the events that have one.
    pub(super) by_wall: BTreeSet<(Timestamp, u64)>,
    /// Some held event has no wall time yet (held before the runtime told the time).
    pub(super) unclocked: bool,
}

impl Window {
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    pub(super) fn insert(&mut self, ix: ScopeIx, seq: u64, held: Held) {
        let time = held.event.time;
        match held.wall {
            Some(w) => {
                self.by_wall.insert((w, seq));
            }
            None => self.unclocked = true,
        }
        self.by_seq.insert(seq, (ix, time));
        self.held.insert((ix, time, seq), held);
    }

    pub(super) fn remove(&mut self, key: (ScopeIx, Timestamp, u64)) -> Held {
        let held = self.held.remove(&key).expect("a held event");
        self.by_seq.remove(&key.2);
        if let Some(w) = held.wall {
            self.by_wall.remove(&(w, key.2));
        }
        held
    }

    /// The earliest held event of scope `ix`.
    pub(super) fn first_of(&self, ix: ScopeIx) -> Option<(ScopeIx, Timestamp, u64)> {
        let from = (ix, Timestamp(i64::MIN), 0);
        let to = (ix, Timestamp(i64::MAX), u64::MAX);
        self.held.range(from..=to).next().map(|(&k, _)| k)
    }
}
