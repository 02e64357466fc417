//! Distinct times for id-less calls that say the same thing: [`Stamps`].
//!
//! The processor knows a repeat of an event without an id by what it says, its time to the
//! millisecond included (docs/ARCHITECTURE.md, Correlation → Repeats); two calls one file reports
//! alike — parallel calls with the same tool and arguments in one message, which share the
//! message's time — would be taken for one. So an id-less announce or completion that says what an
//! earlier one of the file said, at the same time, is moved on by a millisecond until it does
//! not. A file read twice is stamped the same twice, and a file read in pieces (the [`Stamps`]
//! kept between them) as when read whole.

use std::collections::{HashMap, HashSet};
use toolcalls_model::{Checksum, Event, EventBody, Timestamp};

/// The times given so far, by what the events said.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    /// (what an event says, hashed; its time) of every event stamped.
    taken: HashSet<(u64, i64)>,
    /// For a (what, time) asked for again while taken: the last time given from it. Every time
    /// from the one asked for to that one is taken (times are only ever added), so the next event
    /// asking for it looks on from there — n events alike at one time cost n steps, not n²/2.
    last_from: HashMap<(u64, i64), i64>,
}

impl Stamps {
    /// Moves each id-less announce and completion of `events` on to the first millisecond, from
    /// its own, at which nothing stamped before said the same.
    pub(crate) fn stamp(&mut self, events: &mut [Event]) {
        for e in events.iter_mut().filter(|e| e.call_id.is_none()) {
            let Some(key) = what_it_says(e) else {
                continue;
            };
            let time = self.give(key, e.time.millis());
            e.time = Timestamp::from_millis(time);
        }
    }

    /// The first millisecond from `asked` on at which `key` was not stamped yet, now taken.
    fn give(&mut self, key: u64, asked: i64) -> i64 {
        if self.taken.insert((key, asked)) {
            return asked;
        }
        let mut time = self.last_from.get(&(key, asked)).copied().unwrap_or(asked);
        while !self.taken.insert((key, time)) {
            match time.checked_add(1) {
                Some(next) => time = next,
                // The end of time: it stays (as the clamp to RFC 3339 would make it anyway).
                None => break,
            }
        }
        self.last_from.insert((key, asked), time);
        time
    }
}

/// What an id-less announce or completion says, hashed with its scope: 16 bytes per event kept,
/// not its result.
fn what_it_says(e: &Event) -> Option<u64> {
    let what = match &e.body {
        EventBody::Announce(a) => format!(
            "a\0{}\0{:?}",
            a.tool,
            a.checksum.as_ref().map(Checksum::as_str)
        ),
        EventBody::Completion(c) => format!(
            "c\0{:?}\0{:?}\0{:?}\0{}{}",
            c.tool,
            c.checksum.as_ref().map(Checksum::as_str),
            c.result.as_ref().map(|j| j.as_str()),
            c.is_error,
            c.cancelled
        ),
        _ => return None,
    };
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (
        e.source.as_str(),
        e.session.as_str(),
        e.thread.as_ref().map(|t| t.as_str()),
        what,
    )
        .hash(&mut h);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`Stamps::give`] must give: the first free millisecond, found one by one.
    #[derive(Default)]
    struct Model(HashSet<(u64, i64)>);

    impl Model {
        fn give(&mut self, key: u64, asked: i64) -> i64 {
            let mut time = asked;
            while !self.0.insert((key, time)) {
                time += 1;
            }
            time
        }
    }

    #[test]
    fn gives_what_looking_one_by_one_gives() {
        // A small xorshift: a fixed sequence of keys and times crowded enough to collide often.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let (mut stamps, mut model) = (Stamps::default(), Model::default());
            for _ in 0..400 {
                let key = next() % 3;
                let asked = (next() % (5 + round)) as i64;
                assert_eq!(
                    stamps.give(key, asked),
                    model.give(key, asked),
                    "round {round}"
                );
            }
        }
    }

    #[test]
    fn many_alike_take_a_step_each() {
        let mut stamps = Stamps::default();
        for i in 0..200_000 {
            assert_eq!(stamps.give(7, 1_000), 1_000 + i);
        }
        assert_eq!(stamps.give(7, i64::MAX), i64::MAX);
        assert_eq!(stamps.give(7, i64::MAX), i64::MAX, "the end of time stays");
    }
}
