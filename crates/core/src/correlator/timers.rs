//! A scope's deadlines, `(when, seq)`, taken in order: [`Timers`].
//!
//! Deadlines mostly come in order within a kind: a call's timeout, a waiting result's grace, a
//! closed call's expiry are each the event time plus a fixed span, and a scope's event time
//! seldom goes back. So the deadlines are kept as a few sorted runs (vectors appended to in order,
//! one per such stream as it turns out, each holding one [`Kind`]), with a B-tree only for the
//! ones that fit no run — a turn end bringing deadlines closer, events out of order. A run holds
//! deadlines of one kind so that taking one out searches only the runs of its kind: the spans
//! are alike, so a call's timeout falls inside the range of the expiry run too, and searching
//! that run in vain cost as much as finding the deadline. A run costs 16 bytes a deadline where
//! a B-tree costs about 37 (docs/ARCHITECTURE.md, Correlation → Memory), appending to it is a
//! push, and taking out a deadline before it is due (most calls close by their result) marks it
//! taken in place, found by binary search. The order they are taken in is that of
//! `BTreeSet<(Timestamp, u64)>`: `(when, seq)` ascending.

use std::collections::BTreeSet;
use toolcalls_model::Timestamp;

/// Most runs a scope keeps; a deadline no run can take in order goes to the B-tree.
const MAX_RUNS: usize = 4;
/// Marks a deadline taken out of a run (sequence numbers stay below it).
const TAKEN: u64 = 1 << 63;
/// A run is compacted once more than this many of its deadlines, and more than half, are taken.
const COMPACT_MIN: usize = 32;
/// A run's vector gives memory back only above this capacity.
const SHRINK_MIN: usize = 1024;

type Key = (Timestamp, u64);

/// What a deadline is for: the entry field it was filed from. Filing and taking out one
/// deadline name the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Kind {
    /// A pending call's deadline (its timeout, a turn end, a denial).
    #[default]
    Call,
    /// A result waiting for its announce.
    Waiting,
    /// A closed call's expiry.
    Closed,
}

/// One sorted run: `entries[head..]` ascending by `(when, seq & !TAKEN)`, `entries[head]` never
/// taken.
#[derive(Debug, Default)]
struct Run {
    entries: Vec<Key>,
    head: usize,
    /// How many of `entries[head..]` are taken.
    taken: usize,
    /// The last deadline, unmarked; `None` when the run is empty. Kept here, beside the vector's
    /// pointer, because every insert and removal compares it for each run of the scope: read
    /// from the vector it was a cache miss per run.
    last: Option<Key>,
    /// The kind of every deadline in the run; an empty run takes any.
    kind: Kind,
}

impl Run {
    fn is_empty(&self) -> bool {
        self.head == self.entries.len()
    }

    fn first(&self) -> Option<Key> {
        self.entries.get(self.head).copied()
    }

    fn last(&self) -> Option<Key> {
        self.last
    }

    /// Sets [`Run::last`] from the vector, after it lost entries.
    fn refresh_last(&mut self) {
        self.last = if self.is_empty() {
            None
        } else {
            self.entries.last().map(|&(at, seq)| (at, seq & !TAKEN))
        };
    }

    fn push(&mut self, key: Key) {
        if self.is_empty() {
            self.entries.clear();
            self.head = 0;
            self.taken = 0;
        }
        self.entries.push(key);
        self.last = Some(key);
    }

    /// Where `key` is in `entries[head..]`. Deadlines are taken out mostly near the end (calls
    /// close by their result soon after they were filed), so it gallops back from the last one
    /// before it searches: the memory the run touched lately, not its cold middle.
    fn find(&self, key: Key) -> Option<usize> {
        let live = &self.entries[self.head..];
        let unmarked = |i: usize| (live[i].0, live[i].1 & !TAKEN);
        let (mut lo, mut hi, mut step) = (0, live.len(), 1);
        while step <= live.len() {
            let probe = live.len() - step;
            match unmarked(probe).cmp(&key) {
                std::cmp::Ordering::Equal => return Some(probe),
                std::cmp::Ordering::Less => {
                    lo = probe + 1;
                    break;
                }
                std::cmp::Ordering::Greater => hi = probe,
            }
            step *= 2;
        }
        let found = live[lo..hi].binary_search_by(|&(at, seq)| (at, seq & !TAKEN).cmp(&key));
        found.ok().map(|i| lo + i)
    }

    /// Takes `key` out if the run holds it.
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        let entry = &mut self.entries[self.head + i].1;
        if *entry & TAKEN != 0 {
            return false;
        }
        *entry |= TAKEN;
        self.taken += 1;
        if i == 0 {
            self.skip_taken();
        }
        self.compact();
        true
    }

    /// Takes the first deadline out.
    fn pop(&mut self) -> Option<Key> {
        let first = self.first()?;
        self.head += 1;
        self.skip_taken();
        self.compact();
        Some(first)
    }

    /// Moves `head` past taken deadlines.
    fn skip_taken(&mut self) {
        while self.head < self.entries.len() && self.entries[self.head].1 & TAKEN != 0 {
            self.head += 1;
            self.taken -= 1;
        }
    }

    /// Empties the run once it is used up, and compacts it when taken deadlines or the consumed
    /// front outweigh what is left (from the counts alone: it reads no entry unless it moves them).
    fn compact(&mut self) {
        let left = self.entries.len() - self.head;
        if self.is_empty() {
            self.entries.clear();
            self.head = 0;
            self.taken = 0;
            self.last = None;
        } else if self.taken > COMPACT_MIN && self.taken * 2 > left {
            let head = self.head;
            let mut i = 0;
            self.entries.retain(|&(_, seq)| {
                i += 1;
                i > head && seq & TAKEN == 0
            });
            self.head = 0;
            self.taken = 0;
            self.refresh_last();
        } else if self.head > COMPACT_MIN && self.head > left {
            self.entries.drain(..self.head);
            self.head = 0;
        } else {
            return;
        }
        // Memory a burst left behind goes back once it matters; small runs keep theirs, not to
        // grow again and again.
        if self.entries.capacity() > SHRINK_MIN && self.entries.capacity() > 4 * self.entries.len()
        {
            self.entries.shrink_to(2 * self.entries.len());
        }
    }
}

/// A scope's deadlines: `(when, seq)`, unique, taken smallest first.
#[derive(Debug, Default)]
pub(super) struct Timers {
    runs: Vec<Run>,
    /// Deadlines that came out of order for every run.
    late: BTreeSet<Key>,
    /// The earliest deadline of all: a scope's is asked for at every event.
    next: Option<Key>,
}

impl Timers {
    pub(super) fn insert(&mut self, at: Timestamp, seq: u64, kind: Kind) {
        debug_assert!(seq & TAKEN == 0, "sequence numbers stay below 2^63");
        let key = (at, seq);
        // The run of its kind whose last deadline is the latest one not after `key`: it keeps
        // the runs apart (each stream of deadlines finds the run it has been filling).
        let mut best: Option<(usize, Key)> = None;
        let mut empty = None;
        for (i, run) in self.runs.iter().enumerate() {
            match run.last() {
                None => empty = empty.or(Some(i)),
                Some(last)
                    if run.kind == kind && last < key && best.is_none_or(|(_, b)| last > b) =>
                {
                    best = Some((i, last));
                }
                Some(_) => {}
            }
        }
        if let Some((i, _)) = best {
            self.runs[i].push(key);
        } else if let Some(i) = empty {
            self.runs[i].kind = kind;
            self.runs[i].push(key);
        } else if self.runs.len() < MAX_RUNS {
            let mut run = Run {
                kind,
                ..Run::default()
            };
            run.push(key);
            self.runs.push(run);
        } else {
            let fresh = self.late.insert(key);
            debug_assert!(fresh, "a deadline is filed once");
        }
        if self.next.is_none_or(|next| key < next) {
            self.next = Some(key);
        }
    }

    /// Takes deadline `(at, seq)`, filed as `kind`, out; whether it was there.
    pub(super) fn remove(&mut self, at: Timestamp, seq: u64, kind: Kind) -> bool {
        let key = (at, seq);
        for run in &mut self.runs {
            // A run's first deadline is seldom in cache; its last one is.
            let within = run.kind == kind && run.last().is_some_and(|last| key <= last);
            if within && run.remove(key) {
                self.refresh(key);
                return true;
            }
        }
        let removed = self.late.remove(&key);
        if removed {
            self.refresh(key);
        }
        removed
    }

    /// The earliest deadline.
    pub(super) fn first(&self) -> Option<Key> {
        self.next
    }

    /// Takes the earliest deadline out.
    pub(super) fn pop_first(&mut self) -> Option<Key> {
        let first = self.next?;
        match self.runs.iter_mut().find(|r| r.first() == Some(first)) {
            Some(run) => run.pop(),
            None => self.late.pop_first(),
        };
        self.refresh(first);
        Some(first)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.next.is_none()
    }

    /// Finds the earliest deadline again once `gone`, which may have been it, is out.
    fn refresh(&mut self, gone: Key) {
        if self.next == Some(gone) {
            let runs = self.runs.iter().filter_map(Run::first);
            self.next = runs.chain(self.late.first().copied()).min();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ops() -> impl Strategy<Value = Vec<(u8, i64, u64)>> {
        // (op, when, seq): op 0..=5 insert (an in-order stream per op, or anywhere), 6..=8 remove
        // one filed, 9 pop.
        prop::collection::vec((0u8..10, 0i64..400, 0u64..10_000), 0..2_000)
    }

    proptest! {
        /// Every sequence of inserts, removals and pops takes deadlines out as a B-tree set does.
        #[test]
        fn orders_as_a_btree_set(ops in ops()) {
            let mut timers = Timers::default();
            let mut model = std::collections::BTreeMap::new();
            let kinds = [Kind::Call, Kind::Waiting, Kind::Closed];
            let mut streams = [0i64; 3];
            let mut next_seq = 0u64;
            for (op, when, pick) in ops {
                match op {
                    0..=5 => {
                        let at = match op {
                            0..=2 => {
                                streams[op as usize] += when % 7;
                                streams[op as usize] + 1_000 * i64::from(op)
                            }
                            _ => when,
                        };
                        next_seq += 1;
                        let kind = kinds[(op as usize).max(pick as usize) % 3];
                        timers.insert(Timestamp(at), next_seq, kind);
                        model.insert((Timestamp(at), next_seq), kind);
                    }
                    6..=8 => {
                        let filed: Vec<_> = model.iter().map(|(&k, &kind)| (k, kind)).collect();
                        let picked = filed.get(pick as usize % filed.len().max(1));
                        if let Some(&((at, seq), kind)) = picked {
                            prop_assert!(timers.remove(at, seq, kind));
                            model.remove(&(at, seq));
                        }
                        let kind = kinds[pick as usize % 3];
                        prop_assert!(!timers.remove(Timestamp(when), 20_000 + pick, kind));
                    }
                    _ => {
                        prop_assert_eq!(timers.pop_first(), model.pop_first().map(|(k, _)| k));
                    }
                }
                prop_assert_eq!(timers.first(), model.first_key_value().map(|(&k, _)| k));
                prop_assert_eq!(timers.is_empty(), model.is_empty());
                for run in &timers.runs {
                    for &(at, seq) in &run.entries[run.head..] {
                        if seq & TAKEN == 0 {
                            prop_assert_eq!(model.get(&(at, seq)), Some(&run.kind), "one kind a run");
                        }
                    }
                    let mut fresh = Run { last: None, ..Default::default() };
                    fresh.entries.clone_from(&run.entries);
                    fresh.head = run.head;
                    fresh.refresh_last();
                    prop_assert_eq!(run.last, fresh.last, "the run's last deadline, kept");
                }
            }
            while let Some((key, _)) = model.pop_first() {
                prop_assert_eq!(timers.pop_first(), Some(key));
            }
            prop_assert!(timers.is_empty());
        }
    }

    #[test]
    fn a_removed_deadline_is_not_removed_twice() {
        let mut timers = Timers::default();
        for seq in 0..100 {
            timers.insert(Timestamp(seq as i64), seq, Kind::Call);
        }
        assert!(timers.remove(Timestamp(50), 50, Kind::Call));
        assert!(!timers.remove(Timestamp(50), 50, Kind::Call));
        assert!(!timers.remove(Timestamp(50), 51, Kind::Call));
        let order: Vec<u64> = std::iter::from_fn(|| timers.pop_first().map(|(_, s)| s)).collect();
        let expected: Vec<u64> = (0..100).filter(|&s| s != 50).collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn compaction_keeps_what_was_not_taken() {
        let mut timers = Timers::default();
        for seq in 0..1_000u64 {
            timers.insert(Timestamp(seq as i64 / 3), seq, Kind::Closed);
        }
        // Take out all but every seventh, from the back, so the run compacts with its head in
        // place, then pop a few and take out more from the front.
        for seq in (0..1_000u64).rev().filter(|s| s % 7 != 0) {
            assert!(timers.remove(Timestamp(seq as i64 / 3), seq, Kind::Closed));
        }
        assert!(timers.runs[0].entries.len() < 1_000, "the run compacted");
        let kept: Vec<u64> = std::iter::from_fn(|| timers.pop_first().map(|(_, s)| s)).collect();
        let expected: Vec<u64> = (0..1_000u64).filter(|s| s % 7 == 0).collect();
        assert_eq!(kept, expected);
        assert!(timers.is_empty());
    }

    #[test]
    fn in_order_streams_stay_in_runs() {
        let mut timers = Timers::default();
        // Three interleaved streams, each in order, as timeouts, graces and expiries come.
        for i in 0..1_000i64 {
            timers.insert(Timestamp(i + 30_000), 3 * i as u64, Kind::Call);
            timers.insert(Timestamp(i + 10_000), 3 * i as u64 + 1, Kind::Waiting);
            timers.insert(Timestamp(i + 5_000), 3 * i as u64 + 2, Kind::Closed);
        }
        assert!(timers.late.is_empty());
        assert_eq!(timers.runs.len(), 3);
    }

    #[test]
    fn kinds_with_the_same_span_keep_their_own_runs() {
        // Timeouts and expiries a call timeout after their events: each expiry comes after the
        // timeout of its own call, so one run could hold both in order, and each removal of a
        // timeout would search the expiries too.
        let mut timers = Timers::default();
        for i in 0..1_000u64 {
            let at = Timestamp(i as i64 * 10 + 30_000);
            timers.insert(at, 2 * i, Kind::Call);
            if i > 0 {
                assert!(timers.remove(
                    Timestamp((i as i64 - 1) * 10 + 30_000),
                    2 * i - 2,
                    Kind::Call
                ));
                timers.insert(Timestamp(at.0 - 5), 2 * i - 1, Kind::Closed);
            }
        }
        assert!(timers.late.is_empty());
        let kinds: Vec<Kind> = timers
            .runs
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.kind)
            .collect();
        assert_eq!(kinds, [Kind::Call, Kind::Closed]);
        assert_eq!(
            timers.runs[0].entries.len() - timers.runs[0].head,
            1,
            "the timeouts run holds the pending one"
        );
    }
}
