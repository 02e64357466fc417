//! Every entry of the state by sequence number: the pending calls and waiting results, and the
//! remembered closed calls. The indexes (`indexes.rs`, `scopes.rs`) hold sequence numbers and
//! read keys from here.

use super::hasher::SeqMap;
use crate::state::{Call, Closed, Live};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use toolcalls_model::{CallId, RecordId};

/// Every entry by sequence number: the pending ones (calls and waiting results) and the
/// remembered closed calls. The indexes hold sequence numbers and read keys from here.
#[derive(Debug, Default)]
pub(super) struct Entries {
    /// A hash map: the indexes read an entry's key through it on every probe and every rehash.
    pub(super) live: SeqMap<Box<Live>>,
    /// Pending entries oldest first, for the state cap: taken from `live` when the cap first
    /// evicts, and used up before it is taken again. Entries filed meanwhile are newer than all of
    /// it (sequence numbers only grow), so its first entry still pending is the oldest one.
    evict_order: VecDeque<u64>,
    /// A hash map, like `live`: the id tables read a closed call's first id through it on every
    /// probe and rehash. Inserted only through [`Entries::insert_closed`].
    pub(super) closed: SeqMap<Closed>,
    /// The closed calls' sequence numbers, smallest first, for `max_remembered`; entries expired
    /// meanwhile are skipped when met, and the heap is rebuilt when they outnumber the live ones.
    closed_order: BinaryHeap<Reverse<u64>>,
}

impl Entries {
    /// The oldest pending entry (the smallest sequence number).
    pub(super) fn oldest_live(&mut self) -> Option<u64> {
        loop {
            while let Some(&seq) = self.evict_order.front() {
                if self.live.contains_key(&seq) {
                    return Some(seq);
                }
                self.evict_order.pop_front();
            }
            if self.live.is_empty() {
                return None;
            }
            self.evict_order = self.live_seqs().into();
        }
    }

    /// Remembers closed call `seq`.
    pub(super) fn insert_closed(&mut self, seq: u64, closed: Closed) {
        self.closed.insert(seq, closed);
        self.closed_order.push(Reverse(seq));
        if self.closed_order.len() > 2 * self.closed.len() + 1024 {
            self.closed_order = self.closed.keys().map(|&s| Reverse(s)).collect();
        }
    }

    /// The oldest remembered closed call (the smallest sequence number).
    pub(super) fn oldest_closed(&mut self) -> Option<u64> {
        while let Some(&Reverse(seq)) = self.closed_order.peek() {
            if self.closed.contains_key(&seq) {
                return Some(seq);
            }
            self.closed_order.pop();
        }
        None
    }

    /// The sequence numbers of the pending entries, oldest first.
    pub(super) fn live_seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = self.live.keys().copied().collect();
        seqs.sort_unstable();
        seqs
    }

    pub(super) fn live(&self, seq: u64) -> Option<&Live> {
        self.live.get(&seq).map(|b| &**b)
    }

    pub(super) fn live_mut(&mut self, seq: u64) -> Option<&mut Live> {
        self.live.get_mut(&seq).map(|b| &mut **b)
    }

    pub(super) fn call(&self, seq: u64) -> Option<&Call> {
        match self.live(seq)? {
            Live::Call(call) => Some(call),
            Live::Waiting(_) => None,
        }
    }

    pub(super) fn call_mut(&mut self, seq: u64) -> Option<&mut Call> {
        match self.live_mut(seq)? {
            Live::Call(call) => Some(call),
            Live::Waiting(_) => None,
        }
    }

    /// The id an entry is filed under in its scope's `ids` table: a call's or waiting result's own
    /// id, a closed call's first id.
    pub(super) fn primary_id(&self, seq: u64) -> Option<&str> {
        self.live_primary_id(seq)
            .or_else(|| self.closed_primary_id(seq))
    }

    /// [`primary_id`](Self::primary_id) of a pending entry.
    pub(super) fn live_primary_id(&self, seq: u64) -> Option<&str> {
        match self.live(seq)? {
            Live::Call(call) => call.call_id(),
            Live::Waiting(waiting) => waiting.call_id(),
        }
    }

    /// [`primary_id`](Self::primary_id) of a remembered closed call.
    pub(super) fn closed_primary_id(&self, seq: u64) -> Option<&str> {
        self.closed.get(&seq)?.ids.first().map(CallId::as_str)
    }

    pub(super) fn record_id(&self, seq: u64) -> Option<RecordId> {
        match self.live(seq)? {
            Live::Call(call) => Some(call.record_id),
            Live::Waiting(waiting) => Some(waiting.record_id),
        }
    }
}
