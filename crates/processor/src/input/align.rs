//! Timestamp alignment of a partition's two input topics.
//!
//! The announce and completion partitions `p` are fetched independently, and a broker may serve
//! one far ahead of the other (Tansu fills a fetch response topic by topic, so on a backlog the
//! whole announce partition arrives before the first completion). Applied in arrival order, every
//! call of such a backlog would be pending before its result arrives: more memory, more changelog,
//! and matching that depends on how the fetches happened to interleave.
//!
//! So a partition task buffers what the consumer thread delivers, per topic, and applies the two
//! topics merged by message timestamp, as Kafka Streams does for the partitions of one task: the
//! next message is the older of the two topics' heads (the announce on a tie). When one topic has
//! nothing buffered, the other's head waits — but only while the empty topic may still deliver
//! something older:
//!
//! - not when the empty topic already delivered a message newer than the head, or as new when the
//!   head is an announce (topics are read in offset order, and a producer stamps messages in
//!   order);
//! - not when the consumer's statistics show the empty topic caught up — every stable message of
//!   the partition delivered — in a snapshot taken at least `wait / 2` after the head arrived.
//!   Live, an agent's announce and its result are produced milliseconds apart to two topics, and
//!   the result may reach the broker and the consumer first; statistics from before then say
//!   nothing of the announce on its way (librdkafka takes them every 250 ms, and a fetch of a
//!   partition at its end returns within 100 ms, `client.rs`). So live input waits about a
//!   quarter of a second, not for the whole `wait`;
//! - not when the empty topic delivered nothing for `wait` since the head arrived (wall clock):
//!   a stalled fetch or a topic whose statistics are not known yet delays input by at most that;
//! - (back-pressure never stops a topic the task has nothing buffered of: the consumer thread
//!   goes on reading it, see [`super::consumer`], so such a wait always ends);
//! - never when `wait` is zero (arrival order).
//!
//! Each topic stays in offset order, so the offsets a checkpoint commits are unaffected.

use super::batch::{InBatch, InMsg};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A buffered batch and how many of its messages are not applied yet.
struct Slot {
    batch: InBatch,
    left: usize,
}

/// A message's place: the batch's sequence number and its index in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    batch: u64,
    index: u32,
}

/// Messages `next..end` of batch `batch`, all of one topic (of both, in arrival order), which
/// arrived at `arrived`.
#[derive(Debug, Clone, Copy)]
struct Run {
    batch: u64,
    next: u32,
    end: u32,
    arrived: Instant,
}

/// How often a message that waits for statistics looks at them again: the consumer thread
/// stores them without waking the partition task.
const STATISTICS_POLL: Duration = Duration::from_millis(50);

impl Run {
    fn head(&self) -> At {
        At {
            batch: self.batch,
            index: self.next,
        }
    }
}

/// What the aligner says about the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Apply this message (of topic `At`'s topic) next.
    Apply(At),
    /// A message waits for the other topic until this instant (or until it delivers).
    WaitUntil(Instant),
    /// Nothing buffered.
    Empty,
}

/// The buffered input of one partition, per topic, in arrival order.
pub(crate) struct Aligner {
    slots: VecDeque<Slot>,
    /// Sequence number of `slots[0]`.
    first: u64,
    /// Messages not yet applied, per topic (0 announce, 1 completion), in offset order, as runs of
    /// one batch's consecutive messages of that topic (a burst of a topic is one run, so a queue
    /// stays short however much is buffered).
    queues: [VecDeque<Run>; 2],
    /// Newest timestamp each topic delivered, and when it last delivered (wall clock).
    newest: [Option<i64>; 2],
    seen_at: [Instant; 2],
    /// How long a message waits for the other topic; zero applies in arrival order.
    wait: Duration,
    /// Nothing was pushed yet (`seen_at` starts with the first input).
    fresh: bool,
}

impl Aligner {
    pub fn new(wait: Duration) -> Self {
        let now = Instant::now();
        Aligner {
            slots: VecDeque::new(),
            first: 0,
            queues: [VecDeque::new(), VecDeque::new()],
            newest: [None; 2],
            seen_at: [now; 2],
            wait,
            fresh: true,
        }
    }

    /// Buffers a batch from the consumer thread, received at `now`.
    pub fn push(&mut self, batch: InBatch, now: Instant) {
        if self.fresh {
            self.fresh = false;
            self.seen_at = [now; 2];
        }
        let seq = self.first + self.slots.len() as u64;
        let n = batch.len() as u32;
        if self.wait.is_zero() && n > 0 {
            // Arrival order: one queue keeps the batch's order across both topics.
            self.queues[0].push_back(Run {
                batch: seq,
                next: 0,
                end: n,
                arrived: now,
            });
        }
        let mut run: Option<(usize, u32)> = None;
        for i in 0..n {
            let (topic, ts) = batch.order_key(i as usize);
            let t = usize::from(topic.min(1));
            if !self.wait.is_zero() {
                match run {
                    Some((rt, _)) if rt == t => {}
                    _ => {
                        if let Some((rt, start)) = run {
                            self.queues[rt].push_back(Run {
                                batch: seq,
                                next: start,
                                end: i,
                                arrived: now,
                            });
                        }
                        run = Some((t, i));
                    }
                }
            }
            if let Some(ts) = ts {
                self.newest[t] = Some(self.newest[t].map_or(ts, |n| n.max(ts)));
            }
            self.seen_at[t] = now;
        }
        if let Some((rt, start)) = run {
            self.queues[rt].push_back(Run {
                batch: seq,
                next: start,
                end: n,
                arrived: now,
            });
        }
        let left = batch.len();
        self.slots.push_back(Slot { batch, left });
    }

    /// Messages buffered and not applied.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queues
            .iter()
            .flatten()
            .map(|r| (r.end - r.next) as usize)
            .sum()
    }

    fn timestamp(&self, at: At) -> i64 {
        let slot = &self.slots[(at.batch - self.first) as usize];
        slot.batch
            .order_key(at.index as usize)
            .1
            .unwrap_or(i64::MIN)
    }

    /// The next message to apply. `caught_up`: per topic, when the consumer's latest statistics,
    /// taken then, showed everything delivered (`None` when they did not).
    pub fn next(&self, now: Instant, caught_up: [Option<Instant>; 2]) -> Next {
        let heads = [
            self.queues[0].front().map(Run::head),
            self.queues[1].front().map(Run::head),
        ];
        match heads {
            [None, None] => Next::Empty,
            [Some(a), Some(c)] => {
                if self.timestamp(c) < self.timestamp(a) {
                    Next::Apply(c)
                } else {
                    Next::Apply(a)
                }
            }
            [Some(head), None] | [None, Some(head)] => {
                let empty = usize::from(heads[1].is_none());
                if self.wait.is_zero() {
                    return Next::Apply(head);
                }
                let ts = self.timestamp(head);
                // The announce goes first on a tie: an announce as old may still come for a
                // completion, while a completion as old would go after an announce anyway.
                let newer = |n: i64| n > ts || (n == ts && empty == 1);
                if self.newest[empty].is_some_and(newer) {
                    return Next::Apply(head);
                }
                let arrived = self.queues[1 - empty]
                    .front()
                    .map_or(now, |run| run.arrived);
                let settled = arrived + self.wait / 2;
                if caught_up[empty].is_some_and(|at| at >= settled) {
                    return Next::Apply(head);
                }
                let until = self.seen_at[empty].max(arrived) + self.wait;
                if now >= until {
                    Next::Apply(head)
                } else {
                    Next::WaitUntil(until.min(settled.max(now + STATISTICS_POLL)))
                }
            }
        }
    }

    /// The message at `at`.
    pub fn get(&self, at: At) -> InMsg<'_> {
        self.slots[(at.batch - self.first) as usize]
            .batch
            .get(at.index as usize)
    }

    /// Bytes `at` counts for the in-flight limit.
    pub fn size(&self, at: At) -> usize {
        self.slots[(at.batch - self.first) as usize]
            .batch
            .msg_size(at.index as usize)
    }

    /// Marks `at`, the head of its queue as [`Aligner::next`] named it, applied. Batches whose
    /// messages are all applied are freed from the front.
    pub fn pop(&mut self, at: At) {
        let slot = &mut self.slots[(at.batch - self.first) as usize];
        let topic = if self.wait.is_zero() {
            0
        } else {
            usize::from(slot.batch.order_key(at.index as usize).0.min(1))
        };
        let queue = &mut self.queues[topic];
        if let Some(run) = queue.front_mut() {
            debug_assert_eq!(run.head(), at, "messages are applied in queue order");
            run.next += 1;
            if run.next == run.end {
                queue.pop_front();
            }
        }
        slot.left -= 1;
    }

    /// Spent batches at the front, to hand back to the pool.
    pub fn take_spent(&mut self) -> Option<InBatch> {
        if self.slots.front().is_some_and(|s| s.left == 0) {
            self.first += 1;
            return self.slots.pop_front().map(|s| s.batch);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(500);

    /// A batch of (topic, offset, timestamp) messages, payload "topic:offset".
    fn batch(msgs: &[(u16, i64, i64)]) -> InBatch {
        let mut b = InBatch::new(0);
        for &(topic, offset, ts) in msgs {
            b.push(
                topic,
                offset,
                Some(ts),
                None,
                Some(format!("{topic}:{offset}").as_bytes()),
            );
        }
        b
    }

    /// Applies everything `next` hands out at `now`; returns (topic, offset) in that order.
    fn drain(a: &mut Aligner, now: Instant, caught_up: [Option<Instant>; 2]) -> Vec<(u16, i64)> {
        let mut out = Vec::new();
        while let Next::Apply(at) = a.next(now, caught_up) {
            let m = a.get(at);
            out.push((m.topic, m.offset));
            a.pop(at);
        }
        out
    }

    const UNKNOWN: [Option<Instant>; 2] = [None; 2];

    #[test]
    fn topics_are_merged_by_timestamp_announce_first_on_ties() {
        let mut a = Aligner::new(WAIT);
        let now = Instant::now();
        // Batches mix the topics in arrival order, which is not timestamp order.
        a.push(batch(&[(0, 10, 100), (0, 11, 300), (1, 50, 50)]), now);
        a.push(batch(&[(1, 51, 300), (0, 12, 400), (1, 52, 450)]), now);
        assert_eq!(
            drain(&mut a, now, UNKNOWN),
            [(1, 50), (0, 10), (0, 11), (1, 51), (0, 12)],
            "completion 52 waits: the announce topic may still deliver something older"
        );
        // It looks again when statistics that could settle it may have come.
        assert_eq!(a.next(now, UNKNOWN), Next::WaitUntil(now + WAIT / 2));
        // An announce at 460 settles it: completion 52 first (older), then the announce.
        a.push(batch(&[(0, 13, 460)]), now);
        assert_eq!(drain(&mut a, now, UNKNOWN), [(1, 52)]);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn a_message_waits_only_while_the_other_topic_may_deliver_older_ones() {
        let now = Instant::now();
        let fresh = || {
            let mut a = Aligner::new(WAIT);
            a.push(batch(&[(1, 0, 10)]), now);
            a.push(batch(&[(0, 0, 100)]), now);
            a.pop(match a.next(now, UNKNOWN) {
                Next::Apply(at) => at,
                other => panic!("{other:?}"),
            });
            a
        };
        // The completion topic delivered only older messages and may deliver more: wait.
        let a = fresh();
        assert_eq!(a.next(now, UNKNOWN), Next::WaitUntil(now + WAIT / 2));
        // Statistics from about when the announce arrived say nothing of a completion on its way
        // to the broker; statistics taken half the wait later do.
        assert_eq!(
            a.next(now, [None, Some(now)]),
            Next::WaitUntil(now + WAIT / 2)
        );
        let settled = now + WAIT / 2;
        assert!(matches!(
            a.next(settled, [None, Some(settled)]),
            Next::Apply(_)
        ));
        // Between those, it looks at the statistics again every STATISTICS_POLL.
        let later = now + WAIT / 2 + Duration::from_millis(10);
        assert_eq!(
            a.next(later, [None, Some(now)]),
            Next::WaitUntil(later + STATISTICS_POLL)
        );
        // Not once the topic has been quiet for the wait since the message arrived.
        assert!(matches!(a.next(now + WAIT, UNKNOWN), Next::Apply(_)));
        // Not when it already delivered something newer (a_completion_waits_… has the ties).
        let mut a = fresh();
        a.push(batch(&[(1, 1, 101)]), now);
        assert_eq!(drain(&mut a, now, UNKNOWN), [(0, 0)]);
        assert_eq!(a.next(now, UNKNOWN), Next::WaitUntil(now + WAIT / 2));
        a.push(batch(&[(0, 1, 102)]), now);
        assert_eq!(drain(&mut a, now, UNKNOWN), [(1, 1)]);
        // A zero wait applies in arrival order, across topics.
        let mut a = Aligner::new(Duration::ZERO);
        a.push(batch(&[(0, 0, 300), (1, 0, 10), (0, 1, 5)]), now);
        assert_eq!(drain(&mut a, now, UNKNOWN), [(0, 0), (1, 0), (0, 1)]);
    }

    #[test]
    fn a_completion_waits_for_an_announce_of_its_own_time() {
        let now = Instant::now();
        let then = now + WAIT;
        // An announce of the completion's time is no proof that none is to come: another may
        // share the millisecond, and it would go first.
        let mut a = Aligner::new(WAIT);
        a.push(batch(&[(0, 0, 200)]), now);
        assert_eq!(drain(&mut a, then, UNKNOWN), [(0, 0)]);
        a.push(batch(&[(1, 0, 200)]), then);
        assert_eq!(a.next(then, UNKNOWN), Next::WaitUntil(then + WAIT / 2));
        // A newer announce is.
        let mut a = Aligner::new(WAIT);
        a.push(batch(&[(0, 0, 201)]), now);
        assert_eq!(drain(&mut a, then, UNKNOWN), [(0, 0)]);
        a.push(batch(&[(1, 0, 200)]), then);
        assert!(matches!(a.next(then, UNKNOWN), Next::Apply(_)));
        // For an announce, a completion of its time is: it goes after the announce anyway.
        let mut a = Aligner::new(WAIT);
        a.push(batch(&[(1, 0, 200)]), now);
        assert_eq!(drain(&mut a, then, UNKNOWN), [(1, 0)]);
        a.push(batch(&[(0, 0, 200)]), then);
        assert!(matches!(a.next(then, UNKNOWN), Next::Apply(_)));
    }

    #[test]
    fn the_wait_counts_from_the_arrival_and_spent_batches_leave_in_order() {
        let start = Instant::now();
        let mut a = Aligner::new(WAIT);
        assert_eq!(a.next(start, UNKNOWN), Next::Empty);
        let later = start + Duration::from_secs(5);
        a.push(batch(&[(0, 0, 100), (0, 1, 200)]), later);
        a.push(batch(&[(1, 0, 150)]), later);
        assert_eq!(
            a.next(later, UNKNOWN),
            Next::Apply(At { batch: 0, index: 0 })
        );
        assert_eq!(drain(&mut a, later, UNKNOWN), [(0, 0), (1, 0)]);
        // The second batch is spent, the first is not: nothing leaves yet.
        assert!(a.take_spent().is_none());
        assert_eq!(a.next(later, UNKNOWN), Next::WaitUntil(later + WAIT / 2));
        assert_eq!(drain(&mut a, later + WAIT, UNKNOWN), [(0, 1)]);
        let spent: Vec<usize> = std::iter::from_fn(|| a.take_spent())
            .map(|b| b.len())
            .collect();
        assert_eq!(spent, [2, 1]);
        assert_eq!((a.len(), a.next(later, UNKNOWN)), (0, Next::Empty));
    }
}
