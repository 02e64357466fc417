//! Provenance: the input positions of the events merged into each pending entry, and the record
//! it becomes (docs/ARCHITECTURE.md, "The record": `provenance`).
//!
//! A call keeps the position of its first event inline ([`Call::pos`](crate::state::Call)) and
//! the rare others (repeats, facts, collapsed retries, the events of the waiting result it took)
//! in its extras; a waiting result keeps a list. A result carries its own position
//! ([`Done::pos`]), so the completion that closes a call goes straight into the record without
//! being stored in the call. The handlers call [`Correlator::note_merged`] where an event goes
//! into an entry without opening or closing it, and [`Correlator::note_repeat`] for a copy of an
//! event the entry holds.
//!
//! A copy is listed like any event up to [`MAX_LISTED_REPEATS`] copies an entry, and only
//! counted past them: a producer that sends one event millions of times would otherwise make
//! the entry's changelog value and its record outgrow the 16 MiB a message may take, and stall
//! the partition. An unlisted copy brought nothing to the record, and the audit knows a copy
//! by what it says, listed or not.

use super::footprint::{call_bytes, waiting_bytes};
use super::Correlator;
use crate::state::{push_position, Call, Done, Live, WaitingResult, MAX_LISTED_REPEATS};
use crate::Position;
use toolcalls_model::record::Provenance;

impl Correlator {
    /// Notes a copy of an event that entry `seq` holds, counted on it already (its
    /// `duplicates`): listed while the entry has at most [`MAX_LISTED_REPEATS`] of them. The
    /// caller touches the entry.
    pub(super) fn note_repeat(&mut self, seq: u64) {
        let copies = match self.entries.live(seq) {
            Some(Live::Call(call)) => call.duplicates,
            Some(Live::Waiting(waiting)) => waiting.duplicates,
            None => return,
        };
        if copies <= MAX_LISTED_REPEATS {
            self.note_merged(seq);
        }
    }

    /// Notes that the event being applied went into pending entry `seq`: a repeat counted on it,
    /// a fact, a collapsed retry, or (for a new call) its announce. The caller touches the entry.
    pub(super) fn note_merged(&mut self, seq: u64) {
        let pos = self.pos;
        match self.entries.live_mut(seq) {
            Some(Live::Call(call)) => {
                if call.pos.get().is_none() {
                    if let Some(packed) = crate::state::PackedPos::new(pos) {
                        call.pos = packed; // inline: no change to the footprint
                        return;
                    }
                }
                let before = call_bytes(call);
                call.add_position(pos);
                self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
            }
            Some(Live::Waiting(waiting)) => {
                let before = waiting_bytes(waiting);
                push_position(&mut waiting.positions, pos);
                self.pending_bytes = self.pending_bytes + waiting_bytes(waiting) - before;
            }
            None => {}
        }
    }
}

/// Positions into a [`Provenance`], through a buffer on the stack for the usual few.
fn provenance_of(positions: impl Iterator<Item = Position>) -> Provenance {
    const INLINE: usize = 8;
    let mut inline = [(0u16, 0i64); INLINE];
    let mut spill = Vec::new();
    let mut n = 0;
    for p in positions {
        if n < INLINE {
            inline[n] = (p.topic, p.offset);
        } else {
            if spill.is_empty() {
                spill.extend_from_slice(&inline);
            }
            spill.push((p.topic, p.offset));
        }
        n += 1;
    }
    if spill.is_empty() {
        Provenance::from_positions(&mut inline[..n])
    } else {
        Provenance::from_positions(&mut spill)
    }
}

/// The provenance of a call's record: its events, and the result that closes it.
pub(super) fn of_call(call: &Call, done: Option<&Done>) -> Provenance {
    provenance_of(call.positions().chain(done.map(|d| d.pos)))
}

/// The provenance of a waiting result's record: its events, its result among them.
pub(super) fn of_waiting(waiting: &WaitingResult) -> Provenance {
    provenance_of(
        waiting
            .positions
            .iter()
            .copied()
            .chain(waiting.done.as_ref().map(|d| d.pos)),
    )
}
