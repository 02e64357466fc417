//! Which thread of `--threads N` a session goes to.
//!
//! A session is placed when it is first seen, on the thread with the fewest sessions seen
//! lately, and stays there. Sessions hashed to threads (modulo N) leave the threads as unequal as
//! the hash falls, and the busiest thread is the whole run's critical path. Counting sessions,
//! not events, matters while sessions start: a thread whose sessions started a little earlier
//! has more events so far without having more work to come.
//!
//! "Lately" is this epoch of `EPOCH` events or the one before, so a session that has ended stops
//! counting within two epochs and new sessions fill its thread. The placement depends only on
//! the input and N (the chunks are split one after another, in order), so a given input and
//! thread count always split the same way. Its table has a fixed size: sessions fall into
//! `GROUPS` groups by a fixed-seed hash and a group is placed as a whole, so a stream of endless
//! new sessions costs no memory, and below some thousands of sessions nearly every session is a
//! group of its own.

use std::hash::BuildHasher;

/// The seed of the hash that groups sessions.
const SEED: u64 = 0x746f_6f6c_6361_6c6c;

/// How many groups the sessions fall into.
const GROUPS: usize = 1 << 16;

/// Events an epoch: a session not seen for two epochs no longer counts as its thread's work.
const EPOCH: u32 = 1 << 14;

/// A group of sessions: its thread plus one, and the epoch it was last seen in (0 for neither:
/// a zeroed table is never touched where no session falls).
#[derive(Clone, Copy, Default)]
struct Group {
    thread: u32,
    seen: u32,
}

pub(super) struct Placement {
    groups: Vec<Group>,
    /// The current epoch, from 2 (0 is "never", and 1 must not pass for the one before).
    epoch: u32,
    /// Events so far in the current epoch.
    events: u32,
    /// Per thread, the groups seen in this epoch or the one before.
    lately: Vec<u32>,
    /// Per thread, the groups seen in this epoch.
    now: Vec<u32>,
}

impl Placement {
    pub fn new(threads: usize) -> Self {
        Placement {
            groups: vec![Group::default(); GROUPS],
            epoch: 2,
            events: 0,
            lately: vec![0; threads],
            now: vec![0; threads],
        }
    }

    pub fn threads(&self) -> usize {
        self.lately.len()
    }

    /// The thread of an event of the session.
    pub fn thread_of(&mut self, source: &str, session: &str) -> usize {
        if self.events == EPOCH {
            self.lately.clone_from(&self.now);
            self.now.fill(0);
            self.epoch = self.epoch.wrapping_add(1).max(2);
            self.events = 0;
        }
        self.events += 1;
        let h = foldhash::fast::FixedState::with_seed(SEED).hash_one((source, session));
        let group = &mut self.groups[(h >> 48) as usize];
        if group.thread == 0 {
            let fewest = (0..self.lately.len())
                .min_by_key(|&w| self.lately[w])
                .unwrap_or(0);
            group.thread = fewest as u32 + 1;
        }
        let w = group.thread as usize - 1;
        if group.seen != self.epoch {
            self.now[w] += 1;
            if group.seen.wrapping_add(1) != self.epoch {
                self.lately[w] += 1;
            }
            group.seen = self.epoch;
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_per_thread(placement: &mut Placement, events: &[(&str, String)]) -> Vec<usize> {
        let mut per = vec![0; placement.threads()];
        for (source, session) in events {
            per[placement.thread_of(source, session)] += 1;
        }
        per
    }

    #[test]
    fn a_session_stays_on_its_thread() {
        let mut p = Placement::new(3);
        let first: Vec<usize> = (0..50)
            .map(|s| p.thread_of("codex", &format!("s{s}")))
            .collect();
        // Placed in turn while the threads have as many sessions.
        assert_eq!(first.iter().filter(|&&w| w == 0).count(), 17);
        for _ in 0..3 * EPOCH / 50 {
            for s in (0..50).rev() {
                assert_eq!(p.thread_of("codex", &format!("s{s}")), first[s]);
            }
        }
        // The source is part of the session's name: another source's s0 is another session.
        assert_eq!(p.thread_of("adk", "s0"), 2);
    }

    #[test]
    fn sessions_that_start_at_different_times_split_evenly() {
        // 400 sessions of equal pace, the first event of session k at event 10 k: counted by
        // events so far, the early sessions would weigh more than the late ones and one thread
        // would end up with more sessions.
        let mut events = Vec::new();
        for i in 0..400_000u64 {
            let started = (i / 10 + 1).min(400);
            events.push(("claude-code", format!("session-{}", (i * 7919) % started)));
        }
        for threads in [2, 3, 4] {
            let per = events_per_thread(&mut Placement::new(threads), &events);
            let (min, max) = (per.iter().min().unwrap(), per.iter().max().unwrap());
            // Within 1 % of the events, two sessions' worth; hashed, the 400 sessions leave the
            // threads 2.5 % apart on two threads.
            assert!(
                (max - min) * 100 <= events.len(),
                "{threads} threads, events per thread: {per:?}"
            );
        }
    }

    #[test]
    fn sessions_that_ended_make_room() {
        let mut p = Placement::new(2);
        // Four sessions, two on each thread; then those on thread 0 end.
        let four: Vec<usize> = (0..4)
            .map(|s| p.thread_of("adk", &format!("a{s}")))
            .collect();
        assert_eq!(four, [0, 1, 0, 1]);
        for _ in 0..2 * EPOCH {
            p.thread_of("adk", "a1");
            p.thread_of("adk", "a3");
        }
        // The first two new sessions go where the ended ones were.
        let new: Vec<usize> = (0..4)
            .map(|s| p.thread_of("adk", &format!("b{s}")))
            .collect();
        assert_eq!(new, [0, 0, 0, 1]);
    }

    #[test]
    fn the_same_input_splits_the_same_way() {
        let events: Vec<(&str, String)> = (0..50_000u64)
            .map(|i| ("gemini-cli", format!("s{}", (i * i) % 997)))
            .collect();
        let mut a = Placement::new(4);
        let mut b = Placement::new(4);
        let a: Vec<usize> = events.iter().map(|(s, n)| a.thread_of(s, n)).collect();
        let b: Vec<usize> = events.iter().map(|(s, n)| b.thread_of(s, n)).collect();
        assert_eq!(a, b);
    }
}
