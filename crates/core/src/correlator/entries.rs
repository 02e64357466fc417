//! Every entry of the state by sequence number: the pending calls and waiting results, and the
//! remembered closed calls. The indexes (`indexes.rs`, `scopes.rs`) hold sequence numbers and
//! read keys from here.

use super::hasher::{shrink_if_sparse, SeqMap};
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
    /// meanwhile are skipped when met, and the order is rebuilt when they outnumber the live ones.
    closed_order: SeqOrder,
}

/// Sequence numbers, taken smallest first. Calls mostly close in the order they were made, so
/// numbers mostly come in ascending: those go to the back of a queue (a push, and a pop from its
/// front), the few that come late to a heap.
#[derive(Debug, Default)]
struct SeqOrder {
    ascending: VecDeque<u64>,
    late: BinaryHeap<Reverse<u64>>,
}

impl SeqOrder {
    fn push(&mut self, seq: u64) {
        if self.ascending.back().is_none_or(|&last| last < seq) {
            self.ascending.push_back(seq);
        } else {
            self.late.push(Reverse(seq));
        }
    }

    fn first(&self) -> Option<u64> {
        let late = self.late.peek().map(|r| r.0);
        match (self.ascending.front().copied(), late) {
            (Some(a), Some(l)) => Some(a.min(l)),
            (a, l) => a.or(l),
        }
    }

    fn pop(&mut self) {
        let late = self.late.peek().map(|r| r.0);
        match (self.ascending.front(), late) {
            (Some(&a), Some(l)) if l < a => {
                self.late.pop();
            }
            (Some(_), _) => {
                self.ascending.pop_front();
            }
            (None, _) => {
                self.late.pop();
            }
        }
    }

    fn len(&self) -> usize {
        self.ascending.len() + self.late.len()
    }

    fn of(mut seqs: Vec<u64>) -> SeqOrder {
        seqs.sort_unstable();
        SeqOrder {
            ascending: seqs.into(),
            late: BinaryHeap::new(),
        }
    }
}

impl Entries {
    /// Gives back what a burst of entries left the tables ([`shrink_if_sparse`]).
    pub(super) fn shrink_if_sparse(&mut self) {
        shrink_if_sparse(&mut self.live);
        shrink_if_sparse(&mut self.closed);
    }

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
        self.closed_order.push(seq);
        if self.closed_order.len() > 2 * self.closed.len() + 1024 {
            self.closed_order = SeqOrder::of(self.closed.keys().copied().collect());
        }
    }

    /// The oldest remembered closed call (the smallest sequence number).
    pub(super) fn oldest_closed(&mut self) -> Option<u64> {
        while let Some(seq) = self.closed_order.first() {
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

#[cfg(test)]
mod tests {
    use super::SeqOrder;
    use crate::{Config, Correlator, Effects, Position};
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use toolcalls_model::{Event, Timestamp};

    /// A burst of sessions, each with a call, all of them timed out and forgotten: the scope
    /// table keeps a box's width a slot, and the entry tables give their memory back.
    #[test]
    fn a_burst_of_sessions_gone_leaves_no_table_at_its_size() {
        let mut c = Correlator::without_changelog(Config {
            max_forgotten_sessions: 0,
            ..Config::default()
        });
        let mut out = Effects::default();
        let n = 20_000;
        for i in 0..n {
            let line = format!(
                r#"{{"v":1,"kind":"announce","source":"s","session":"{i}","callId":"c","time":"2026-01-01T00:00:00Z","tool":"t","args":{{}}}}"#
            );
            let event = Event::decode(line.as_bytes()).expect("an event");
            c.apply(event, Position::new(0, i), &mut out);
        }
        assert!(c.entries.live.capacity() >= n as usize);
        let days_later = Timestamp::from_millis(1_767_225_600_000 + 10 * 86_400_000);
        c.advance(days_later, &mut out);
        assert_eq!(out.records.len(), n as usize, "every call timed out");
        assert!(
            c.scopes.slots.iter().all(Option::is_none),
            "every scope dropped"
        );
        assert_eq!(std::mem::size_of_val(&c.scopes.slots[0]), 8);
        assert!(
            c.entries.live.capacity() < 2_048 && c.entries.closed.capacity() < 2_048,
            "live {}, closed {}",
            c.entries.live.capacity(),
            c.entries.closed.capacity()
        );
    }

    proptest! {
        /// Pushed in any order, mostly ascending, numbers come out smallest first.
        #[test]
        fn takes_the_smallest_first(ops in prop::collection::vec((0u8..8, 0u64..64), 0..400)) {
            let (mut order, mut model, mut next) = (SeqOrder::default(), BTreeSet::new(), 0u64);
            for (op, back) in ops {
                match op {
                    0..=4 => {
                        next += 1;
                        order.push(next * 64);
                        model.insert(next * 64);
                    }
                    5 => {
                        let seq = (next * 64).saturating_sub(back * 64) + 1 + back % 63;
                        if model.insert(seq) {
                            order.push(seq);
                        }
                    }
                    _ => {
                        prop_assert_eq!(order.first(), model.first().copied());
                        if model.pop_first().is_some() {
                            order.pop();
                        }
                    }
                }
                prop_assert_eq!(order.len(), model.len());
            }
            while let Some(seq) = model.pop_first() {
                prop_assert_eq!(order.first(), Some(seq));
                order.pop();
            }
            prop_assert_eq!(order.first(), None);
        }
    }
}
